"""e5 alone: recall@1 of its closest card ("name: description") on the requests that look non-English and need a
tool (all of a probe's such requests where fewer than five look non-English), the base e5 beside tuned deltas.

    .venv/bin/python bench/e5_recall.py [DELTA ...]     (funes/selection/e5_tools/delta.safetensors is the shipped one)
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from funes.selection.e5_onnx import E5Onnx  # noqa: E402
from funes.selection.index import head_text  # noqa: E402
from funes.selection.multilingual import e5_weights, looks_non_english  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402

BENCH = Path(__file__).resolve().parent
PROBES = (("multilingual", "probe_multilingual_cases.jsonl", "probe_domains3_tools.jsonl"),
          ("multilingual2", "probe_multilingual2_cases.jsonl", "probe_multilingual2_tools.jsonl"),
          ("mcp2", "probe_mcp2_cases.jsonl", "probe_mcp2_tools.json"),
          ("domains", "probe_domains_cases.jsonl", "probe_domains_tools.jsonl"),
          ("mixed2", "probe_mixed2_cases.jsonl", "probe_mixed2_tools.jsonl"))


def recall(e5: E5Onnx, cases: list[dict], names: list[str], cards: np.ndarray) -> float:
    """The share of cases whose closest card is one they accept."""
    best = np.argmax(e5.encode([c["messages"][-1]["content"] for c in cases], True) @ cards.T, axis=1)
    return float(np.mean([names[b] in {*c["expected_tools"], *(c.get("acceptable_tools") or [])}
                          for b, c in zip(best, cases)]))


def main() -> None:
    models = Path(tempfile.mkdtemp(prefix="e5-recall-"))
    engines = {"base": E5Onnx(str(e5_weights()), models)}
    engines.update({Path(d).stem: E5Onnx(str(e5_weights()), models, delta=Path(d)) for d in sys.argv[1:]})
    for name, cases_file, tools_file in PROBES:
        tools = load_file(BENCH / tools_file)
        cases = [json.loads(line) for line in (BENCH / cases_file).open(encoding="utf-8") if line.strip()]
        cases = [c for c in cases if c.get("expected_tools")]
        foreign = [c for c in cases if looks_non_english(c["messages"][-1]["content"])]
        cases = foreign if len(foreign) >= 5 else cases
        row = []
        for key, e5 in engines.items():
            cards = e5.encode([head_text(t) for t in tools], True)
            row.append(f"{key} {recall(e5, cases, [t.name for t in tools], cards):.3f}")
        print(f"{name:<14} n={len(cases):<4}", "  ".join(row), flush=True)


if __name__ == "__main__":
    main()
