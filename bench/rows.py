"""Every routing row of docs/results.md's accuracy floor in one process: lenient accuracy, right tool first,
recall@5 and no-tool F1.

    .venv/bin/python bench/rows.py --eval ../shared/eval [--rows a,b] [--json | --markdown]   (after scripts/funes once)

The rows and their kinds are funes/eval/rows.py's; bare cards route bare (FUNES_ENRICH=off is set), or with
their generated texts (--enriched: the enrichment cache must hold every card's). The
configured encoder and its gate route (FUNES_EMBED_MODEL=DIR for a candidate model, its gate inside). "first"
is recall@1 on the cases that need a tool. `tests/test_accuracy_floor.py` fails when a row falls more than 0.02
below the table in docs/results.md. --shortlist K answers each case as find_tools would, at most K tools.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from funes.eval.rows import ROWS, NotEnriched, measure, parts_for, path, shortlisted  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", required=True, help="shared/eval (for seed_dev and seed_tools)")
    ap.add_argument("--rows", help="comma-separated row names (default: all)")
    out_format = ap.add_mutually_exclusive_group()
    out_format.add_argument("--json", action="store_true")
    out_format.add_argument("--markdown", action="store_true", help="the table docs/results.md holds")
    ap.add_argument("--enriched", action="store_true",
                    help="route bare cards with the generated texts of DATA_DIR's cache (`scripts/funes cards enrich` "
                         "each tools file first)")
    ap.add_argument("--shortlist", type=int, metavar="K", help="answer each case with a shortlist of at most K")
    ap.add_argument("--unsure", type=float, metavar="P",
                    help="with --shortlist: where the router chose no tool, offer the likely cards all the same "
                         "at P(needs a tool) ≥ P")
    args = ap.parse_args()
    wanted = set(args.rows.split(",")) if args.rows else None
    parts, out = parts_for(enriched=args.enriched), {}
    if args.markdown:
        print("| row | n | lenient | first | recall@5 | no-tool F1 |\n|---|---|---|---|---|---|")
    for name, kind, cases, tools in ROWS:
        if wanted is not None and name not in wanted:
            continue
        files = path(cases, args.eval), tools and path(tools, args.eval)
        if args.shortlist:
            r = out[name] = shortlisted(parts, kind, *files, args.shortlist, args.unsure)
            if not args.json:
                print(f"{name:<19} n={r['n']:<4} a right tool listed {r['right_in']:.3f} (or named beside none "
                      f"{r['right_or_named']:.3f})  tools median {r['median']} "
                      f"mean {r['mean']:.2f}  no-tool cases answered none {r['no_tool_empty']:.3f}", flush=True)
            continue
        r = out[name] = measure(parts, kind, *files)
        if args.markdown:
            print(f"| {name} | {r['n']} | {r['lenient']:.3f} | {r['first']:.3f} | {r['recall5']:.3f} | "
                  f"{r['no_tool_f1']:.3f} |", flush=True)
        elif not args.json:
            print(f"{name:<19} n={r['n']:<4} lenient {r['lenient']:.3f}  first {r['first']:.3f}  "
                  f"recall@5 {r['recall5']:.3f}  no-tool F1 {r['no_tool_f1']:.3f}", flush=True)
    if args.json:
        print(json.dumps(out))
    elif not args.markdown and not args.shortlist:
        bare = [r for n, r in out.items() if n.endswith(" bare")]
        if bare:
            print(f"mean of bare rows: lenient {sum(r['lenient'] for r in bare) / len(bare):.3f}, first "
                  f"{sum(r['first'] for r in bare) / len(bare):.3f} (encoder "
                  f"{os.environ.get('FUNES_EMBED_MODEL') or 'shipped'})")


if __name__ == "__main__":
    try:
        main()
    except NotEnriched as e:
        sys.exit(str(e))
