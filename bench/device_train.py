"""`funes train encoder --init mpnet --epochs 3` on a lent GPU machine that has torch and sentence-transformers but
not Funes' other dependencies: the same pairs, mining and train() as the CLI; stubs stand in for the packages the
training path imports and never calls (flask, faiss, jsonschema, rapidfuzz). It also trains a six-layer mpnet
(every other layer) and writes each run's rank-32 and rank-16 deltas with their fidelity (docs/results.md).

Here, first (the public sets stay here; their pairs and the shuffle's state travel):
    .venv/bin/python bench/device_train.py --prepare --public ../shared/eval/public      # -> .dev/public.pkl
There (the repository with .dev/, and all-mpnet-base-v2's files in BASE, sent in parts of under 50 MB):
    python3 bench/device_train.py --base BASE --out $OUT --epochs 3 --budget 300
On a machine with Funes installed and a GPU, `funes train encoder --init mpnet` is the same run.
"""
import argparse
import hashlib
import json
import os
import pickle
import random
import shutil
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np
import torch
import transformers  # noqa: F401  (before the stubs: it probes for faiss)
from sentence_transformers import SentenceTransformer
from tqdm import tqdm

for name in ("flask", "faiss", "jsonschema", "rapidfuzz"):  # after transformers, which probes for faiss
    try:
        __import__(name)
    except ImportError:
        sys.modules[name] = mock.MagicMock()
sys.path.insert(0, os.getcwd())

import sentence_transformers


class ST32(SentenceTransformer):
    """Float32 whatever the config's dtype says: transformers 5 loads a float16 checkpoint as float16."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.float()


sentence_transformers.SentenceTransformer = SentenceTransformer = ST32  # train() imports it at call time
if not hasattr(SentenceTransformer, "preprocess"):
    SentenceTransformer.preprocess = SentenceTransformer.tokenize
from funes.training.public import REGISTRIES, SYNTHETIC, registry_pairs, synthetic_pairs
from funes.training.encoder import train
from funes.selection.tuned import assemble, low_rank_delta

T0 = time.time()
p = argparse.ArgumentParser()
p.add_argument("--prepare", action="store_true", help="here: write .dev/public.pkl from --public")
p.add_argument("--public")
p.add_argument("--base")
p.add_argument("--out")
p.add_argument("--device", default="cuda")
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--steps", type=int, default=None)
p.add_argument("--budget", type=float, default=400, help="seconds after which no further run starts")
p.add_argument("--configs", default="full,six")
a = p.parse_args()
if a.prepare:  # training_pairs()'s first steps, with its seed (7) and per-tool cap (20)
    from funes.training.public import bfcl_pairs, metatool_pairs

    rng = random.Random(7)
    public = metatool_pairs(Path(a.public), 20, rng) + bfcl_pairs(Path(a.public))
    Path(".dev").mkdir(exist_ok=True)
    pickle.dump({"public": public, "rng": rng.getstate()}, open(".dev/public.pkl", "wb"))
    sys.exit(0)
out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
report = {"torch": torch.__version__, "cuda": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu"}
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True


def log(**kw):
    report.update(kw)
    (out / "report.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(kw), flush=True)


def pairs_for(base):
    """training_pairs(public, 20, 7, embed=base): the public pairs and rng state come pickled from the CLI's code."""
    state = pickle.load(open(".dev/public.pkl", "rb"))  # noqa: S301 (written by --prepare)
    model = SentenceTransformer(base, device=a.device)
    embed = lambda texts: model.encode(texts, batch_size=256, normalize_embeddings=True)
    plain = random.Random(); plain.setstate(state["rng"])
    unmined = state["public"] + synthetic_pairs(SYNTHETIC, plain) + registry_pairs(REGISTRIES, None, plain)
    unmined = list({(x.request, x.tool): x for x in unmined}.values()); plain.shuffle(unmined)
    rng = random.Random(); rng.setstate(state["rng"])
    pairs = state["public"] + synthetic_pairs(SYNTHETIC, rng) + registry_pairs(REGISTRIES, embed, rng)
    pairs = list({(x.request, x.tool): x for x in pairs}.values()); rng.shuffle(pairs)
    log(pairs=len(pairs), unmined_sha=hashlib.sha256(repr(unmined).encode()).hexdigest()[:12],
        mined_sha=hashlib.sha256(repr(pairs).encode()).hexdigest()[:12], mine_s=round(time.time() - T0, 1))
    del model
    return pairs


def six_layers(base, dst):
    """mpnet with every other layer (1, 3, ..., 11): half the encode time."""
    m = SentenceTransformer(base, device="cpu")
    enc = m[0].auto_model.encoder
    keep = list(range(1, len(enc.layer), 2))
    enc.layer = torch.nn.ModuleList([enc.layer[i] for i in keep])
    m[0].auto_model.config.num_hidden_layers = len(keep)
    m.save(str(dst))
    w = Path(dst) / "model.safetensors"
    from safetensors.torch import load_file, save_file
    save_file({k: v.float().contiguous() if v.is_floating_point() else v for k, v in load_file(str(w)).items()}, str(w),
              metadata={"format": "pt"})
    return str(dst)


def fidelity(tuned, base, delta, texts, tag):
    """Mean / min cosine between the tuned model's vectors and base + the low-rank delta's."""
    tmp = Path(f"/tmp/assembled_{tag}")
    shutil.rmtree(tmp, ignore_errors=True)
    assemble(Path(base), delta, tmp)
    full = SentenceTransformer(tuned, device=a.device).encode(texts, batch_size=256, normalize_embeddings=True)
    low = SentenceTransformer(str(tmp), device=a.device).encode(texts, batch_size=256, normalize_embeddings=True)
    cos = (full * low).sum(1)
    return {"mean": round(float(cos.mean()), 5), "min": round(float(cos.min()), 5)}


def run(tag, base, pairs):
    tuned = f"/tmp/tuned_{tag}"
    shutil.rmtree(tuned, ignore_errors=True)
    bar = lambda it: tqdm(it, desc=tag, mininterval=15, file=sys.stdout)
    r = train(base, pairs, tuned, epochs=a.epochs, seed=7, threads=16, steps=a.steps, device=a.device, progress=bar)
    log(**{f"train_{tag}": r})
    if not np.isfinite(r["loss_last"]):
        raise SystemExit(f"{tag}: loss is not finite")
    texts = sorted({x for p in pairs[:1500] for x in (p.request, p.tool)})
    for rank in (32, 16):
        d = out / f"{tag}_r{rank}.safetensors"
        info = low_rank_delta(Path(base), Path(tuned), d, rank=rank)
        log(**{f"delta_{tag}_r{rank}": {**info, "fidelity": fidelity(tuned, base, d, texts, f"{tag}{rank}")}})


w = Path(a.base) / "model.safetensors"
from safetensors.torch import load_file, save_file
weights = load_file(str(w))
if any(v.dtype == torch.float16 for v in weights.values()):  # transformers 5 would load float16 as it is
    save_file({k: v.float().contiguous() if v.is_floating_point() else v for k, v in weights.items()}, str(w),
              metadata={"format": "pt"})
log(base_sha=hashlib.sha256(w.read_bytes()).hexdigest()[:12], weights=len(weights))
del weights
pairs = pairs_for(a.base)
for tag in a.configs.split(","):
    if time.time() - T0 > a.budget:
        log(**{f"skipped_{tag}": round(time.time() - T0, 1)}); continue
    base = a.base if tag == "full" else six_layers(a.base, "/tmp/base_six")
    run(tag, base, pairs)
log(total_s=round(time.time() - T0, 1))
