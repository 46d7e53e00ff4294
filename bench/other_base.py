"""Another base encoder beside MiniLM: how often the closest bare card is the right one, per bare row.

    .venv/bin/python bench/other_base.py --eval ../shared/eval MODEL_DIR [MODEL_DIR ...]

For each bare row of the accuracy floor (funes/eval/rows.py) and each request that needs a tool: is the card
whose "name: description" is closest to the request one it needs (recall@1, as bench/rows.py counts it).
Columns: MiniLM, the shipped tuned encoder, each MODEL_DIR (a sentence-transformers directory, PyTorch on this
CPU), and the shipped encoder's cosine plus W times the first MODEL_DIR's (an ensemble). Also the median time
to embed one request with each (PyTorch for MODEL_DIRs; `funes bench` times the service's ONNX form).
How to get all-mpnet-base-v2 from PyPI: docs/results.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.eval.rows import ROWS, path  # noqa: E402
from funes.eval.scoring import load_cases  # noqa: E402
from funes.messages import user_turns  # noqa: E402
from funes.selection.index import head_text  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402

BLENDS = (0.5, 1.0)


def encoders(model_dirs: list[str]) -> dict:
    """name -> (embed queries, embed cards)."""
    from sentence_transformers import SentenceTransformer

    out = {}
    for name, setting in (("MiniLM", "minilm"), ("shipped", "")):
        enc = build(config.load({"PACKS": [], "TOOLS_FILES": [], "EMBED_MODEL": setting})).encoder
        out[name] = (enc.encode_query, enc.encode_cards)
    for d in model_dirs:
        model = SentenceTransformer(d, device="cpu")
        embed = lambda texts, m=model: m.encode(texts, batch_size=32, normalize_embeddings=True)  # noqa: E731
        out[Path(d).name] = (embed, embed)
    return out


def first_right(sims: np.ndarray, names: list[str], cases) -> float:
    """recall@1: the share of a case's tools the closest card is (one or none)."""
    top = sims.argmax(axis=1)
    return float(np.mean([len(c.expected & {names[t]}) / len(c.expected) for t, c in zip(top, cases)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", required=True, help="shared/eval (for seed_dev and seed_tools)")
    ap.add_argument("models", nargs="+", help="sentence-transformers model directories")
    args = ap.parse_args()
    encs = encoders(args.models)
    other = Path(args.models[0]).name
    cols = [*encs, *(f"shipped + {w} × {other}" for w in BLENDS)]
    print("| row | n | " + " | ".join(cols) + " |\n" + "|---" * (len(cols) + 2) + "|")
    table = []
    for name, kind, cases_file, tools_file in ROWS:
        if kind != "bare":
            continue
        tools = list(load_file(path(tools_file, args.eval)))
        cases = [c for c in load_cases(path(cases_file, args.eval)) if c.expected]
        names, heads = [t.name for t in tools], [head_text(t) for t in tools]
        requests = [user_turns(c.messages)[0] for c in cases]
        sims = {e: q(requests) @ k(heads).T for e, (q, k) in encs.items()}
        row = [first_right(s, names, cases) for s in sims.values()]
        row += [first_right(sims["shipped"] + w * sims[other], names, cases) for w in BLENDS]
        table.append(row)
        print(f"| {name} | {len(cases)} | " + " | ".join(f"{x:.3f}" for x in row) + " |", flush=True)
    print("| mean | | " + " | ".join(f"{x:.3f}" for x in np.mean(table, axis=0)) + " |")
    for e, (q, _) in encs.items():
        q(["warm-up"])
        times = []
        for i in range(30):
            t0 = time.perf_counter()
            q([f"what will the weather be in Lisbon on day {i} of the trip?"])
            times.append((time.perf_counter() - t0) * 1000)
        print(f"{e}: one request embedded in {np.median(times):.1f} ms (median of 30)")


if __name__ == "__main__":
    main()
