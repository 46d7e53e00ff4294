"""Cards users bring, made routable: examples, negatives and keywords generated from the card alone.

`enrich(registry, llm, encoder, data_dir)` is the library call behind `python -m funes cards enrich`.
"""
from __future__ import annotations

from collections.abc import Callable

from funes.cards.cache import DEFAULT_SAMPLING, EnrichmentCache
from funes.cards.enrich import Enricher, EnrichmentError
from funes.cards.filters import fit
from funes.store.enrichment import EnrichmentStore
from funes.tools.registry import Registry, Tool

__all__ = ["Enricher", "EnrichmentCache", "EnrichmentError", "enrich", "fit"]


def enrich(registry: Registry, llm, encoder, data_dir: str,
           progress: Callable[[Tool, dict | Exception, bool], None] = lambda *a: None,
           seed: int = DEFAULT_SAMPLING[0], temperature: float = DEFAULT_SAMPLING[1],
           store: EnrichmentStore | None = None) -> Registry:
    """`registry` with generated texts on every card the model answered for, kept in `store` (by default the data
    directory's SQLite database) by card, model, prompt, seed and temperature."""
    cache = EnrichmentCache(data_dir, llm.model, seed, temperature, store=store)
    raw = Enricher(llm, cache).run(registry, progress)
    return fit(registry, raw, encoder, llm.model)
