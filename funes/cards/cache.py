"""Enrichment results on disk, one JSON file per (card, model, prompt version): reruns resume, workers share."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path

from funes.cards.prompt import PROMPT_VERSION, card_hash
from funes.tools.registry import Tool

log = logging.getLogger(__name__)
CLAIM_SECONDS = 600  # a claim older than this is a worker that died mid-card


class EnrichmentCache:
    """`{data_dir}/enriched/<key>.json`, where the key hashes what the model read, the model and the prompt."""

    def __init__(self, data_dir: str | Path, model: str):
        self.dir = Path(data_dir) / "enriched"
        self.model = model
        self._known: dict[str, dict] = {}  # results never change once written: keep the ones read

    def key(self, tool: Tool) -> str:
        return hashlib.sha256(f"{card_hash(tool)}\0{self.model}\0{PROMPT_VERSION}".encode()).hexdigest()[:32]

    def get(self, tool: Tool) -> dict | None:
        """The stored texts for `tool`, or None."""
        key = self.key(tool)
        if key in self._known:
            return self._known[key]
        try:
            data = json.loads((self.dir / f"{key}.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):  # a torn file is only a cache miss
            log.warning("ignoring unreadable enrichment %s", key)
            return None
        self._known[key] = data["texts"]
        return data["texts"]

    def put(self, tool: Tool, texts: dict) -> None:
        """Store the texts for `tool` atomically (a reader never sees half a file)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        record = {"card": {"name": tool.name, "hash": card_hash(tool)}, "model": self.model,
                  "prompt": PROMPT_VERSION, "texts": texts}
        fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f, ensure_ascii=False)
        os.replace(tmp, self.dir / f"{self.key(tool)}.json")
        self._known[self.key(tool)] = texts

    def claim(self, tool: Tool) -> bool:
        """Take the card for this process, so two workers do not enrich it twice; False when another has it."""
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"{self.key(tool)}.claim"
        try:
            if time.time() - path.stat().st_mtime > CLAIM_SECONDS:
                path.unlink(missing_ok=True)
        except FileNotFoundError:
            pass
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False

    def release(self, tool: Tool) -> None:
        (self.dir / f"{self.key(tool)}.claim").unlink(missing_ok=True)
