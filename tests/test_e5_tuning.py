"""multilingual e5 tuned for tool routing (`funes train e5`): what it learns is what the router's e5 reads."""
import numpy as np
import pytest

from funes.cli import cli
from funes.selection.e5_onnx import LINEARS, E5Onnx
from funes.selection.multilingual import MultilingualEncoder, e5_weights
from funes.training.e5 import E5Torch, train
from funes.training.public import Pair

# A domain in no training or evaluation set, in three languages; each request beside its card and a sibling.
PAIRS = [
    Pair("Lance une cuisson du four à céramique ce soir", "start_firing: Start a firing schedule on the kiln.",
         "stop_firing: Abort the running firing."),
    Pair("¿Cuánto hilo queda en la bobina?", "get_bobbin_level: Report how much thread is left on the bobbin.",
         "thread_machine: Set the sewing machine's needle thread tension."),
    Pair("Brich den laufenden Brand ab", "stop_firing: Abort the running firing.",
         "start_firing: Start a firing schedule on the kiln."),
    Pair("Ajusta la tensión del hilo de la aguja", "thread_machine: Set the sewing machine's needle thread tension.",
         "get_bobbin_level: Report how much thread is left on the bobbin."),
]


def _margins(e5) -> np.ndarray:
    """Per pair: the request's cosine to its card minus to its sibling's."""
    q, t, n = (e5.encode([getattr(p, k) for p in PAIRS]) for k in ("request", "tool", "negative"))
    return np.sum(q * t, axis=1) - np.sum(q * n, axis=1)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    out = tmp_path_factory.mktemp("e5") / "delta.safetensors"
    report = train(str(e5_weights()), PAIRS * 4, out, batch_size=4, lr=1e-4, epochs=2, rank=4)
    return out, report


def test_the_model_trained_is_the_model_served(tmp_path):
    """The torch rebuild reads a text as the int8 graph does: what it learns is learnt for the router's e5."""
    import torch

    texts = [p.request for p in PAIRS] + [p.tool for p in PAIRS]
    with torch.no_grad():
        trained = E5Torch(str(e5_weights()))(texts).numpy()
    served = E5Onnx(str(e5_weights()), tmp_path).encode(texts)
    assert np.sum(trained * served, axis=1).min() > 0.99
    assert (np.argmax(trained @ served.T, axis=1) == np.arange(len(texts))).all()


def test_training_writes_each_layers_matrices_low_rank(tuned):
    from safetensors.numpy import load_file

    out, report = tuned
    parts = load_file(str(out))
    assert report["tensors"] == len(parts) == 12 * len(LINEARS) * 2 and report["steps"] == 8
    assert parts["l0.fi.u"].shape == (1536, 4) and parts["l0.fi.v"].shape == (4, 384)


def test_the_served_e5_reads_what_training_taught(tuned, tmp_path):
    out, _ = tuned
    base = E5Onnx(str(e5_weights()), tmp_path)
    tuned_e5 = E5Onnx(str(e5_weights()), tmp_path, delta=out)
    assert _margins(tuned_e5).mean() > _margins(base).mean() + 0.01
    assert len(list(tmp_path.glob("*.onnx"))) == 2  # the tuned graph is its own file, beside the base's


def test_the_tuned_model_has_its_own_name(tuned, tmp_path):
    """Vectors cached and gates fitted over another e5 are not reused: the delta's hash is in the name."""
    out, _ = tuned
    base = MultilingualEncoder(E5Onnx(str(e5_weights()), tmp_path), "1", None)
    tuned_e5 = MultilingualEncoder(E5Onnx(str(e5_weights()), tmp_path, delta=out), "1", None)
    assert base.model_id.split(":")[0] != tuned_e5.model_id.split(":")[0]
    assert "-tools-" in tuned_e5.model_id.split(":")[0]


def test_another_epoch_starts_from_a_tuned_change_and_writes_the_whole_change(tuned, tmp_path):
    """--init shipped: training continues from a delta, and what it writes is the change from the base."""
    from funes.selection.e5_onnx import read_delta

    start, _ = tuned
    out = tmp_path / "again.safetensors"
    train(str(e5_weights()), PAIRS, out, batch_size=4, lr=1e-9, steps=1, rank=4, init=start)  # next to no step
    before, after = read_delta(start), read_delta(out)
    assert before.keys() == after.keys()
    for name, change in before.items():
        assert np.abs(after[name] - change).max() < 0.01 * np.abs(change).max(), name
    retrained = tmp_path / "again_from_base.safetensors"
    train(str(e5_weights()), PAIRS, retrained, batch_size=4, lr=1e-9, steps=1, rank=4)
    assert np.abs(read_delta(retrained)["l0.fi"]).max() < 0.01 * np.abs(before["l0.fi"]).max()  # from the base: ~0


def test_train_e5_says_what_is_wrong_with_its_paths(runner, tmp_path):
    result = runner.invoke(cli, ["train", "e5", "--public", str(tmp_path), "--out", str(tmp_path / "d.safetensors")])
    assert result.exit_code != 0 and "not a public sets directory" in result.output
    public = tmp_path / "public"
    (public / "metatool").mkdir(parents=True)
    (public / "bfcl").mkdir()
    result = runner.invoke(cli, ["train", "e5", "--public", str(public), "--out", str(tmp_path / "no" / "d.st")])
    assert result.exit_code != 0 and "its directory does not exist" in result.output
