"""A user's tools beside the packs against the same tools alone, and the packs' own cases with and without them.

    .venv/bin/python bench/mixed.py CASES TOOLS [--packs-cases SEED_DEV] [--json]   (after scripts/funes once)

CASES route over the configured packs plus TOOLS ("served", as `FUNES_TOOLS_FILES` would load them). The
cases that need a tool and whose every right answer is a tool of TOOLS are also routed over TOOLS alone,
the difference being what the packs cost the user's tools. With --packs-cases, those cases (the packs' own) are
routed over the packs alone and beside TOOLS. One run, one process: the figures compare side by side.
Bare cards route bare under FUNES_ENRICH=off; under auto they route enriched once `cards enrich` cached them.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.eval.scoring import load_cases, measure_cases, score  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402
from funes.tools.registry import Registry  # noqa: E402


def lenient(parts, cases, registry) -> dict:
    """Lenient accuracy, no-tool F1 and per-tag accuracy of `cases` over `registry`."""
    if not cases:
        return {"n": 0}
    report = score(measure_cases(parts.factory, cases, parts.enrichment.apply(registry)))
    return {"n": report["n"], "lenient": report["lenient_accuracy"], "no_tool_f1": report["no_tool"]["f1"],
            "by_tag": {t: v["lenient_accuracy"] for t, v in report["by_tag"].items()}}


def run(cases_path: str, tools_path: str, packs_cases: str | None) -> dict:
    parts = build(config.load())
    user = load_file(tools_path)
    served = Registry([*parts.registry, *user])
    cases = load_cases(cases_path)
    own = [c for c in cases if c.expected and (c.expected | c.acceptable) <= set(user.names)]
    out = {"served": lenient(parts, cases, served),
           "user_cases": {"alone": lenient(parts, own, user), "served": lenient(parts, own, served)}}
    if packs_cases:
        packs = load_cases(packs_cases)
        out["packs_cases"] = {"packs": lenient(parts, packs, parts.registry), "served": lenient(parts, packs, served)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases")
    ap.add_argument("tools")
    ap.add_argument("--packs-cases")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = run(args.cases, args.tools, args.packs_cases)
    if args.json:
        print(json.dumps(out))
        return
    for name, result in [("served", out["served"]), *(
            (f"{group} {k}", v) for group in ("user_cases", "packs_cases") for k, v in out.get(group, {}).items())]:
        print(f"{name:<20} n={result['n']:<4} lenient {result.get('lenient', 0):.3f}  "
              f"no-tool F1 {result.get('no_tool_f1', 0):.3f}")


if __name__ == "__main__":
    main()
