"""How much the enrichment's sampling moves routing: another seed, a lower temperature, two samples merged.

Usage (after `cards enrich` has cached the four tool files in the data dir under each sampling, e.g.
`FUNES_ENRICH_SEED=8 scripts/funes cards enrich bench/probe_domains_tools.jsonl --out /tmp/x.jsonl`, and the
same with `FUNES_ENRICH_TEMPERATURE=0.4`):
    FUNES_DATA_DIR=instance .venv/bin/python bench/enrich_sampling.py ../shared/eval
Scores seed_dev and bench/probe_cases over the seed tools, the three domain probes over their tools, the
multilingual probe over the third probe's tools, and the first four sets over one registry of their 58
cards, each with the texts of seed 7 (the default), seed 8, temperature 0.4, and seeds 7 and 8 merged
(two answers per card: twice the enrichment time).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.cards import fit  # noqa: E402
from funes.cards.cache import EnrichmentCache  # noqa: E402
from funes.eval.scoring import load_cases, measure_cases, score  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402
from funes.tools.registry import Registry  # noqa: E402

BENCH = Path(__file__).resolve().parent
SAMPLINGS = [("seed 7 (default)", [(7, 0.8)]), ("seed 8", [(8, 0.8)]), ("temperature 0.4", [(7, 0.4)]),
             ("seeds 7 + 8 merged", [(7, 0.8), (8, 0.8)])]


def sets(shared: Path) -> list[tuple[str, list[Path], list[Path]]]:
    """(label, cases files, tools files)."""
    seed = shared / "seed_tools.jsonl"
    d1, d2, d3 = (BENCH / f"probe_domains{n}_tools.jsonl" for n in ("", "2", "3"))
    small = [("seed_dev", shared / "seed_dev.jsonl", seed), ("probe", BENCH / "probe_cases.jsonl", seed),
             ("domains", BENCH / "probe_domains_cases.jsonl", d1),
             ("domains2", BENCH / "probe_domains2_cases.jsonl", d2)]
    return ([(label, [c], [t]) for label, c, t in small]
            + [("domains3", [BENCH / "probe_domains3_cases.jsonl"], [d3]),
               ("multilingual", [BENCH / "probe_multilingual_cases.jsonl"], [d3]),
               ("union (58)", [c for _, c, _ in small], list(dict.fromkeys(t for _, _, t in small)))])


def merged(caches: list[EnrichmentCache], registry: Registry) -> dict[str, dict] | None:
    """Each card's texts from every cache, in order, without repeats (None: a card is missing from one)."""
    raw = {}
    for tool in registry:
        answers = [cache.get(tool) for cache in caches]
        if any(a is None or "error" in a for a in answers):
            return None
        raw[tool.key] = {kind: list(dict.fromkeys(t for a in answers for t in a[kind]))
                         for kind in ("examples", "negatives", "keywords")}
    return raw


def main(shared: Path) -> None:
    data_dir = os.environ.get("FUNES_DATA_DIR", "instance")
    parts = build(config.load({"DATA_DIR": data_dir, "PACKS": [], "TOOLS_FILES": []}))
    model = parts.llm.model
    print("lenient accuracy per set; " + " | ".join(label for label, _ in SAMPLINGS))
    for label, case_files, tool_files in sets(shared):
        bare = Registry()
        for path in tool_files:
            for tool in load_file(path):
                bare.add(tool, str(path))
        cases = [c for path in case_files for c in load_cases(str(path))]
        results = []
        for _, samplings in SAMPLINGS:
            raw = merged([EnrichmentCache(data_dir, model, seed, t) for seed, t in samplings], bare)
            if raw is None:
                results.append("not enriched")
                continue
            registry = fit(bare, raw, parts.encoder, model)
            results.append(f"{score(measure_cases(parts.factory, cases, registry))['lenient_accuracy']:.3f}")
        print(f"{label:<14} n={len(cases):<4} " + " | ".join(results), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/eval"))
