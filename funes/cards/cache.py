"""Enrichment results on disk, one JSON file per (card, model, prompt version): reruns resume, workers share."""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path

from cachetools import LRUCache

from funes.cards.prompt import PROMPT_VERSION, card_hash
from funes.tools.registry import Tool

log = logging.getLogger(__name__)
KNOWN = 4096  # results kept in memory (a few KB each)
DEFAULT_SAMPLING = (7, 0.8)  # (seed, temperature) of the first results cached: their keys leave it out


class EnrichmentCache:
    """`{data_dir}/enriched/<key>.json`, where the key hashes what the model read, the model, the prompt and the
    sampling (seed, temperature) its texts are written with."""

    def __init__(self, data_dir: str | Path, model: str, seed: int = DEFAULT_SAMPLING[0],
                 temperature: float = DEFAULT_SAMPLING[1]):
        self.dir = Path(data_dir) / "enriched"
        self.model, self.seed, self.temperature = model, int(seed), float(temperature)
        sampling = (self.seed, self.temperature)
        self._sampling = "" if sampling == DEFAULT_SAMPLING else f"\0{sampling}"
        self._known: LRUCache = LRUCache(KNOWN)  # results never change once written: keep the ones read
        self._lock = threading.Lock()
        self._claims: dict[str, int] = {}  # card key -> the descriptor holding its lock

    def key(self, tool: Tool) -> str:
        what = f"{card_hash(tool)}\0{self.model}\0{PROMPT_VERSION}{self._sampling}"
        return hashlib.sha256(what.encode()).hexdigest()[:32]

    def get(self, tool: Tool) -> dict | None:
        """The stored texts for `tool`, or None."""
        key = self.key(tool)
        with self._lock:  # an LRU cache reorders itself on reads; the background thread reads too
            known = self._known.get(key)
        if known is not None:
            return known
        try:
            texts = json.loads((self.dir / f"{key}.json").read_text(encoding="utf-8"))["texts"]
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):  # a torn or foreign file is only a cache miss
            log.warning("ignoring unreadable enrichment %s", key)
            return None
        with self._lock:
            self._known[key] = texts
        return texts

    def put(self, tool: Tool, texts: dict) -> None:
        """Store the texts for `tool` atomically (a reader never sees half a file)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        record = {"card": {"name": tool.name, "hash": card_hash(tool)}, "model": self.model,
                  "prompt": PROMPT_VERSION, "seed": self.seed, "temperature": self.temperature, "texts": texts}
        fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f, ensure_ascii=False)
        os.replace(tmp, self.dir / f"{self.key(tool)}.json")
        with self._lock:
            self._known[self.key(tool)] = texts

    def claim(self, tool: Tool) -> bool:
        """Take the card for this process, so two workers do not enrich it twice; False when another has it."""
        self.dir.mkdir(parents=True, exist_ok=True)
        # A lock, not a marker file: the kernel drops it when its holder dies, so no claim goes stale.
        # The lock files stay (one empty file per card): unlinking one would let two holders in.
        fd = os.open(self.dir / f"{self.key(tool)}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._claims[self.key(tool)] = fd
        return True

    def release(self, tool: Tool) -> None:
        fd = self._claims.pop(self.key(tool), None)
        if fd is not None:
            os.close(fd)  # closing the descriptor releases its lock
