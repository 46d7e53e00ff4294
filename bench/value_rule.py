"""A study, measured and not adopted: a rule that routes a message carrying a URL or an email address to the
cards whose arguments take one (by JSON Schema `format`, or a URL argument's name), before the classifier or
the gate. Prints lenient accuracy without and with the rule for each pair of files.

Usage: .venv/bin/python bench/value_rule.py CASES TOOLS [CASES TOOLS ...]
Enriched where the data dir's cache has the cards' texts (FUNES_ENRICH=off for bare).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import regex

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.eval.scoring import lenient_ok, load_cases, measure_cases  # noqa: E402
from funes.selection import policy  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402

URL = regex.compile(r"\b(?:https?://|www\.)[^\s<>\"']+", regex.I)
EMAIL = regex.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
FORMATS = {"uri": URL, "url": URL, "iri": URL, "uri-reference": URL, "email": EMAIL, "idn-email": EMAIL}
URL_NAME = regex.compile(r"(?:^|_)(?:url|uri|link|href)$", regex.I)


def takes(tool) -> list[regex.Pattern]:
    """The value patterns of a card's arguments."""
    found = []
    for name, spec in (tool.parameters.get("properties") or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        pattern = FORMATS.get(str(spec.get("format", "")).lower())
        if pattern is None and URL_NAME.search(name) and spec.get("type", "string") == "string":
            pattern = URL
        if pattern is not None:
            found.append(pattern)
    return found


def with_rule(router):
    """The router's cascade with the value rule right after `name` (before the classifier or the gate)."""
    patterns = [takes(t) for t in router.tools]

    def fire(i: policy.Inputs):
        hits = [t for t, ps in enumerate(patterns) if any(p.search(i.ev.message) for p in ps)]
        if not hits:
            return None
        sim = policy.similarity(i.ev, i.s)[0]
        return [max(hits, key=lambda t: sim[t])], i.rows
    k = [r.name for r in router.rules].index("name") + 1
    return router.rules[:k] + (policy.Rule("value", (), fire),) + router.rules[k:]


def main(paths: list[str]) -> None:
    if not paths or len(paths) % 2:
        sys.exit("usage: value_rule.py CASES TOOLS [CASES TOOLS ...]")
    parts = build(config.load())
    for cases_path, tools_path in zip(paths[::2], paths[1::2]):
        measured = measure_cases(parts.factory, load_cases(cases_path), parts.enrichment.apply(load_file(tools_path)))
        router = measured[0].router
        without = np.mean([lenient_ok(m.case, set(router.picks(m.evidence))) for m in measured])
        router.rules = with_rule(router)
        with_it = np.mean([lenient_ok(m.case, set(router.picks(m.evidence))) for m in measured])
        print(f"{Path(cases_path).name} ({router.cards}): without {without:.3f}, with the value rule {with_it:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
