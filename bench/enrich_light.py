"""Would a lighter enrichment pay as much? One enriched cards file cut to fewer generated texts, each cut routed
alone and beside the packs (lenient accuracy, right tool first, no-tool F1).

    scripts/funes cards enrich bench/mcp_servers_tools.json --out /tmp/mcp_enriched.jsonl
    .venv/bin/python bench/enrich_light.py /tmp/mcp_enriched.jsonl bench/probe_mcp_cases.jsonl

The model writes each card's texts in the prompt's order (funes/cards/prompt.py: 3 direct, 4 indirect, 3 terse,
1 long, 6 in other languages, 2 follow-ups, then 6 no-tool questions and 5 keywords), so "the first N examples"
is about what a prompt asking for fewer would get, at about N/19 of the examples' tokens.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from funes.eval.rows import measure, parts_for  # noqa: E402
from funes.tools.loaders import read_cards  # noqa: E402

CUTS = (("every text", None, True, True), ("the first 11 examples, no-tool questions", 11, True, False),
        ("the first 7 examples, no-tool questions", 7, True, False), ("the first 7 examples", 7, False, False),
        ("the first 3 examples, no-tool questions", 3, True, False))


def cut(cards: list[dict], examples: int | None, negatives: bool, keywords: bool) -> list[dict]:
    """The cards with fewer generated texts."""
    out = []
    for card in cards:
        g = dict(card["generated"])
        g["examples"] = g["examples"][:examples]
        g["negatives"] = g["negatives"] if negatives else []
        g["keywords"] = g.get("keywords", []) if keywords else []
        out.append({**card, "generated": g})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("enriched", help="a file `scripts/funes cards enrich --out` wrote")
    ap.add_argument("cases")
    args = ap.parse_args()
    cards = [card for _, card in read_cards(args.enriched)]
    parts = parts_for()
    bare = [{k: v for k, v in card.items() if k != "generated"} for card in cards]
    with tempfile.TemporaryDirectory() as tmp:
        for name, texts in [("bare", bare), *((n, cut(cards, *how)) for n, *how in CUTS)]:
            path = Path(tmp) / "cards.jsonl"
            path.write_text("".join(json.dumps(c) + "\n" for c in texts), encoding="utf-8")
            figures = [measure(parts, kind, args.cases, str(path)) for kind in ("bare", "served")]
            print(f"{name:<42} " + "   ".join(f"{kind} {r['lenient']:.3f} / {r['first']:.3f} / {r['no_tool_f1']:.3f}"
                                            for kind, r in zip(("alone", "beside the packs"), figures)), flush=True)


if __name__ == "__main__":
    main()
