"""Routers for any registry: one encoder per process, the no-tool anchors embedded once, callers' registries cached."""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from cachetools import LRUCache

from funes.selection.encoder import Encoder
from funes.selection.router import Anchors, Router
from funes.tools.loaders import load_cards
from funes.tools.registry import Registry

REQUEST_ROUTERS = 32  # routers over cards callers brought, kept by content: a few registries per client


def encoder_from_settings(settings: dict[str, Any]) -> Encoder:
    """The encoder the settings describe."""
    return Encoder(settings["EMBED_MODEL"], settings["EMBED_BACKEND"], settings["EMBED_THREADS"],
                   settings["DATA_DIR"], settings["EMBED_QUERY_CACHE"], settings["VECTOR_CACHE"],
                   settings["EMBED_QUANTIZE"])


def load_no_tool_examples() -> list[str]:
    """Messages that need no tool, used as the anchor the router must beat."""
    data = json.loads((Path(__file__).parent / "no_tool.json").read_text(encoding="utf-8"))
    return list(data["examples"])


class RouterFactory:
    """Routers for any registry, sharing one encoder and the no-tool anchor vectors."""

    def __init__(self, settings: dict[str, Any], encoder: Encoder | None = None):
        self.settings = settings
        self.encoder = encoder or encoder_from_settings(settings)
        texts = load_no_tool_examples()
        self.anchors = Anchors(texts, self.encoder.encode_cards(texts))
        self._cached: LRUCache = LRUCache(maxsize=REQUEST_ROUTERS)
        self._lock = threading.Lock()

    def router(self, registry: Registry, overrides: dict[str, Any] | None = None) -> Router:
        """A router over `registry`, with optional setting overrides (calibration sweeps)."""
        return Router(registry, self.encoder, {**self.settings, **(overrides or {})}, self.anchors)

    def router_for_cards(self, cards: list[Any]) -> Router:
        """A router over cards a caller brought (RegistryError when one is malformed), cached by their content."""
        key = hashlib.sha256(json.dumps(cards, sort_keys=True).encode()).hexdigest()
        with self._lock:  # an LRU cache reorders itself on reads, so reads lock too
            cached = self._cached.get(key)
        if cached is None:
            cached = self.router(load_cards(cards, "tools"))
            with self._lock:
                self._cached[key] = cached
        return cached
