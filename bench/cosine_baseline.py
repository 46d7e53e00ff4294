"""The naive baseline the issues compare with: MiniLM cosine against "name: description", one global threshold.

Usage: .venv/bin/python bench/cosine_baseline.py CASES TOOLS
The threshold is tuned on the very cases scored (an upper bound for the baseline): the best tool is
selected when its cosine reaches it, else none. Prints that threshold and the lenient accuracy it gets.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.eval.scoring import lenient_ok, load_cases  # noqa: E402
from funes.messages import user_turns  # noqa: E402
from funes.selection.index import head_text  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402


def main(cases_path: str, tools_path: str) -> None:
    encoder = build(config.load({"PACKS": [], "TOOLS_FILES": []})).text_encoder  # MiniLM, whatever EMBED_MODEL says
    tools = list(load_file(tools_path))
    cases = load_cases(cases_path)
    heads = encoder.encode_cards([head_text(t) for t in tools])
    sims = encoder.encode_query([user_turns(c.messages)[0] for c in cases]) @ heads.T
    best, top = sims.argmax(axis=1), sims.max(axis=1)
    scored = []
    for threshold in np.arange(0.0, 0.9, 0.01):
        picks = [{tools[b].name} if s >= threshold else set() for b, s in zip(best, top)]
        scored.append((np.mean([lenient_ok(c, p) for c, p in zip(cases, picks)]), threshold))
    accuracy, threshold = max(scored)
    print(f"cosine baseline: threshold {threshold:.2f} (tuned on these cases), lenient accuracy {accuracy:.3f}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: bench/cosine_baseline.py CASES TOOLS")
    main(sys.argv[1], sys.argv[2])
