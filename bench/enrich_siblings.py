"""Tried and not kept: an enrichment prompt that names each card's three nearest cards of its registry.

Read/write siblings (`get_device_status` beside `set_door_lock`, `list_events` beside `create_event`) are the most
common wrong pick of enriched registries, so this prompt lists them under the card ("Other tools of the same
assistant (a message one of them serves does not belong here)") and each worked example beside two tools of its
own app. It writes its texts with the configured LLM (cached apart, as prompt 3, keyed by the card and the cards
named), then scores the cases with the default texts and with these, the router the same.

Usage (after `cards enrich TOOLS` has cached the default texts; about 30 s a card on one core):
    FUNES_DATA_DIR=instance .venv/bin/python bench/enrich_siblings.py CASES TOOLS
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import config  # noqa: E402
import funes.cards.cache as cache  # noqa: E402
from funes.build import build  # noqa: E402
from funes.cards import EnrichmentCache, Enricher, prompt  # noqa: E402
from funes.eval.scoring import load_cases, measure_cases, score  # noqa: E402
from funes.selection.index import head_text  # noqa: E402
from funes.tools.loaders import load_file  # noqa: E402

NEAREST = 3
SHOT_OTHERS = (  # two tools of each worked example's own app, which its answer leaves alone
    (("return_item", "Start a return or refund for something the user bought."),
     ("list_orders", "The user's past orders with their dates, items and totals.")),
    (("cancel_reservation", "Cancel a restaurant booking the user made."),
     ("find_restaurants", "Restaurants near a place that match a cuisine or a budget.")),
    (("get_workout_history", "The user's past exercise sessions, with weekly totals."),
     ("set_fitness_goal", "Set a weekly goal of minutes or distance.")))


def nearest(registry, encoder) -> dict[str, list[tuple[str, str]]]:
    """Each card's key -> (name, description) of its NEAREST other cards by name and description."""
    tools = list(registry)
    vectors = encoder.encode_cards([head_text(t) for t in tools])
    sims = vectors @ vectors.T
    return {t.key: [(tools[j].name, tools[j].description) for j in np.argsort(-sims[i]) if j != i][:NEAREST]
            for i, t in enumerate(tools)}


def ask(card: str, others) -> str:
    asks = "\n".join(f'- "{k}": {n} {what}.' for k, n, what in prompt.KINDS)
    listed = "\n".join(f"- {n}: {d[:160]}" for n, d in others)
    return (f"Tool:\n{card}\n\nOther tools of the same assistant (a message one of them serves does not belong "
            f"here):\n{listed}\n\nWrite the messages for these fields; each must need this tool, "
            f"not one of the others:\n{asks}")


def use_siblings_prompt(near: dict) -> None:
    """Swap in the siblings prompt and its cache keys (prompt 3, the cards named folded into the key)."""
    def messages(tool):
        shots = []
        for (card, answer), others in zip(prompt.SHOTS, SHOT_OTHERS):
            shots += [{"role": "user", "content": ask(card, others)},
                      {"role": "assistant", "content": json.dumps(answer, ensure_ascii=False, separators=(",", ":"))}]
        return [{"role": "system", "content": prompt.SYSTEM}, *shots,
                {"role": "user", "content": ask(prompt.describe(tool), near.get(tool.key, []))}]
    card_key = EnrichmentCache.key

    def key(self, tool):
        return hashlib.sha256((card_key(self, tool) + json.dumps(near.get(tool.key, []))).encode()).hexdigest()[:32]
    prompt.messages, cache.PROMPT_VERSION, EnrichmentCache.key = messages, 3, key


def main(cases_path: str, tools_path: str) -> None:
    parts = build(config.load({"DATA_DIR": os.environ.get("FUNES_DATA_DIR", "instance"), "PACKS": [],
                               "TOOLS_FILES": []}))
    bare, cases = load_file(tools_path), load_cases(cases_path)
    if not parts.enrichment.ready(bare):
        sys.exit(f"{tools_path}: run `python -m funes cards enrich {tools_path}` first")
    before = score(measure_cases(parts.factory, cases, parts.enrichment.apply(bare)))
    use_siblings_prompt(nearest(bare, parts.encoder))
    Enricher(parts.llm, parts.enrichment.cache).run(bare)  # cached: a rerun only scores
    after = score(measure_cases(parts.factory, cases, parts.enrichment.apply(bare)))
    for label, r in (("default prompt", before), ("siblings named", after)):
        print(f"{label:<15} lenient {r['lenient_accuracy']:.3f}  no-tool F1 {r['no_tool']['f1']:.3f}  "
              f"recall@1 {r['recall_at']['1']:.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
