"""Long-term memory: retrieval with the real encoder, user isolation, restarts, atomic batches, chunking."""
import re
import threading
from datetime import datetime, timezone

import pytest
import sqlalchemy

from memory.chunking import chunk_text, read_document
from memory.store import MemoryStore, metadata

NOTES = [
    "My daughter Lena is allergic to peanuts.",
    "I parked the car on level 3 of the airport garage.",
    "The wifi password is written in the blue notebook in the kitchen drawer.",
    "I prefer aisle seats on long-haul flights.",
    "My dentist appointment is on Tuesday at 9am with Dr. Okafor.",
]
MIN_SCORE = 0.35


class CountingEmbed:
    """The real encoder, recording every batch of texts it is asked to embed."""

    def __init__(self, encoder, fail_batches: bool = False):
        self.encoder, self.fail_batches, self.calls = encoder, fail_batches, []

    def __call__(self, texts):
        self.calls.append(list(texts))
        if self.fail_batches and len(texts) > 1:
            raise RuntimeError("embedding backend went away")
        return self.encoder.encode_cards(texts)


@pytest.fixture
def engine(database_url):
    engine = sqlalchemy.create_engine(database_url)
    metadata.create_all(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def embed(factory):
    return CountingEmbed(factory.encoder)


@pytest.fixture
def store(engine, embed):
    return MemoryStore(engine, embed, top_k=3, min_score=MIN_SCORE)


@pytest.fixture
def alice(store):
    """Alice's five notes; returns their ids in NOTES order."""
    return store.add_many("alice", NOTES)


@pytest.mark.parametrize("query, expected", [
    ("What food allergies does my kid have?", 0),
    ("Where did I leave the car?", 1),
    ("Which seat do I like on a plane?", 3),
    ("when do I see the dentist", 4),
])
def test_search_ranks_the_relevant_memory_first(store, alice, query, expected):
    hits = store.search("alice", query)
    assert hits[0].id == alice[expected]
    assert hits[0].text == NOTES[expected]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_hit_carries_kind_source_and_utc_time(store):
    memory_id = store.add("bob", "Bob's sister lives in Porto.", kind="exchange", source="chat:42")
    [hit] = store.search("bob", "Where does my sister live?")
    assert (hit.id, hit.kind, hit.source) == (memory_id, "exchange", "chat:42")
    assert hit.created_at.tzinfo == timezone.utc


@pytest.mark.parametrize("query", ["How do I change a bicycle tire?", "What is the capital of Mongolia?"])
def test_min_score_cuts_unrelated_memories(store, alice, query):
    assert store.search("alice", query) == []
    assert len(store.search("alice", query, min_score=-1.0, top_k=10)) == len(NOTES)


def test_top_k_limits_the_number_of_hits(store, alice):
    assert len(store.search("alice", "car", min_score=-1.0)) == 3
    assert len(store.search("alice", "car", min_score=-1.0, top_k=1)) == 1


def test_users_never_see_each_others_memories(store, alice):
    secret = "My bank PIN is 4921 and my mother's maiden name is Kowalski."
    store.add("alice", secret)
    assert store.search("mallory", secret, min_score=-1.0, top_k=100) == []
    store.add("mallory", "I like green tea.")
    hits = store.search("mallory", secret, min_score=-1.0, top_k=100)
    assert [h.text for h in hits] == ["I like green tea."]
    assert store.search("alice", secret)[0].text == secret


def test_count_and_delete_user_forget_only_that_user(store, alice):
    bobs = store.add("bob", NOTES[1])  # the same text as one of Alice's notes
    assert (store.count("alice"), store.count("bob")) == (len(NOTES), 1)
    assert store.delete_user("alice") == len(NOTES)
    assert store.count("alice") == 0
    assert store.search("alice", "Where did I leave the car?", min_score=-1.0) == []
    assert [h.id for h in store.search("bob", "Where did I leave the car?")] == [bobs]


def test_restart_finds_memories_without_reembedding_them(engine, store, alice, factory):
    query = "Where did I leave the car?"
    before = store.search("alice", query)
    fresh = CountingEmbed(factory.encoder)
    reopened = MemoryStore(sqlalchemy.create_engine(engine.url), fresh, top_k=3, min_score=MIN_SCORE)
    assert fresh.calls == []
    after = reopened.search("alice", query)
    assert [(h.id, h.text) for h in after] == [(h.id, h.text) for h in before]
    assert fresh.calls == [[query]]
    assert reopened.count("alice") == len(NOTES)


def test_memories_added_by_another_worker_are_found(engine, store, factory):
    other_worker = MemoryStore(engine, factory.encoder.encode_cards, top_k=3, min_score=MIN_SCORE)
    store.add("alice", NOTES[0])
    assert other_worker.search("alice", "peanut allergy")[0].text == NOTES[0]


def test_a_row_committed_late_with_a_lower_id_is_found(engine, store, factory):
    """PostgreSQL hands out ids before commit, so another worker's row may land below ids already seen."""
    other_worker = MemoryStore(engine, factory.encoder.encode_cards, top_k=3, min_score=MIN_SCORE)

    def commit(row_id, text):
        vector = factory.encoder.encode_cards([text])[0].astype("float32")
        with engine.begin() as conn:
            conn.execute(sqlalchemy.insert(metadata.tables["memories"]).values(
                id=row_id, user_id="alice", kind="note", text=text, created_at=datetime.now(timezone.utc),
                vector=vector.tobytes()))

    commit(10, NOTES[1])
    assert other_worker.search("alice", "where is my car parked?")[0].id == 10
    commit(5, NOTES[2])
    assert other_worker.search("alice", "what is the wifi password?")[0].id == 5


def test_concurrent_threads_lose_and_duplicate_nothing(store):
    texts = [f"Reminder {i}: water plant number {i}." for i in range(40)]

    def worker(start):
        for text in texts[start::8]:
            store.add("alice", text)
            store.search("alice", text)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    hits = store.search("alice", "plant", min_score=-1.0, top_k=len(texts))
    assert sorted(h.text for h in hits) == sorted(texts)


def test_add_many_is_all_or_nothing(engine, factory):
    failing = CountingEmbed(factory.encoder, fail_batches=True)
    store = MemoryStore(engine, failing, top_k=3, min_score=MIN_SCORE)
    with pytest.raises(RuntimeError, match="went away"):
        store.add_many("alice", NOTES)
    assert len(failing.calls) == 1  # one embedding call for the whole batch
    assert store.count("alice") == 0
    with pytest.raises(ValueError, match="empty"):
        store.add_many("alice", ["a real note", "   "])
    assert store.count("alice") == 0
    store.add("alice", NOTES[0])  # the store still works after a failed batch
    assert [h.text for h in store.search("alice", "peanuts")] == [NOTES[0]]


def test_add_many_returns_ids_in_input_order(store, alice):
    hits = {h.id: h.text for h in store.search("alice", "anything", min_score=-1.0, top_k=10)}
    assert [hits[i] for i in alice] == NOTES


def test_empty_user_id_is_refused(store):
    with pytest.raises(ValueError, match="user_id"):
        store.add("", "a note")


def test_ingested_document_is_searchable(store, tmp_path):
    path = tmp_path / "garden.md"
    path.write_text("# Garden\n\nThe tomatoes need water every morning.\n\n"
                    "The shed key hangs behind the back door.\n", encoding="utf-8")
    chunks = chunk_text(read_document(path), max_chars=60, overlap=10)
    store.add_many("alice", chunks, kind="document", source=str(path))
    [hit] = store.search("alice", "where is the key for the shed?", top_k=1)
    assert "shed key" in hit.text
    assert (hit.kind, hit.source) == ("document", str(path))


# --- chunking ---------------------------------------------------------------------------------------------

SENTENCES = [f"Sentence number {i} talks about topic {i % 7} in some detail." for i in range(60)]
DOCUMENT = "\n\n".join(" ".join(SENTENCES[i:i + n]) for i, n in zip(range(0, 60, 6), [1, 6, 2, 3, 6, 1, 4, 5, 6, 2]))


@pytest.mark.parametrize("max_chars, overlap", [(800, 100), (300, 50), (120, 0), (200, 120)])
def test_chunks_fit_overlap_and_are_never_empty(max_chars, overlap):
    chunks = chunk_text(DOCUMENT, max_chars=max_chars, overlap=overlap)
    assert len(chunks) > 1
    assert all(chunk.strip() and len(chunk) <= max_chars for chunk in chunks)
    for previous, chunk in zip(chunks, chunks[1:]):
        shared = [k for k in range(1, overlap + 1) if chunk.startswith(previous[-k:])]
        assert bool(shared) == (overlap > 0), (previous, chunk)
    for sentence in re.split(r"(?<=\.)\s+", DOCUMENT):  # nothing lost, no sentence cut
        assert any(sentence in chunk for chunk in chunks)


def test_short_paragraphs_stay_whole_and_chunks_end_on_them():
    paragraphs = [f"Paragraph {i}. " + "Words here. " * (i % 5 + 1) for i in range(20)]
    text = "\n\n".join(p.strip() for p in paragraphs)
    chunks = chunk_text(text, max_chars=200, overlap=30)
    for paragraph in paragraphs:
        assert any(paragraph.strip() in chunk for chunk in chunks)
    assert all(chunk.endswith("Words here.") for chunk in chunks)


def test_long_paragraph_is_cut_between_sentences():
    paragraph = " ".join(SENTENCES)
    chunks = chunk_text(paragraph, max_chars=300, overlap=40)
    assert len(chunks) > 5
    assert all(chunk.endswith("detail.") for chunk in chunks)


def test_overlong_sentence_is_split():
    words = [f"word{i}" for i in range(800)]
    chunks = chunk_text(" ".join(words), max_chars=200, overlap=20)
    assert all(len(chunk) <= 200 for chunk in chunks)
    assert set(words) <= set(" ".join(chunks).split())
    token = "x" * 1000
    chunks = chunk_text(token, max_chars=200, overlap=20)
    assert all(0 < len(chunk) <= 200 for chunk in chunks)
    assert sum(len(chunk) for chunk in chunks) >= len(token)


def test_blank_text_gives_no_chunks_and_bad_sizes_are_refused():
    assert chunk_text("  \n\n \t\n") == []
    assert chunk_text("Just one line.") == ["Just one line."]
    with pytest.raises(ValueError, match="overlap"):
        chunk_text("text", max_chars=100, overlap=100)
    with pytest.raises(ValueError, match="overlap"):
        chunk_text("text", overlap=-1)


def test_read_document_reads_utf8_text_and_markdown(tmp_path):
    (tmp_path / "a.txt").write_text("Café crème ☕", encoding="utf-8")
    (tmp_path / "b.MD").write_bytes("\ufeff# Título".encode("utf-8"))
    assert read_document(tmp_path / "a.txt") == "Café crème ☕"
    assert read_document(str(tmp_path / "b.MD")) == "# Título"


@pytest.mark.parametrize("name, content, message", [
    ("missing.md", None, "document not found"),
    ("report.pdf", b"%PDF-1.7", "unsupported document type '.pdf'"),
    ("README", b"no suffix", "unsupported document type"),
    ("latin1.txt", "café".encode("latin-1"), "not UTF-8"),
])
def test_read_document_errors_are_one_clear_line(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        read_document(path)
    assert "\n" not in str(info.value) and name in str(info.value)
