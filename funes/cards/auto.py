"""Bare registries routed with their generated texts where the cache has them, the rest enriched in the background."""
from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

from funes.cards.cache import EnrichmentCache
from funes.cards.enrich import Enricher, EnrichmentError
from funes.cards.filters import fit
from funes.errors import LLMUnavailable
from funes.tools.registry import Registry, Tool

log = logging.getLogger(__name__)
MODES = ("auto", "off")
LLM_PAUSE_S = 60  # after the LLM failed to answer, before the next card


class AutoEnrichment:
    """`apply(registry)`: the enriched registry once every bare card has generated texts, else the registry as is."""

    def __init__(self, settings: dict[str, Any], encoder, model: str):
        if settings["ENRICH"] not in MODES:
            raise ValueError(f"ENRICH must be one of {', '.join(MODES)}, not {settings['ENRICH']!r}")
        self.on = settings["ENRICH"] == "auto"
        self.encoder, self.model = encoder, model
        self.cache = EnrichmentCache(settings["DATA_DIR"], model, settings["ENRICH_SEED"],
                                     settings["ENRICH_TEMPERATURE"])
        self.background: Background | None = None

    def ready(self, registry: Registry) -> bool:
        """Every bare card was enriched or failed (or enrichment is off); missing ones go to the background."""
        if not self.on:
            return True
        missing = [t for t in registry if t.bare and self.cache.get(t) is None]
        if missing and self.background:
            self.background.submit(missing)
        return not missing

    def apply(self, registry: Registry) -> Registry:
        """Generated texts on every bare card when all are cached, else the registry as it is."""
        bare = [t for t in registry if t.bare]
        if not self.on or not bare or not self.ready(registry):
            return registry  # half-enriched cards would skew the classifier: route bare until all are ready
        cached = {t.key: self.cache.get(t) for t in bare}
        # a card the model failed on stays bare, as `cards enrich` leaves it
        raw = {key: texts for key, texts in cached.items() if texts is not None and "error" not in texts}
        return fit(registry, raw, self.encoder, self.model)

    def start_background(self, llm, on_done=lambda: None) -> None:
        """Enrich missing cards in a daemon thread of this process (the service's)."""
        if self.on and self.background is None:
            self.background = Background(Enricher(llm, self.cache), on_done)


class Background:
    """One thread writing generated texts for queued cards, each card once across workers (claim files)."""

    def __init__(self, enricher: Enricher, on_done):
        self.enricher, self.on_done = enricher, on_done
        self._queue: queue.Queue[Tool] = queue.Queue()
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._work, name="funes-enrich", daemon=True).start()

    def submit(self, tools: list[Tool]) -> None:
        with self._lock:
            for tool in tools:
                key = self.enricher.cache.key(tool)
                if key not in self._pending:
                    self._pending.add(key)
                    self._queue.put(tool)

    def _work(self) -> None:
        while True:
            tool = self._queue.get()
            try:
                self._one(tool)
            except Exception:  # a bug or a full disk: log it, keep the thread for the next card
                log.exception("background enrichment of %s failed", tool.name)
            finally:
                with self._lock:
                    self._pending.discard(self.enricher.cache.key(tool))
            if self._queue.empty():
                try:
                    self.on_done()
                except Exception:
                    log.exception("rebuilding the router after enrichment failed")

    def _one(self, tool: Tool) -> None:
        cache = self.enricher.cache
        if cache.get(tool) is not None or not cache.claim(tool):
            return
        try:
            if cache.get(tool) is not None:  # another worker wrote it while this one waited for the claim
                return
            self.enricher.raw(tool)
        except EnrichmentError as e:
            log.warning("background enrichment of %s failed: %s", tool.name, e)
        except LLMUnavailable as e:
            log.warning("background enrichment paused for %d s: %s", LLM_PAUSE_S, e)
            time.sleep(LLM_PAUSE_S)
        finally:
            cache.release(tool)
