"""Two views of an enriched registry, measured: its classifier over generated texts, and its bare cards over the
tuned encoder and the gate. How often is either right, and does taking the bare pick in some cases pay?

Usage: .venv/bin/python bench/merge_views.py CASES TOOLS [CASES TOOLS ...]
The registries are enriched from the data dir's cache (`cards enrich` them first). For each pair it prints
the lenient accuracy of each view, of "either is right" (an upper bound no rule reaches), and of the rule
"take the bare pick where the enriched view picks none (or picked by its fallback) and the gate's P is at
least T", for a few T; and of fusing the two: P(needs a tool) averaged over the views (the gate's, and one minus
the classifier's P(no tool)) reaching T, then the card whose P(card | a tool is needed) averaged over the views
is highest (one tool); then the mean over the pairs given.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.eval.scoring import lenient_ok, load_cases, measure_cases  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402
from funes.tools.registry import Registry  # noqa: E402

RULES = [(t, bys) for t in (0.5, 0.7, 0.9) for bys in (("none", "veto"), ("none", "veto", "fallback"))]
FUSED = (0.3, 0.4, 0.5)


def views(parts, cases_path: str, tools_path: str) -> list[dict]:
    """Per case: whether each view is right, what the enriched one decided by, and the gate's P."""
    registry = parts.enrichment.apply(load_file(tools_path))
    bare = parts.factory.router(Registry([dataclasses.replace(t, generated=None, examples=(), negatives=())
                                          for t in registry]))
    rows = []
    for m in measure_cases(parts.factory, load_cases(cases_path), registry):
        enriched, alone = m.router.decide(m.evidence), bare.select(m.case.messages)
        need = ((alone.need_probability or 0.0) + 1 - (enriched.no_tool_probability or 0.0)) / 2
        rows.append({"enriched": lenient_ok(m.case, set(enriched.selected)), "by": enriched.decided_by,
                     "bare": lenient_ok(m.case, set(alone.selected)), "picks": bool(alone.selected),
                     "p": alone.need_probability or 0.0,
                     "fused": {t: lenient_ok(m.case, {fused_card(enriched, alone)} if need >= t else set())
                               for t in FUSED}})
    return rows


def fused_card(enriched, alone) -> str:
    """The card most likely by the two views' P(card | a tool is needed), averaged."""
    p: dict[str, float] = {}
    for decision in (enriched, alone):
        for c in decision.candidates:
            p[c.name] = p.get(c.name, 0.0) + (c.probability or 0.0) / 2
    return max(p, key=p.get)


def merged(rows: list[dict], threshold: float, bys: tuple[str, ...]) -> float:
    take = [r["picks"] and r["by"] in bys and r["p"] >= threshold for r in rows]
    return float(np.mean([r["bare"] if t else r["enriched"] for r, t in zip(rows, take)]))


def main(paths: list[str]) -> None:
    if not paths or len(paths) % 2:
        sys.exit("usage: merge_views.py CASES TOOLS [CASES TOOLS ...]")
    parts = build(config.load())
    table = []
    for cases_path, tools_path in zip(paths[::2], paths[1::2]):
        rows = views(parts, cases_path, tools_path)
        line = [np.mean([r["enriched"] for r in rows]), np.mean([r["bare"] for r in rows]),
                np.mean([r["enriched"] or r["bare"] for r in rows])] + [merged(rows, t, b) for t, b in RULES] + \
            [np.mean([r["fused"][t] for r in rows]) for t in FUSED]
        table.append(line)
        print(Path(cases_path).name, " ".join(f"{x:.3f}" for x in line))
    names = ["enriched", "bare", "either"] + [f"P>={t} on {'/'.join(b)}" for t, b in RULES] + \
        [f"fused, P(needs a tool)>={t}" for t in FUSED]
    for name, value in zip(names, np.mean(table, axis=0)):
        print(f"mean {name}: {value:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
