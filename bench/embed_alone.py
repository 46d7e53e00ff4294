"""Card texts embedded alone (as Funes does) against in batches of 64: time, and how far a batch moves a vector.

    .venv/bin/python bench/embed_alone.py TOOLS_FILE [--repeat 3]   (after scripts/funes once)

The int8 encoder quantizes its activations per tensor, so in a batch the longest text and the padding set every
text's scale. Prints the median seconds of each way over the file's descriptions, their ratio, and the lowest
cosine between a text's vector alone and in its batch.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.selection.factory import RouterFactory  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402


def descriptions(path: str) -> list[str]:
    """Each tool's description in a tools file of any shape Funes loads."""
    return [tool.description or tool.name for tool in load_file(path)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tools")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    encoder = RouterFactory(config.load()).encoder
    texts = descriptions(args.tools)
    ways = {"alone": lambda: encoder.embed(texts),
            "batched": lambda: encoder._model.encode(texts, batch_size=64, normalize_embeddings=True)}
    times = {name: [] for name in ways}
    for _ in range(args.repeat):
        for name, way in ways.items():
            started = time.perf_counter()
            way()
            times[name].append(time.perf_counter() - started)
    alone, batched = ways["alone"](), ways["batched"]()
    p50 = {name: statistics.median(t) for name, t in times.items()}
    print(f"{len(texts)} texts: alone {p50['alone']:.2f} s, batched {p50['batched']:.2f} s "
          f"({p50['alone'] / p50['batched']:.2f}x); lowest cosine alone/batched {(alone * batched).sum(1).min():.4f}, "
          f"median {float(np.median((alone * batched).sum(1))):.4f}")


if __name__ == "__main__":
    main()
