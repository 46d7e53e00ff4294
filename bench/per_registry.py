"""Per-registry fine-tuning, measured: MiniLM tuned on one enriched registry's own generated texts.

Usage: .venv/bin/python bench/per_registry.py CASES TOOLS [--design heads|siblings] [--epochs 3]
The registry is enriched from the data dir's cache (`cards enrich` it first). Two designs:
  heads     each generated example paired with its card's "name: description", another card's as the negative
  siblings  SetFit-style: each generated example paired with another example of the same card
MiniLM is fine-tuned on those pairs (funes.training.encoder, in-batch negatives, seed 7), then the registry
is routed as served (its classifier over the vectors) with MiniLM and with the tuned model, both on the
torch runtime. Prints the pairs, CPU seconds and the lenient accuracy of each.
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.eval.scoring import lenient_ok, load_cases, measure_cases  # noqa: E402
from funes.selection.encoder import Encoder, minilm_path  # noqa: E402
from funes.selection.factory import RouterFactory  # noqa: E402
from funes.selection.index import head_text  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402
from funes.training.encoder import train  # noqa: E402
from funes.training.public import Pair  # noqa: E402


def pairs_of(registry, design: str, rng: random.Random) -> list[Pair]:
    """The registry's generated examples paired with their card's head, or with a sibling example."""
    pairs = []
    for tool in registry:
        examples = list(tool.generated.examples) if tool.generated else []
        others = [t for t in registry if t.name != tool.name]
        for example in examples:
            if design == "heads":
                pairs.append(Pair(example, head_text(tool), head_text(rng.choice(others)) if others else ""))
            else:
                same = [e for e in examples if e != example]
                pairs.append(Pair(example, rng.choice(same) if same else head_text(tool)))
    return pairs


def accuracy(settings, encoder: Encoder, cases, registry) -> float:
    factory = RouterFactory(settings, encoder=encoder)
    return float(np.mean([lenient_ok(m.case, set(m.router.picks(m.evidence)))
                          for m in measure_cases(factory, cases, registry)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases")
    parser.add_argument("tools")
    parser.add_argument("--design", choices=("heads", "siblings"), default="heads")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    settings = config.load({"VECTOR_CACHE": False})
    registry = build(settings).enrichment.apply(load_file(args.tools))
    if not any(t.generated for t in registry):
        sys.exit(f"{args.tools}: no enriched card in the data dir's cache (run `funes cards enrich` first)")
    cases = load_cases(args.cases)
    pairs = pairs_of(registry, args.design, random.Random(7))
    base = accuracy(settings, Encoder("minilm", "torch", 2, settings["DATA_DIR"], vector_cache=False), cases, registry)
    with tempfile.TemporaryDirectory() as tmp:
        report = train(minilm_path(), pairs, f"{tmp}/model", epochs=args.epochs, batch_size=32, threads=2)
        tuned = Encoder(f"{tmp}/model", "torch", 2, settings["DATA_DIR"], vector_cache=False)
        after = accuracy(settings, tuned, cases, registry)
    print(f"{Path(args.cases).name} ({args.design}): {len(pairs)} pairs, {report['steps']} steps, "
          f"{report['cpu_s']} s CPU; lenient MiniLM {base:.3f} -> tuned on its own texts {after:.3f}")


if __name__ == "__main__":
    main()
