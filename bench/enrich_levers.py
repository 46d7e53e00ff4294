"""Which lever moves enriched bare-card routing: thresholds, the classifier's C, more examples, or their quality.

Usage (after `cards enrich` has cached both tool files in the data dir):
    FUNES_DATA_DIR=instance python bench/enrich_levers.py ../shared/eval
Scores seed_dev and bench/probe_cases over the seed tools, and bench/probe_domains_cases over the domain
tools, each as: bare, enriched, enriched with other decision thresholds, enriched with another C, and the
packs' hand-written cards cut to their first 10 and 20 examples (what written examples are worth).
"""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.eval.scoring import load_cases, measure_cases, score  # noqa: E402
from funes.tools.loaders import load_file, load_packs  # noqa: E402
from funes.tools.registry import Registry  # noqa: E402

BENCH = Path(__file__).resolve().parent


def sets(shared: Path) -> list[tuple[str, Path, Path]]:
    seed = shared / "seed_tools.jsonl"
    return [("seed_dev", shared / "seed_dev.jsonl", seed), ("probe", BENCH / "probe_cases.jsonl", seed),
            ("domains", BENCH / "probe_domains_cases.jsonl", BENCH / "probe_domains_tools.jsonl")]


def line(name: str, results: list[str]) -> None:
    print(f"{name:<44}" + "  ".join(results), flush=True)


def fmt(label: str, r: dict) -> str:
    return f"{label} {r['lenient_accuracy']:.3f}/{r['no_tool']['f1']:.3f}/{r['recall_at']['1']:.3f}"


def registries(parts, tools: Path, enriched: bool) -> Registry:
    bare = load_file(tools)
    if enriched and not parts.enrichment.ready(bare):
        raise SystemExit(f"{tools}: not enriched in {parts.settings['DATA_DIR']}; run `cards enrich` on it first")
    return parts.enrichment.apply(bare) if enriched else bare


def main(shared: Path) -> None:
    data_dir = os.environ.get("FUNES_DATA_DIR", "instance")
    base = {"DATA_DIR": data_dir, "PACKS": [], "TOOLS_FILES": []}
    parts = build(config.load(base))
    print("lenient / no-tool F1 / recall@1 per set")
    measured = {}
    for kind in ("bare", "enriched"):
        results = []
        for label, cases, tools in sets(shared):
            m = measure_cases(parts.factory, load_cases(cases), registries(parts, tools, kind == "enriched"))
            measured[kind, label] = m
            results.append(fmt(label, score(m)))
        line(kind, results)
    for overrides in ({"CLASSIFIER_THRESHOLD": 0.35}, {"GENERATED_FALLBACK": 0.0}, {"GENERATED_FALLBACK": 0.7}):
        line(f"enriched, {overrides}", [fmt(label, score(measured["enriched", label], overrides))
                                        for label, _, _ in sets(shared)])
    for c in (4.0, 32.0):
        other = build(config.load({**base, "CLASSIFIER_C": c}))
        line(f"enriched, CLASSIFIER_C={c}", [fmt(label, score(measure_cases(
            other.factory, load_cases(cases), registries(other, tools, True)))) for label, cases, tools in sets(shared)])
    hand = load_packs(["finance", "trip", "assistant", "watch_history", "knowledge"])
    for n in (None, 20, 10):
        cut = Registry(dataclasses.replace(t, examples=t.examples[:n]) for t in hand)
        line(f"hand cards, first {n or 'all'} examples", [fmt(label, score(measure_cases(
            parts.factory, load_cases(cases), cut))) for label, cases, _ in sets(shared)[:2]])


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/eval"))
