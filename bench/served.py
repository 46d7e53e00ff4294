"""A cases file routed by a real `funes serve` over HTTP, its tools beside the packs, scored as `funes eval` scores.

    .venv/bin/python bench/served.py CASES TOOLS [--json]

As a user meets it: `funes serve` on an empty data dir with FUNES_TOOLS_FILES=[TOOLS] (cards bare, as before
any enrichment: FUNES_ENRICH=off) beside the built-in packs; each case's messages go to POST /route as a
client sends them, and the Decisions it answers are scored (lenient accuracy, no-tool F1, recall@k by the
candidates' order). Latency is each request's wall time, HTTP and the decision's log write included.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.scale import served  # noqa: E402
from funes.eval.report import format_report  # noqa: E402
from funes.eval.scoring import Tally, load_cases, ranked_names  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases")
    ap.add_argument("tools")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cases, tally = load_cases(args.cases), Tally()
    with tempfile.TemporaryDirectory() as tmp:
        with served(Path(args.tools).resolve(), Path(tmp), cases[0].messages) as (client, url, _, start):
            for case in cases:
                t0 = time.perf_counter()
                answer = client.post(url, json={"messages": case.messages})
                answer.raise_for_status()
                decision = answer.json()
                ranked = ranked_names(decision["selected"], (c["name"] for c in decision["candidates"]))
                tally.add(case, set(decision["selected"]), ranked, (time.perf_counter() - t0) * 1000)
    report = tally.report() | {"start_s": round(start, 1)}
    print(json.dumps(report) if args.json else format_report(report) + f"\nstart-up           {start:.1f} s")


if __name__ == "__main__":
    main()
