"""MiniLM tuned for tool routing: shipped as a low-rank delta over MiniLM's weights, assembled once into DATA_DIR.

`funes train encoder` fine-tunes all of MiniLM, but what it learns is small and nearly low-rank: the rank-16
truncation of each weight matrix's change ranks tools as well as the full model (docs/results.md). So the
package ships ~1.5 MB instead of 45 MB, and MiniLM's own weights come from the package that carries them.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from pathlib import Path

TUNED_DIR = Path(__file__).with_name("minilm_tools")
DELTA_FILE = "delta.safetensors"  # per weight matrix U (out x r) and V (r x in); vectors as full differences
NAME = "funes-minilm-tools"
WEIGHTS = "model.safetensors"


@functools.cache  # read once a process: every Encoder, gate lookup and name check asks
def delta_hash(delta: Path = TUNED_DIR / DELTA_FILE) -> str:
    return hashlib.sha256(delta.read_bytes()).hexdigest()


def tuned_name(delta: Path = TUNED_DIR / DELTA_FILE) -> str:
    """The tuned model's name, which carries its delta's hash: vectors and gates made over another are not reused."""
    return f"{NAME}-{delta_hash(delta)[:8]}"


def is_tuned(model_path: str) -> bool:
    return Path(model_path).name.startswith(f"{NAME}-")


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
              metadata={"base": "all-MiniLM-L6-v2", "max_tokens": str(max_tokens)})
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


def tuned_path(data_dir: str) -> str:
    """The tuned model's directory under DATA_DIR, assembled from MiniLM and the shipped delta on first use."""
    from funes.selection.encoder import minilm_path

    out = Path(data_dir).resolve() / "models" / "src" / tuned_name()
    if not (out / WEIGHTS).is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        assemble(Path(minilm_path()), TUNED_DIR / DELTA_FILE, out)
    return str(out)
