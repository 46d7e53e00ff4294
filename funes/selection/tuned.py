"""The encoders tuned for tool routing, shipped as low-rank deltas over their bases' weights, assembled once into
DATA_DIR: MiniLM (the default) and all-mpnet-base-v2 (EMBED_MODEL=mpnet; slower, more accurate).

`funes train encoder` fine-tunes all of a base, but what it learns is small and nearly low-rank: the truncation
of each weight matrix's change ranks tools as well as the full model (docs/results.md). So the package ships
1.5 MB (MiniLM, rank 16) or 11 MB (mpnet, rank 32) instead of 45 or 220 MB, and the bases come from packages.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DELTA_FILE = "delta.safetensors"  # per weight matrix U (out x r) and V (r x in); vectors as full differences
WEIGHTS = "model.safetensors"


def _minilm(data_dir: str) -> str:
    from funes.selection.encoder import minilm_path

    return minilm_path()


def _mpnet(data_dir: str) -> str:
    from funes.selection.mpnet import mpnet_path

    return mpnet_path(data_dir)


@dataclass(frozen=True)
class Tuned:
    """One shipped tuned encoder: its name, the folder holding its delta and gate, its base and the delta's rank."""

    name: str
    folder: Path
    base: Callable[[str], str]  # DATA_DIR -> the base model's directory
    rank: int

    @property
    def delta(self) -> Path:
        return self.folder / DELTA_FILE


MINILM = Tuned("funes-minilm-tools", Path(__file__).with_name("minilm_tools"), _minilm, 16)
MPNET = Tuned("funes-mpnet-tools", Path(__file__).with_name("mpnet_tools"), _mpnet, 32)
TUNED_DIR = MINILM.folder


@functools.cache  # read once a process: every Encoder, gate lookup and name check asks
def delta_hash(delta: Path = MINILM.delta) -> str:
    return hashlib.sha256(delta.read_bytes()).hexdigest()


def tuned_name(tuned: Tuned = MINILM) -> str:
    """The tuned model's name, which carries its delta's hash: vectors and gates made over another are not reused."""
    return f"{tuned.name}-{delta_hash(tuned.delta)[:8]}"


def tuned_of(model_path: str) -> Tuned | None:
    """The shipped tuned encoder a model directory was assembled as, if any."""
    return next((t for t in (MINILM, MPNET) if Path(model_path).name.startswith(f"{t.name}-")), None)


def low_rank_delta(base: Path, tuned: Path, out: Path, rank: int = 16, max_tokens: int = 64) -> dict:
    """Write tuned - base as the delta file: each matrix's change truncated to `rank`, others whole, in float16;
    `max_tokens`: the length it was trained at (longer texts rank worse past it)."""
    import torch
    from safetensors.torch import load_file, save_file

    before, after = load_file(str(base / WEIGHTS)), load_file(str(tuned / WEIGHTS))
    delta: dict = {}
    for key, weight in after.items():
        change = weight.float() - before[key].float()
        if "word_embeddings" in key:  # a vocabulary of 30k rows barely moves (rel. 0.001): not worth 23 MB
            continue
        if change.ndim == 2 and min(change.shape) > rank:
            u, s, vh = torch.linalg.svd(change, full_matrices=False)
            delta[f"{key}.u"], delta[f"{key}.v"] = (u[:, :rank] * s[:rank]).half(), vh[:rank].half()
        else:
            delta[key] = change.half()
    save_file({k: v.contiguous() for k, v in delta.items()}, str(out),
              metadata={"base": base.name, "max_tokens": str(max_tokens)})
    return {"tensors": len(delta), "bytes": out.stat().st_size, "rank": rank}


def assemble(base: Path, delta: Path, out: Path) -> None:
    """Write MiniLM plus the delta as a sentence-transformers directory at `out` (atomically)."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    weights, change = load_file(str(base / WEIGHTS)), load_file(str(delta))
    with safe_open(str(delta), "pt") as f:
        max_tokens = int(f.metadata()["max_tokens"])
    for key, weight in weights.items():
        if f"{key}.u" in change:
            weights[key] = weight.float() + change[f"{key}.u"].float() @ change[f"{key}.v"].float()
        elif key in change:
            weights[key] = weight.float() + change[key].float()
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(base, tmp, ignore=shutil.ignore_patterns(WEIGHTS, "onnx", "openvino", "*.bin"))
    save_file({k: v.to(torch.float32).contiguous() for k, v in weights.items()}, str(tmp / WEIGHTS),
              metadata={"format": "pt"})
    config = tmp / "sentence_bert_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "max_seq_length": max_tokens}))
    try:
        tmp.rename(out)
    except OSError:  # another process assembled it first: the same bytes
        shutil.rmtree(tmp, ignore_errors=True)


def tuned_path(data_dir: str, tuned: Tuned = MINILM) -> str:
    """The tuned model's directory under DATA_DIR, assembled from its base and the shipped delta on first use."""
    out = Path(data_dir).resolve() / "models" / "src" / tuned_name(tuned)
    if not (out / WEIGHTS).is_file():
        base = Path(tuned.base(data_dir))
        out.parent.mkdir(parents=True, exist_ok=True)
        assemble(base, tuned.delta, out)
    return str(out)
