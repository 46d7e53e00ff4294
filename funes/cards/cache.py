"""Enrichment results by card: the database's enrichments table, and the old per-card files read as results.

The key hashes what the model read, the model, the prompt and the sampling, so results never go stale: a
changed card, model, prompt or seed is another key. Done results are also copied to DATA_DIR/enriched, one
JSON file per key; a file there not in the table yet (an older data dir, or another database over this data
dir) is imported as a done row when first seen. A failure recorded in an old file is not a result.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from cachetools import LRUCache

from funes.cards.prompt import PROMPT_VERSION, card_hash
from funes.store.db import Database, database_url
from funes.store.enrichment import EnrichmentStore, Job
from funes.tools.registry import Tool

log = logging.getLogger(__name__)
KNOWN = 4096  # results kept in memory (a few KB each)
DEFAULT_SAMPLING = (7, 0.8)  # (seed, temperature) of the first results cached: their keys leave it out


def data_dir_store(data_dir: str | Path) -> EnrichmentStore:
    """The store of a data directory's own SQLite database (where no database is configured)."""
    return EnrichmentStore(Database(database_url({"DATABASE_URL": "", "DATA_DIR": str(data_dir)})))


class EnrichmentCache:
    """Results and job rows by card for one model and sampling (seed, temperature)."""

    def __init__(self, data_dir: str | Path, model: str, seed: int = DEFAULT_SAMPLING[0],
                 temperature: float = DEFAULT_SAMPLING[1],
                 store: EnrichmentStore | Callable[[], EnrichmentStore] | None = None):
        self.dir = Path(data_dir) / "enriched"
        self.model, self.seed, self.temperature = model, int(seed), float(temperature)
        sampling = (self.seed, self.temperature)
        self._sampling = "" if sampling == DEFAULT_SAMPLING else f"\0{sampling}"
        self._known: LRUCache = LRUCache(KNOWN)  # results never change once written: keep the ones read
        self._lock = threading.Lock()
        self._store = store if store is not None else (lambda: data_dir_store(data_dir))

    @property
    def store(self) -> EnrichmentStore:
        """The table, opened on first use (routing cards with no bare one never opens it)."""
        with self._lock:
            if not isinstance(self._store, EnrichmentStore):
                self._store = self._store()
            return self._store

    def key(self, tool: Tool) -> str:
        what = f"{card_hash(tool)}\0{self.model}\0{PROMPT_VERSION}{self._sampling}"
        return hashlib.sha256(what.encode()).hexdigest()[:32]

    def get(self, tool: Tool) -> dict | None:
        """The texts written for `tool`, or None (never a failure)."""
        key = self.key(tool)
        job = self.jobs([tool]).get(key)
        return self.texts(key) if job is not None and job.state == "done" else None

    def texts(self, key: str) -> dict | None:
        """A done row's texts, from memory when read before."""
        with self._lock:  # an LRU cache reorders itself on reads; the background thread reads too
            known = self._known.get(key)
        if known is None:
            job = self.store.jobs([key], texts=True).get(key)
            known = job.texts if job is not None and job.state == "done" else None
            if known is not None:
                self.remember(key, known)
        return known

    def remember(self, key: str, texts: dict) -> None:
        with self._lock:
            self._known[key] = texts

    def done(self, tool: Tool, texts: dict) -> None:
        """Keep `tool`'s texts: a done row, and a copy in DATA_DIR/enriched, so an app on another database over
        this data directory (a benchmark's throwaway one) reads them too."""
        key = self.key(tool)
        self.store.finish(key, texts)
        self.remember(key, texts)
        record = {"card": {"name": tool.name, "hash": card_hash(tool)}, "model": self.model,
                  "prompt": PROMPT_VERSION, "seed": self.seed, "temperature": self.temperature, "texts": texts}
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f, ensure_ascii=False)
            os.replace(tmp, self.dir / f"{key}.json")  # atomic: a reader never sees half a file
        except OSError as e:  # the row holds the result; the copy is a convenience
            log.warning("could not copy the enrichment of %s to %s: %s", tool.name, self.dir, e)

    def jobs(self, tools: Iterable[Tool]) -> dict[str, Job]:
        """The row of each card that has one, old files' results imported on the way."""
        keyed = {self.key(t): t for t in tools}
        jobs = self.store.jobs(keyed)
        old = {key: texts for key in keyed.keys() - jobs.keys() if (texts := self._old_file(key)) is not None}
        if old:
            for key, texts in old.items():
                self.store.add([(key, keyed[key].name, self.model)], state="done", texts=texts)
            jobs.update(self.store.jobs(old))
        return jobs

    def enqueue(self, tools: Iterable[Tool]) -> None:
        """Rows for cards that have none, queued."""
        self.store.add((self.key(t), t.name, self.model) for t in tools)

    def _old_file(self, key: str) -> dict | None:
        """The texts of `{dir}/<key>.json` from before the table, or None (missing, torn, or a failure)."""
        path = self.dir / f"{key}.json"
        if not path.exists():
            return None
        try:
            texts = json.loads(path.read_text(encoding="utf-8"))["texts"]
        except (OSError, ValueError, KeyError, TypeError):  # a torn or foreign file is only a cache miss
            log.warning("ignoring unreadable enrichment %s", key)
            return None
        if not isinstance(texts, dict) or "error" in texts or not isinstance(texts.get("examples"), list):
            return None  # a failure was written as a result before: it is retried now
        return texts
