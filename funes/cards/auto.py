"""Bare registries routed with their generated texts once every bare card has them, the rest enriched in the background.

ENRICH: auto = enrich in the background only when the LLM runs on this machine; on = with any LLM; off = never
(and route bare). Results written by `cards enrich` or by another worker are used under auto and on alike.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

from funes.cards.background import Background
from funes.cards.cache import EnrichmentCache
from funes.cards.enrich import Enricher
from funes.cards.filters import fit
from funes.llm.base import is_local
from funes.llm.gate import TurnGate
from funes.store.enrichment import EnrichmentStore, Job
from funes.tools.registry import LABELS, Registry, Tool

log = logging.getLogger(__name__)
MODES = ("auto", "on", "off")
LEASE_MARGIN_S = 60  # a claim outlives the LLM's own timeout by this much, so a live holder never loses it
CARD_STATES = ("written", "bare", "queued", "enriching", "enriched", "failed", "waiting")
REMOTE = "waiting: the LLM is remote; set FUNES_ENRICH=on or run `funes cards enrich`"


class AutoEnrichment:
    """`apply(registry)`: the enriched registry once every bare card is enriched or failed, else the registry as is."""

    def __init__(self, settings: dict[str, Any], encoder, llm,
                 store: EnrichmentStore | Callable[[], EnrichmentStore] | None = None):
        if settings["ENRICH"] not in MODES:
            raise ValueError(f"ENRICH must be one of {', '.join(MODES)}, not {settings['ENRICH']!r}")
        self.mode, self.encoder, self.llm, self.model = settings["ENRICH"], encoder, llm, llm.model
        self.local = is_local(llm)
        self.on = self.mode == "on" or (self.mode == "auto" and self.local)  # this process may ask the LLM
        self.cache = EnrichmentCache(settings["DATA_DIR"], self.model, settings["ENRICH_SEED"],
                                     settings["ENRICH_TEMPERATURE"], store=store)
        self.enricher = Enricher(llm, self.cache, retry_s=settings["ENRICH_RETRY_S"],
                                 retry_max_s=settings["ENRICH_RETRY_MAX_S"],
                                 lease_s=settings["LLM_TIMEOUT"] + LEASE_MARGIN_S)
        self.background: Background | None = None
        self._told_remote = False

    def _jobs(self, registry: Registry) -> tuple[list[Tool], dict[str, Job]]:
        """The bare cards and their rows; missing or unfinished ones are submitted to the background."""
        bare = [t for t in registry if t.bare] if self.mode != "off" else []
        jobs = self.cache.jobs(bare) if bare else {}
        missing = [t for t in bare if _unsettled(jobs.get(self.cache.key(t)))]
        if missing and self.background is not None:
            self.background.submit(missing)
        elif missing and self.mode == "auto" and not self.local and not self._told_remote:
            self._told_remote = True
            log.info("%d bare card(s) stay bare: the LLM (%s) is remote; set FUNES_ENRICH=on or run "
                     "`funes cards enrich`", len(missing), self.model)
        return bare, jobs

    def _settled(self, registry: Registry) -> tuple[list[Tool], dict[str, Job]] | None:
        """The bare cards and their rows once every one is enriched or failed (or enrichment is off), else None."""
        bare, jobs = self._jobs(registry)
        return None if any(_unsettled(jobs.get(self.cache.key(t))) for t in bare) else (bare, jobs)

    def ready(self, registry: Registry) -> bool:
        """Every bare card was enriched or failed (or enrichment is off); missing ones go to the background."""
        return self._settled(registry) is not None

    def version(self, registry: Registry) -> Hashable:
        """Changes whenever `apply` would give something new (the curator's state)."""
        settled = self._settled(registry)
        return None if settled is None else frozenset(k for k, job in settled[1].items() if job.state == "done")

    def apply(self, registry: Registry) -> Registry:
        """Generated texts on every bare card when all are settled, else the registry as it is."""
        settled = self._settled(registry)
        if settled is None or not settled[0]:
            return registry  # half-enriched cards would skew the classifier: route bare until all are ready
        bare, jobs = settled
        # a card the model failed on stays bare (it is retried later, and joins when it succeeds)
        raw = {t.key: texts for t in bare if jobs[self.cache.key(t)].state == "done"
               and (texts := self.cache.texts(self.cache.key(t))) is not None}
        log.info("routing %d bare card(s) with generated texts by %s (%d failed, left bare)", len(raw), self.model,
                 len(bare) - len(raw))
        return fit(registry, raw, self.encoder, self.model)

    def start_background(self, gate: TurnGate | None = None, on_done: Callable[[], object] = lambda: None) -> None:
        """Enrich missing cards in a daemon thread of this process (the service's), yielding to `gate`'s turns."""
        if self.on and self.background is None:
            self.background = Background(self.enricher, gate or TurnGate(), on_done)

    def stop(self) -> None:
        """Stop the background thread, giving its card in flight back to the queue."""
        if self.background is not None:
            self.background.stop()

    def card_states(self, tools: list[Tool]) -> list[tuple[str, str]]:
        """(state, reason) of each card: one of CARD_STATES, and why, for people."""
        asked = [t for t in tools if not t.examples] if self.mode != "off" else [t for t in tools if t.generated]
        jobs = self.cache.jobs(asked) if asked else {}
        return [self._state(t, jobs.get(self.cache.key(t))) for t in tools]

    def card_state(self, tool: Tool) -> tuple[str, str]:
        """(state, reason) of one card."""
        return self.card_states([tool])[0]

    def _state(self, tool: Tool, job: Job | None) -> tuple[str, str]:
        if tool.examples:
            return "written", ""
        if job is not None and job.state == "done":
            seconds = (self.cache.texts(job.key) or {}).get("seconds")
            return "enriched", f"by {self.model}" + (f" in {seconds:.0f} s" if seconds is not None else "")
        if tool.generated is not None and tool.generated.model != LABELS:  # labels alone leave a card bare
            return "enriched", f"texts in the card file (by {tool.generated.model or 'a model'})"
        if self.mode == "off":
            return "bare", "enrichment is off (FUNES_ENRICH=off)"
        now = time.time()
        if job is not None and job.state == "running" and job.due_in(now) > 0:
            return "enriching", f"by {job.claimed_by}"
        if job is not None and job.state == "failed":
            return "failed", f"{job.error} (attempt {job.attempts}, retry in {job.due_in(now):.0f} s)"
        if not self.on:
            return "waiting", REMOTE.removeprefix("waiting: ")
        if job is not None and job.error:  # paused: the LLM was unavailable
            return "queued", job.error
        if self.background is not None:
            return "queued", ""
        return "bare", "not enriched yet: the service enriches it, or run `funes cards enrich`"

    def summary(self, tools: list[Tool], states: list[tuple[str, str]]) -> dict[str, Any]:
        """Counts of the cards' states, for /tools: {"done": enriched, "total": cards without written examples},
        and `callers_queued`: cards callers brought (to /route, the proxy) that this process queues before them."""
        counts = Counter(state for state, _ in states if state != "written")
        pending = self.background.pending() if self.background is not None else set()
        callers = len(pending - {self.cache.key(t) for t in tools})
        return {"mode": self.mode, "model": self.model, "local": self.local, "enriching_here": self.on,
                "done": counts["enriched"], "total": sum(counts.values()), **{s: counts[s] for s in CARD_STATES[1:]},
                "callers_queued": callers}


def _unsettled(job: Job | None) -> bool:
    """Whether a card has no outcome yet (no row, queued or running); done and failed are outcomes."""
    return job is None or job.state in ("queued", "running")
