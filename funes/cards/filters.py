"""Generated texts fitted to a registry: what a card's model wrote, minus what would mislead among these cards."""
from __future__ import annotations

import dataclasses

import numpy as np
import regex

from funes.cards.prompt import PROMPT_VERSION, shot_heads
from funes.selection.index import head_text
from funes.tools.registry import Generated, Registry

# An example this much closer to another card than to its own describes the other tool.
OTHER_CARD_MARGIN = 0.1
# Questions about a card's own keywords that no tool answers: the small model's own "negatives" are often
# requests ("What is the current exchange rate?"), these never are (+0.015 on four sets; docs/results.md).
DEFINITIONAL = ("What is {k}?", "How does {k} work in general?", "Any tips about {k}?")
DEFINED_KEYWORDS = 2


def fit(registry: Registry, raw: dict[str, dict], encoder, model: str) -> Registry:
    """A copy of `registry` whose cards with raw texts (by key) carry them as `generated`, filtered."""
    # Fitted among the cards that have texts only: written ones beside them (the packs') are routed apart
    # (funes.selection.mixed), so a user's cards carry the same texts beside the packs as alone.
    peers = [t for t in registry if t.key in raw]
    position = {t.key: i for i, t in enumerate(peers)}
    # the worked tools count as other cards: an example nearer to one of them copies the prompt's shot
    heads = encoder.encode_cards([head_text(t) for t in peers] + shot_heads())
    keywords = {t.key: set(raw[t.key]["keywords"]) for t in peers if t.key in raw}
    fitted = []
    for tool in registry:
        texts = raw.get(tool.key)
        if texts is None or tool.key not in position:
            fitted.append(tool)
            continue
        examples = _own_examples(texts["examples"], position[tool.key], heads, encoder)
        negatives = _true_negatives(texts["negatives"], examples, encoder)
        shared = set().union(*(k for key, k in keywords.items() if key != tool.key))
        words = [w for w in texts["keywords"] if w not in shared and not _in_any(w, negatives)]
        negatives += [q.format(k=w) for w in words[:DEFINED_KEYWORDS] for q in DEFINITIONAL]
        fitted.append(dataclasses.replace(tool, generated=Generated(
            tuple(examples), tuple(negatives), tuple(words), model=model, prompt=PROMPT_VERSION)))
    return Registry(fitted)


def _own_examples(examples: list[str], own: int, heads: np.ndarray, encoder) -> list[str]:
    """Drop examples that embed closer to another card's head than to their own."""
    if not examples:
        return list(examples)
    sims = encoder.encode_cards(examples) @ heads.T
    others = np.delete(sims, own, axis=1).max(axis=1)
    return [e for e, s, o in zip(examples, sims[:, own], others) if o <= s + OTHER_CARD_MARGIN]


def _true_negatives(negatives: list[str], examples: list[str], encoder) -> list[str]:
    """Drop negatives that sit among the examples: nearer their centre than the typical example is."""
    if not negatives or len(examples) < 3:
        return list(negatives)
    ex = encoder.encode_cards(examples)
    centre = ex.mean(axis=0)
    centre /= np.linalg.norm(centre) or 1.0
    typical = float(np.median(ex @ centre))
    neg = encoder.encode_cards(negatives) @ centre
    return [n for n, s in zip(negatives, neg) if s < typical]


def _in_any(word: str, texts: list[str]) -> bool:
    pattern = regex.compile(rf"\b{regex.escape(word)}\b", regex.IGNORECASE)
    return any(pattern.search(t) for t in texts)
