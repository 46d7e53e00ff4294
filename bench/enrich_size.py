"""What the card's own words, the no-tool share, the e5 classifier and the fallback's gate are worth on enriched
registries.

Usage (after `cards enrich` has cached the tool files in the data dir; MetaTool's 199 cards are optional):
    FUNES_DATA_DIR=instance .venv/bin/python bench/enrich_size.py ../shared/eval
Scores seed_dev and bench/probe_cases over the seed tools, the first two domain probes over their tools, all
four over one registry of their 58 cards, the third domain probe, and MetaTool awareness over its 199 cards,
each under the defaults, with CARD_WEIGHT, CLASSIFIER_NONE_SHARE or FALLBACK_QUANTILE at 0 or MULTILINGUAL off
(all four is how they routed before 2026-11-25), with two settings tried against them, and bare.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.eval.scoring import load_cases, measure_cases, score  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402
from funes.tools.registry import Registry  # noqa: E402

BENCH = Path(__file__).resolve().parent
VARIANTS = [("defaults", {}), ("CARD_WEIGHT 0", {"CARD_WEIGHT": 0.0}),
            ("CLASSIFIER_NONE_SHARE 0", {"CLASSIFIER_NONE_SHARE": 0.0}), ("MULTILINGUAL off", {"MULTILINGUAL": False}),
            ("all four off (before)", {"CARD_WEIGHT": 0.0, "CLASSIFIER_NONE_SHARE": 0.0, "MULTILINGUAL": False,
                                       "FALLBACK_QUANTILE": 0.0}),
            ("CLASSIFIER_NONE_SHARE 0.15", {"CLASSIFIER_NONE_SHARE": 0.15}),
            ("GENERATED_FALLBACK 0", {"GENERATED_FALLBACK": 0.0}), ("FALLBACK_QUANTILE 0", {"FALLBACK_QUANTILE": 0.0}),
            ("bare", {"ENRICH": "off"})]


def sets(shared: Path) -> list[tuple[str, list[Path], list[Path]]]:
    """(label, cases files, tools files): the four 18-20 card sets, their union, MetaTool."""
    seed, meta = shared / "seed_tools.jsonl", shared / "public" / "metatool"
    small = [("seed_dev", shared / "seed_dev.jsonl", seed), ("probe", BENCH / "probe_cases.jsonl", seed),
             ("domains", BENCH / "probe_domains_cases.jsonl", BENCH / "probe_domains_tools.jsonl"),
             ("domains2", BENCH / "probe_domains2_cases.jsonl", BENCH / "probe_domains2_tools.jsonl")]
    union = ("union (58)", [c for _, c, _ in small], list(dict.fromkeys(t for _, _, t in small)))
    # the third domain probe was written after these changes were made: their held-out check
    third = ("domains3", [BENCH / "probe_domains3_cases.jsonl"], [BENCH / "probe_domains3_tools.jsonl"])
    return ([(label, [c], [t]) for label, c, t in small] + [union, third]
            + [("metatool (199)", [meta / "metatool_awareness.jsonl"], [meta / "metatool_tools.jsonl"])])


def registry(tool_files: list[Path]) -> Registry:
    merged = Registry()
    for path in tool_files:
        for tool in load_file(path):
            merged.add(tool, str(path))
    return merged


def main(shared: Path) -> None:
    data_dir = os.environ.get("FUNES_DATA_DIR", "instance")
    builds = [build(config.load({"DATA_DIR": data_dir, "PACKS": [], "TOOLS_FILES": [], **overrides}))
              for _, overrides in VARIANTS]
    print("lenient accuracy / no-tool F1 per set; " + " | ".join(label for label, _ in VARIANTS))
    for label, case_files, tool_files in sets(shared):
        bare = registry(tool_files)
        cases = [c for path in case_files for c in load_cases(str(path))]
        results = []
        for parts in builds:
            if not parts.enrichment.ready(bare):
                results = ["not enriched in this data dir; run `cards enrich` on its tools first"]
                break
            r = score(measure_cases(parts.factory, cases, parts.enrichment.apply(bare)))
            results.append(f"{r['lenient_accuracy']:.3f}/{r['no_tool']['f1']:.3f}")
        print(f"{label:<16} n={len(cases):<5} " + " | ".join(results), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/eval"))
