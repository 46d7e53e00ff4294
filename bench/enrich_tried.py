"""Ideas for enriched cards that were measured and not kept, rerunnable.

Usage (after `cards enrich` has cached the four sets' tool files in the data dir):
    FUNES_DATA_DIR=instance .venv/bin/python bench/enrich_tried.py ../shared/eval [--judge]
Lenient accuracy on seed_dev, bench/probe_cases, and both domain probes for: the enriched cards as they
are; without the negatives made by code from each card's keywords (kept: they are worth that much); the
card's description repeated among its examples; no keywords. `--judge` also asks the configured LLM, per
card of the first domain probe, whether each of its generated no-tool questions needs the tool.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.cards import prompt  # noqa: E402
from funes.cards.filters import DEFINITIONAL  # noqa: E402
from funes.eval.scoring import load_cases, measure_cases, score  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402
from funes.tools.registry import Registry  # noqa: E402

BENCH = Path(__file__).resolve().parent
JUDGE = ("For each message, true if answering it needs this tool (the user's own data, a live value, or an "
         "action), false if it can be answered from general knowledge without the tool.")


def variants() -> dict:
    def no_keyword_negatives(tool, g):
        made = {q.format(k=k) for k in g.keywords for q in DEFINITIONAL}
        return dataclasses.replace(g, negatives=tuple(n for n in g.negatives if n not in made))
    return {"as enriched": lambda tool, g: g,
            "without the keyword negatives": no_keyword_negatives,
            "description x4 among examples": lambda tool, g: dataclasses.replace(
                g, examples=g.examples + (tool.description,) * 4),
            "no keywords": lambda tool, g: dataclasses.replace(g, keywords=())}


def judge(parts, tools_path: Path) -> None:
    """How often the model says a card's own generated texts need the tool."""
    yes = n = 0
    for tool in load_file(tools_path):
        texts = parts.enrichment.cache.get(tool)
        if not texts:
            continue
        items = texts["negatives"] + texts["examples"][:4]
        listing = "\n".join(f"{i + 1}. {m}" for i, m in enumerate(items))
        schema = {"type": "object", "required": ["needs_tool"], "properties": {"needs_tool": {
            "type": "array", "items": {"type": "boolean"}, "minItems": len(items), "maxItems": len(items)}}}
        asked = [{"role": "user", "content": f"Tool:\n{prompt.describe(tool)}\n\nMessages:\n{listing}\n\n{JUDGE}"}]
        verdicts = json.loads(parts.llm.complete_json(asked, schema, None, seed=7, temperature=0.0,
                                                      max_tokens=100))["needs_tool"]
        yes, n = yes + sum(verdicts[:len(texts["negatives"])]), n + len(texts["negatives"])
    print(f"judge: {yes} of the {n} generated no-tool questions said to need their tool")


def main(shared: Path, with_judge: bool) -> None:
    parts = build(config.load({"DATA_DIR": os.environ.get("FUNES_DATA_DIR", "instance"), "PACKS": [],
                               "TOOLS_FILES": []}))
    seed = shared / "seed_tools.jsonl"
    sets = [(shared / "seed_dev.jsonl", seed), (BENCH / "probe_cases.jsonl", seed),
            (BENCH / "probe_domains_cases.jsonl", BENCH / "probe_domains_tools.jsonl"),
            (BENCH / "probe_domains2_cases.jsonl", BENCH / "probe_domains2_tools.jsonl")]
    print("lenient accuracy: seed_dev / probe / domains / domains2, mean")
    for name, change in variants().items():
        results = []
        for cases, tools in sets:
            registry = Registry(dataclasses.replace(t, generated=change(t, t.generated)) if t.generated else t
                                for t in parts.enrichment.apply(load_file(tools)))
            results.append(score(measure_cases(parts.factory, load_cases(cases), registry))["lenient_accuracy"])
        print(f"{name:<32}" + " / ".join(f"{r:.3f}" for r in results) + f"  {np.mean(results):.3f}", flush=True)
    if with_judge:
        judge(parts, sets[2][1])


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--judge"]
    main(Path(args[0] if args else "../shared/eval"), "--judge" in sys.argv)
