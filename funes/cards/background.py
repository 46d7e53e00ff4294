"""The service's enrichment thread: queued bare cards enriched one at a time, between chat turns, retried on failure."""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from funes.cards.enrich import LLM_PAUSE_S, Enricher, EnrichmentError
from funes.errors import LLMUnavailable
from funes.llm.gate import Cancel, Cancelled, TurnGate
from funes.tools.registry import Tool

log = logging.getLogger(__name__)
POLL_S = 30.0  # longest sleep while every queued card waits (on another worker, or for its retry)
QUIET_S = 2.0  # a card starts only this long after the last chat turn ended (the next one is often close)


class Background:
    """One daemon thread enriching submitted cards; each card once across workers and hosts (claims in the table)."""

    def __init__(self, enricher: Enricher, gate: TurnGate, on_done: Callable[[], object]):
        self.enricher, self.gate, self.on_done = enricher, gate, on_done
        self._pending: dict[str, Tool] = {}  # key -> card not done yet
        self._batch: set[str] = set()  # keys submitted since the queue was last empty: the n of "(3/7)"
        self._lock = threading.Lock()
        self._wake, self._stop = threading.Event(), threading.Event()
        self._cancel: Cancel | None = None
        self._thread: threading.Thread | None = None

    def submit(self, tools: list[Tool]) -> None:
        """Queue these cards (once each); the thread starts on the first."""
        cache = self.enricher.cache
        with self._lock:
            new = {cache.key(t): t for t in tools if cache.key(t) not in self._pending}
            if not new or self._stop.is_set():
                return
            self._pending.update(new)
            self._batch |= new.keys()
            total = len(self._batch)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="funes-enrich", daemon=True)
                self._thread.start()
        cache.enqueue(new.values())
        log.info("enriching %d bare cards with %s", total, self.enricher.llm.model)
        self._wake.set()

    def stop(self, timeout: float = 3.0) -> None:
        """Cancel the card in flight (given back to the queue for the next start) and end the thread."""
        self._stop.set()
        self._wake.set()
        if self._cancel is not None:
            self._cancel.cancel()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def pending(self) -> set[str]:
        """The keys of the cards queued here and not done yet."""
        with self._lock:
            return set(self._pending)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def _work(self) -> None:
        try:
            if n := self.enricher.cache.store.requeue_orphans():
                log.info("requeued %d card(s) a stopped process was enriching", n)
        except Exception:
            log.exception("requeueing orphaned enrichment jobs failed")
        while self.gate.wait_idle(self._stop, QUIET_S):
            try:
                tool, wait = self._next()
            except Exception as e:  # the database is away: try again later
                log.warning("enrichment could not read its queue: %s: %s", type(e).__name__, str(e).splitlines()[0])
                tool, wait = None, POLL_S
            if tool is None:
                self._wake.wait(wait)
                self._wake.clear()
                continue
            self._one(tool)

    def _next(self) -> tuple[Tool | None, float]:
        """A card this worker claimed, or None and how long to sleep; cards done elsewhere leave the queue."""
        with self._lock:
            pending = dict(self._pending)
        if not pending:  # nothing queued here: no need to ask the database
            return None, POLL_S
        jobs = self.enricher.cache.jobs(pending.values())
        now, wait, settled = time.time(), POLL_S, False
        for key, tool in pending.items():
            job = jobs.get(key)
            if job is not None and job.state == "done":
                self._settle(key)
                settled = True
                continue
            due = job.due_in(now) if job is not None else 0.0
            if due <= 0 and self.enricher.claim(tool):
                return tool, 0.0
            wait = min(wait, max(due, 1.0))
        if settled:
            self._changed()
        return None, wait

    def _one(self, tool: Tool) -> None:
        """Enrich one claimed card, yielding it back when a chat turn starts, pausing when the LLM is down."""
        key = self.enricher.cache.key(tool)
        self._cancel = cancel = Cancel()
        if self._stop.is_set():
            cancel.cancel()
        try:
            with self.gate.background(cancel):
                texts = self.enricher.write(tool, cancel)
        except Cancelled:
            log.info("enrichment of %s %s; requeued", tool.name,
                     "stopped with the process" if self._stop.is_set() else "yielded to a chat turn")
            return
        except EnrichmentError as e:
            log.warning("enrichment of %s failed (attempt %d, retry in %.0f s): %s", tool.name, e.attempts,
                        e.retry_s, e)
            self._changed()
            return
        except LLMUnavailable as e:
            log.warning("enrichment paused for %d s: the LLM is unavailable: %s", LLM_PAUSE_S, e)
            self._stop.wait(LLM_PAUSE_S)
            return
        except Exception:  # a bug or the database: log it, keep the thread for the next card
            log.exception("background enrichment of %s failed", tool.name)
            self._stop.wait(LLM_PAUSE_S)
            return
        finally:
            self._cancel = None
        done, total = self._settle(key)
        log.info("enriched %s (%d/%d) in %.0f s", tool.name, done, total, texts["seconds"])
        self._changed()

    def _settle(self, key: str) -> tuple[int, int]:
        """Take a done card off the queue; (cards of this batch done, batch size)."""
        with self._lock:
            self._pending.pop(key, None)
            done, total = len(self._batch) - len(self._pending.keys() & self._batch), len(self._batch)
            if not self._pending:
                self._batch = set()
        return done, total

    def _changed(self) -> None:
        """Let the router see the new state now rather than at its next look."""
        try:
            self.on_done()
        except Exception:
            log.exception("rebuilding the router after enrichment failed")
