"""Enrichment: a model writes example requests, negatives and keywords for a card from the card alone.

`Enricher.raw` asks the LLM once per card (constrained JSON, fixed seed) and tidies what it got;
the result depends only on the card, the model and the prompt, so `EnrichmentCache` keeps it.
Filtering against the other cards of a registry happens later, in `funes.cards.filters`.
"""
from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterable

import regex

from funes.cards import prompt
from funes.cards.cache import EnrichmentCache
from funes.cards.variants import misspell
from funes.errors import FunesError, LLMUnavailable
from funes.tools.registry import Tool

log = logging.getLogger(__name__)
TYPO_VARIANTS = 4  # misspelt copies of the plainer requests, made by code
_SPACE = regex.compile(r"\s+")


class EnrichmentError(FunesError):
    """The model's answer for a card could not be used."""


def normalized(text: str) -> str:
    """Lower case, single spaces, no end punctuation: what counts as the same text twice."""
    return _SPACE.sub(" ", text).strip().strip(" .!?¿¡").casefold()


class Enricher:
    """Writes texts for cards with an LLM that has `complete_json` (embedded, ollama, openai), sampled as the
    cache says (its seed and temperature are part of its keys)."""

    def __init__(self, llm, cache: EnrichmentCache, *, max_tokens: int = 700):
        self.llm, self.cache = llm, cache
        self.options = {"seed": cache.seed, "temperature": cache.temperature, "top_p": 0.95, "max_tokens": max_tokens}

    def raw(self, tool: Tool) -> dict:
        """The cached texts for `tool`, or the model's, tidied and then cached."""
        cached = self.cache.get(tool)
        if cached is not None and "error" in cached:
            raise EnrichmentError(cached["error"])
        if cached is not None:
            return cached
        started = time.perf_counter()
        answer = self.llm.complete_json(prompt.messages(tool), prompt.schema(), prompt.grammar(), **self.options)
        try:
            texts = tidy(parse(answer, tool.name), tool)
        except EnrichmentError as e:  # the seed is fixed, so asking again gets the same answer: remember the failure
            self.cache.put(tool, {"examples": [], "negatives": [], "keywords": [], "error": str(e)})
            raise
        texts["seconds"] = round(time.perf_counter() - started, 1)
        self.cache.put(tool, texts)
        log.info("enriched %s in %.1f s", tool.name, texts["seconds"])
        return texts

    def run(self, tools: Iterable[Tool], progress: Callable[[Tool, dict | Exception, bool], None] = lambda *a: None,
            ) -> dict[str, dict]:
        """Raw texts for every tool (cached at once); a card the model fails on goes to `progress` and is skipped."""
        # progress(tool, texts or the error, new): new is False for a cache hit
        out = {}
        for tool in tools:
            new = self.cache.get(tool) is None
            try:
                out[tool.key] = result = self.raw(tool)
            except EnrichmentError as e:
                result = e
            except LLMUnavailable:
                raise  # no point trying the next card
            progress(tool, result, new)
        return out


def parse(answer: str, name: str) -> dict[str, list[str]]:
    """Each kind's usable strings from the model's JSON; EnrichmentError naming the card when there are none."""
    # servers that ignore the schema happen: anything off-shape is dropped, not trusted
    try:
        data = json.loads(answer)
    except json.JSONDecodeError as e:
        raise EnrichmentError(f"{name}: the model's answer is not the expected JSON: {e}") from None
    if not isinstance(data, dict):
        raise EnrichmentError(f"{name}: the model's answer is not the expected JSON: not an object")
    texts = {kind: [t.strip() for t in data.get(kind) if isinstance(t, str) and 2 <= len(t.strip()) <= prompt.MAX_CHARS]
             if isinstance(data.get(kind), list) else [] for kind, _, _ in prompt.KINDS}
    if not any(texts[kind] for kind in prompt.EXAMPLE_KINDS):
        raise EnrichmentError(f"{name}: the model's answer holds no example request")
    return texts


def tidy(data: dict, tool: Tool) -> dict:
    """Examples, negatives and keywords: deduplicated, worked-example echoes dropped, misspelt variants added."""
    seen = {normalized(t) for t in prompt.shot_texts()}
    def fresh(texts: Iterable[str]) -> list[str]:
        kept = []
        for text in (_SPACE.sub(" ", t).strip() for t in texts):
            if text and normalized(text) not in seen:
                seen.add(normalized(text))
                kept.append(text)
        return kept
    examples = fresh(t for kind in prompt.EXAMPLE_KINDS for t in data[kind])
    negatives = fresh(data["no_tool"])
    rng = random.Random(prompt.card_hash(tool))
    english = [t for t in examples if t in data["direct"] + data["indirect"] + data["terse"]]
    typos = fresh(misspell(t, rng) for t in english[:: max(1, len(english) // TYPO_VARIANTS)][:TYPO_VARIANTS])
    keywords = sorted({normalized(k) for k in data["keywords"] if regex.fullmatch(r"[\p{L}\p{N}' -]{3,40}", k)})
    return {"examples": examples + typos, "negatives": negatives, "keywords": keywords}
