"""What the enriched-card fallback is worth: the classifier's best card (now) against the bare-card similarity pick.

Usage (after `cards enrich` has cached the tool files in the data dir):
    FUNES_DATA_DIR=instance .venv/bin/python bench/enrich_fallback.py ../shared/eval
Scores seed_dev and bench/probe_cases over the seed tools, and both domain probes over their tools, on the
same measured evidence under both rules (before 2026-11-25 an unsure classifier deferred to bare similarity).
"""
from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.eval.scoring import load_cases, measure_cases, score  # noqa: E402
from funes.selection import policy  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402

BENCH = Path(__file__).resolve().parent


def similarity_pick(settings: dict):
    """The previous rule: the best generated card by bare-card similarity, at TOOL_THRESHOLD and NONE_MARGIN."""
    def pick(ev, floor, s):
        bare = replace(ev, classifier=None, no_tool=None)
        thresholds = np.where(np.isinf(floor), np.inf, settings["TOOL_THRESHOLD"]).astype(np.float32)
        return policy._row_picks(bare, policy.similarity(bare, settings), 0, 0, thresholds, settings)[:1]
    return pick


def main(shared: Path) -> None:
    parts = build(config.load({"DATA_DIR": os.environ.get("FUNES_DATA_DIR", "instance"), "PACKS": [],
                               "TOOLS_FILES": []}))
    seed = shared / "seed_tools.jsonl"
    sets = [("seed_dev", shared / "seed_dev.jsonl", seed), ("probe", BENCH / "probe_cases.jsonl", seed),
            ("domains", BENCH / "probe_domains_cases.jsonl", BENCH / "probe_domains_tools.jsonl"),
            ("domains2", BENCH / "probe_domains2_cases.jsonl", BENCH / "probe_domains2_tools.jsonl")]
    now = policy._unsure_pick
    print("lenient accuracy: similarity fallback (before) / classifier's best card (now)")
    for label, cases, tools in sets:
        bare = load_file(tools)
        if not parts.enrichment.ready(bare):
            print(f"{label}: {tools} not enriched in this data dir; run `cards enrich` on it first")
            continue
        measured = measure_cases(parts.factory, load_cases(cases), parts.enrichment.apply(bare))
        try:
            policy._unsure_pick = similarity_pick(parts.settings)
            before = score(measured)["lenient_accuracy"]
        finally:
            policy._unsure_pick = now
        print(f"{label:<10} {before:.3f} / {score(measured)['lenient_accuracy']:.3f}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/eval"))
