"""Where enriched registries still miss: lenient accuracy per case tag, pooled over the five enriched sets.

Usage (after `cards enrich` has cached the seed tools and the three domain probes' tools in the data dir):
    FUNES_DATA_DIR=instance .venv/bin/python bench/enrich_tags.py ../shared/eval
Pools seed_dev and bench/probe_cases over the seed tools and the three domain probes over their own tools,
each routed over its own enriched cards: each set's lenient accuracy and no-tool F1, English requests that
need a tool as questions and as other requests, then the tags with the most misses first (rerun at two
commits, in one data dir, to compare enrichment prompts).
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.eval.scoring import lenient_ok, load_cases, measure_cases, score  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402

BENCH = Path(__file__).resolve().parent
QUESTION = re.compile(r"\?\s*$|^(what|which|is|are|did|do|does|when|how|where|who|can|could|will|any)\b", re.I)


def sets(shared: Path) -> list[tuple[Path, Path]]:
    seed = shared / "seed_tools.jsonl"
    return [(shared / "seed_dev.jsonl", seed), (BENCH / "probe_cases.jsonl", seed)] + [
        (BENCH / f"probe_{name}_cases.jsonl", BENCH / f"probe_{name}_tools.jsonl")
        for name in ("domains", "domains2", "domains3")]


def main(shared: Path) -> None:
    parts = build(config.load({"DATA_DIR": os.environ.get("FUNES_DATA_DIR", "instance"), "PACKS": [],
                               "TOOLS_FILES": []}))
    pooled: dict[str, list[float]] = {}
    forms: dict[str, list[int]] = {}
    for cases, tools in sets(shared):
        bare = load_file(tools)
        if not parts.enrichment.ready(bare):
            sys.exit(f"{tools}: run `python -m funes cards enrich {tools}` first")
        measured = measure_cases(parts.factory, load_cases(str(cases)), parts.enrichment.apply(bare))
        report = score(measured)
        for m in measured:  # English requests that need a tool: questions apart from the rest
            if m.case.expected and "non_english" not in m.case.tags:
                form = "question" if QUESTION.search(m.case.messages[-1]["content"].strip()) else "other request"
                n, ok = forms.setdefault(form, [0, 0])
                forms[form] = [n + 1, ok + lenient_ok(m.case, set(m.router.decide(m.evidence).selected))]
        print(f"{cases.name:<32} lenient {report['lenient_accuracy']:.3f}  no-tool F1 {report['no_tool']['f1']:.3f}")
        for tag, r in report["by_tag"].items():
            n, ok = pooled.setdefault(tag, [0, 0.0])
            pooled[tag] = [n + r["n"], ok + r["n"] * r["lenient_accuracy"]]
    for form, (n, ok) in forms.items():
        print(f"English {form}s needing a tool: {n} cases, lenient {ok / n:.3f}")
    print(f"{'tag':<16} {'cases':>5} {'lenient':>8} {'misses':>7}")
    for tag, (n, ok) in sorted(pooled.items(), key=lambda item: item[1][1] - item[1][0]):
        print(f"{tag:<16} {n:>5} {ok / n:>8.2f} {round(n - ok):>7}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/eval"))
