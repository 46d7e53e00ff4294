"""A shortlist, measured: where the classifier picked one tool, its runner-up is offered too when its P is at
least RATIO of the pick's, and the LLM chooses. Runs any `funes` command with that policy in force.

Usage: .venv/bin/python bench/shortlist.py [--ratio 0.5] bench-proxy --cases $S/seed_dev.jsonl \
           --tools $S/seed_tools.jsonl -n 20 --e2e 30
Prints, after the command's own output, how many decisions there were and how many got a runner-up.
"""
from __future__ import annotations

import atexit
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from funes.cli import main  # noqa: E402
from funes.selection import policy  # noqa: E402

counts = {"decisions": 0, "shortlisted": 0}


def with_runner_up(ratio: float):
    """policy.choose, adding the classifier's runner-up to a lone classifier or fallback pick."""
    choose = policy.choose

    def shortlisted(ev, scores, thresholds, s, requires, fallback, fallback_gate=-np.inf, rules=None):
        picks, decided_by, rows = choose(ev, scores, thresholds, s, requires, fallback, fallback_gate, rules)
        counts["decisions"] += 1
        if len(picks) == 1 and ev.classifier is not None and decided_by in ("classifier", "fallback"):
            order = [int(i) for i in np.argsort(-ev.classifier[0]) if int(i) != picks[0]]
            if order and ev.classifier[0][order[0]] >= ratio * ev.classifier[0][picks[0]]:
                counts["shortlisted"] += 1
                picks = picks + order[:1]
        return picks, decided_by, rows
    return shortlisted


if __name__ == "__main__":
    args = sys.argv[1:]
    ratio = 0.5
    if args[:1] == ["--ratio"]:
        ratio, args = float(args[1]), args[2:]
    policy.choose = with_runner_up(ratio)
    atexit.register(lambda: print(f"shortlist at ratio {ratio}: {counts}", file=sys.stderr))
    sys.argv = ["funes", *args]
    main()
