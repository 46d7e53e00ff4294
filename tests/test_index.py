"""FAISS index, per-tool aggregation, the lexical signal and the on-disk vector cache."""
import os
import signal
import sqlite3
import subprocess
import sys

import numpy as np

from funes.selection import vector_cache
from funes.selection.encoder import Encoder
from funes.selection.vector_cache import VectorCache
from funes.selection.index import VectorIndex, group_topk_mean
from funes.selection.ngrams import CharNgrams, LexicalIndex


def test_group_topk_mean():
    values = np.array([0.9, 0.1, 0.5, 0.7, 0.3], dtype=np.float32)
    owner = np.array([0, 0, 0, 1, 1])
    np.testing.assert_allclose(group_topk_mean(values, owner, 3, k=2), [0.7, 0.5, -1.0], rtol=1e-6)
    np.testing.assert_allclose(group_topk_mean(values, owner, 3, k=1), [0.9, 0.7, -1.0], rtol=1e-6)


def test_hnsw_agrees_with_exact_search():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(3000, 32)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    owner = np.arange(3000) // 3
    queries = vecs[[5, 700, 2999]] + 0.01
    kwargs = dict(hnsw_m=32, ef_search=128, search_k=50, top_k=1)
    exact = VectorIndex(vecs, owner, 1000, hnsw_min=10**6, **kwargs)
    approx = VectorIndex(vecs, owner, 1000, hnsw_min=100, **kwargs)
    assert (exact.kind, approx.kind) == ("flat", "hnsw")
    np.testing.assert_array_equal(exact.tool_scores(queries).argmax(1), approx.tool_scores(queries).argmax(1))
    np.testing.assert_array_equal(exact.tool_scores(queries).argmax(1), [1, 233, 999])


def test_lexical_absorbs_typos_and_accents():
    texts = ["thời tiết hôm nay", "spending summary", "recent videos"]
    ngrams = CharNgrams(texts)
    scores = LexicalIndex(ngrams.fitted, np.arange(3), 3).tool_scores(ngrams.transform(["thoi tiet", "spnding sumary"]))
    assert list(scores.argmax(1)) == [0, 1]


def test_ngram_features_are_sklearns_tfidf():
    texts = ["thời tiết hôm nay", "spending summary", "recent videos", "summary of summary summary"]
    ngrams = CharNgrams(texts)
    messages = ["Summary of my spending, summary please", "", "zzz qqq", "thoi tiet hom nay?", "recent"]
    mine, theirs = ngrams.transform(messages), ngrams._vectorizer.transform(messages)
    assert mine.shape == theirs.shape and mine.nnz == theirs.nnz
    np.testing.assert_allclose(mine.toarray(), theirs.toarray(), rtol=1e-5, atol=1e-7)
    # the fitted texts' rows come from fitting, not from reading them again: the same rows
    np.testing.assert_allclose(ngrams.fitted.toarray(), ngrams.transform(texts).toarray(), rtol=1e-5, atol=1e-7)
    assert ngrams.fitted.dtype == np.float32 and CharNgrams([]).fitted.shape[0] == 0


def test_lexical_scores_are_the_best_ngram_cosine_per_tool():
    texts = ["thời tiết hôm nay", "weather today", "spending summary", "summary of my spending", "recent videos"]
    owner = np.array([0, 0, 1, 1, 2])
    ngrams = CharNgrams(texts)
    features = ngrams.transform(["spending summary for today", "zzz", "recent weather videos"])
    cosine = (features @ ngrams.transform(texts).T).toarray()
    expected = np.stack([[row[owner == t].max() for t in range(3)] for row in cosine])
    np.testing.assert_allclose(LexicalIndex(ngrams.fitted, owner, 3).tool_scores(features), expected, atol=1e-6)


def test_a_text_has_sentence_transformers_vector_whatever_it_is_embedded_with(factory, text_encoder, monkeypatch):
    texts = ["How much did I spend on groceries last month?", "thời tiết hôm nay thế nào", "x", "",
             "a long message that goes on " * 50, "🙂 ¿qué tal?"]  # the long one is cut at the model's length
    for encoder in {id(e): e for e in (factory.encoder, text_encoder)}.values():
        assert encoder._direct is not None  # the ONNX backend: texts skip sentence-transformers' encode()
        # int8 activations are scaled over a whole batch: in one, a text's vector moved with its companions
        alone = np.stack([encoder._model.encode([t], normalize_embeddings=True, convert_to_numpy=True)[0]
                          for t in texts])
        with monkeypatch.context() as m:
            m.setattr(encoder._model, "encode", lambda *a, **k: (_ for _ in ()).throw(AssertionError("encode()")))
            np.testing.assert_allclose(encoder.embed(texts), alone, atol=1e-6)
            np.testing.assert_allclose(encoder.embed([texts[2], texts[0]]), alone[[2, 0]], atol=1e-6)
            more = [*texts, *(f"card text {i} " * i for i in range(20))]  # cards in bulk: the same vectors
            np.testing.assert_allclose(encoder.embed(more)[:len(texts)], alone, atol=1e-6)


def test_card_vectors_are_cached_on_disk(settings, tmp_path, monkeypatch):
    first = Encoder(backend=settings["EMBED_BACKEND"], data_dir=settings["DATA_DIR"])
    texts = [f"a card text that is new {i}" for i in range(3)]
    vecs = first.encode_cards(texts)
    assert vecs.shape == (3, first.dim)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-4)
    second = Encoder(backend=settings["EMBED_BACKEND"], data_dir=settings["DATA_DIR"])
    monkeypatch.setattr(second, "_embed", lambda texts: (_ for _ in ()).throw(AssertionError("re-embedded")))
    np.testing.assert_allclose(second.encode_cards(texts), vecs)


def test_a_process_killed_after_the_onnx_export_leaves_nothing_in_tmp(tmp_path):
    tmp, data = tmp_path / "tmp", tmp_path / "data"
    tmp.mkdir()
    code = ("import os, signal; from funes.selection.encoder import Encoder; "
            f"Encoder(data_dir={str(data)!r}); os.kill(os.getpid(), signal.SIGKILL)")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(tmp)}, timeout=600)
    assert done.returncode == -signal.SIGKILL
    assert list((data / "models").glob("*/onnx/model.onnx"))  # it did export
    assert list(tmp.rglob("*.onnx")) == []  # optimum's export folder went with the export, not with the process


def test_card_vectors_unused_for_a_month_are_dropped_and_old_files_gain_dates(tmp_path):
    path = tmp_path / "vectors.sqlite3"
    with sqlite3.connect(path) as db:  # a file written before rows were dated
        db.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, vec BLOB)")
    cache = VectorCache(path, "model-a")
    old, kept, stale = (np.full(4, x, dtype=np.float32) for x in (1.0, 2.0, 3.0))
    cache.put_many({"a card of a model no longer used": old, "a card in use": kept, "a card read now": stale})
    with sqlite3.connect(path) as db:
        day = vector_cache.today()
        for text, used in (("a card of a model no longer used", day - vector_cache.KEEP_DAYS - 1),
                           ("a card in use", day - vector_cache.KEEP_DAYS + 1),
                           ("a card read now", day - vector_cache.KEEP_DAYS + 1)):
            db.execute("UPDATE vectors SET used = ? WHERE key = ?", (used, cache._key(text)))
    np.testing.assert_array_equal(cache.get_many(["a card read now"])["a card read now"], stale)
    again = VectorCache(path, "model-a")  # opening prunes: the row past a month goes, the others stay
    found = again.get_many(["a card of a model no longer used", "a card in use"])
    assert list(found) == ["a card in use"]
    with sqlite3.connect(path) as db:
        dates = dict(db.execute("SELECT key, used FROM vectors"))
    assert dates == {cache._key("a card in use"): day, cache._key("a card read now"): day}


def test_repeated_messages_are_embedded_once(factory, monkeypatch):
    encoder = factory.encoder
    encoder.encode_query(["is it windy in Dublin?"])
    calls = []
    original = encoder._embed
    monkeypatch.setattr(encoder, "_embed",
                        lambda texts, meanwhile=None: calls.append(texts) or original(texts, meanwhile))
    encoder.encode_query(["is it windy in Dublin?", "is it windy in Cork?"])
    assert calls == [["is it windy in Cork?"]]
