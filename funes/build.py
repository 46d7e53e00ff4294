"""The one place Funes' parts are built from settings: `create_app`, every CLI command and the benchmarks use it.

Each part is made on first use, so `funes decisions` never loads the encoder and `funes route` never opens
the database; the service touches them all at start. The I/O edges (encoder, LLM backend) can be handed in.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from funes.cards.auto import AutoEnrichment
from funes.cards.curator import Curator
from funes.llm import LLMBackend, backend_from_settings
from funes.metrics import Metrics
from funes.proxy.upstream import Upstream
from funes.selection.encoder import Encoder
from funes.selection.factory import RouterFactory, encoder_from_settings
from funes.selection.router import Router
from funes.service import ChatService
from funes.store.conversations import ConversationStore
from funes.store.db import Database, database_url
from funes.store.decisions import DecisionLog
from funes.store.keys import KeyStore, configured_keys
from funes.store.labels import LabelLog
from funes.tools.context import ToolContext, bind_handlers, pack_metadata
from funes.tools.loaders import load_packs
from funes.tools.registry import Registry
from funes.tools.runner import ToolRunner
from memory.store import MemoryStore
from memory.store import metadata as memory_metadata


class Parts:
    """Funes' parts over one settings object, each built once, on first use."""

    def __init__(self, settings: dict[str, Any], *, encoder: Encoder | None = None, llm: LLMBackend | None = None):
        self.settings = settings
        self._encoder, self._llm = encoder, llm

    @cached_property
    def encoder(self) -> Encoder:
        return self._encoder or encoder_from_settings(self.settings)

    @cached_property
    def enrichment(self) -> AutoEnrichment:
        """Generated texts for bare cards, from DATA_DIR/enriched (written by the service or `cards enrich`)."""
        return AutoEnrichment(self.settings, self.encoder, self.llm.model)

    @cached_property
    def curator(self) -> Curator:
        """Texts added before routing: generated ones always, corrections where the service gives it the labels."""
        return Curator(self.enrichment)

    @cached_property
    def factory(self) -> RouterFactory:
        return RouterFactory(self.settings, self.encoder, curator=self.curator)

    @cached_property
    def registry(self) -> Registry:
        """The configured packs' cards and any extra tools files; `packs` binds the handlers to them."""
        return load_packs(self.settings["PACKS"], self.settings["TOOLS_FILES"])

    @property
    def router(self) -> Router:
        """The configured registry's router, rebuilt when its bare cards are enriched or people label its decisions."""
        return self.factory.current("configured", lambda: self.registry, pin=True)

    @cached_property
    def labels(self) -> LabelLog:
        return LabelLog(self.db)

    @cached_property
    def keys(self) -> KeyStore:
        """API keys: FUNES_API_KEYS and the keys table (`funes keys add`)."""
        return KeyStore(self.db, configured_keys(self.settings["API_KEYS"]))

    @cached_property
    def db(self) -> Database:
        """The database, with the memory and pack tables created where missing."""
        return Database(database_url(self.settings), extra=(memory_metadata, *pack_metadata(self.settings["PACKS"])))

    @cached_property
    def tool_context(self) -> ToolContext:
        return ToolContext(self.db.engine, self.encoder.embed, Path(self.settings["DATA_DIR"]), self.settings)

    @cached_property
    def packs(self) -> dict[str, Any]:
        """Each pack's handlers, bound to its cards in the registry."""
        return bind_handlers(self.registry, self.settings["PACKS"], self.tool_context)

    @cached_property
    def memory(self) -> MemoryStore:
        return MemoryStore(self.db.engine, self.encoder.encode_query, top_k=self.settings["MEMORY_TOP_K"],
                           min_score=self.settings["MEMORY_MIN_SCORE"])

    @cached_property
    def llm(self) -> LLMBackend:
        return self._llm if self._llm is not None else backend_from_settings(self.settings)

    @cached_property
    def log(self) -> DecisionLog:
        return DecisionLog(self.db)

    @cached_property
    def ollama_upstream(self) -> Upstream:
        """The Ollama server the proxy's /api routes forward to."""
        host = self.settings["OLLAMA_HOST"]
        return Upstream(host if "://" in host else f"http://{host}", self.settings["LLM_TIMEOUT"])

    @cached_property
    def openai_upstream(self) -> Upstream:
        """The OpenAI-compatible server the proxy's /v1 routes forward to."""
        return Upstream(self.settings["OPENAI_BASE_URL"], self.settings["LLM_TIMEOUT"])

    @cached_property
    def metrics(self) -> Metrics:
        return Metrics()

    @cached_property
    def service(self) -> ChatService:
        self.packs  # noqa: B018  (handlers bound before the first turn can call a tool)
        runner = ToolRunner(self.settings["TOOL_TIMEOUT"], retries=self.settings["TOOL_RETRIES"])
        return ChatService(router=lambda: self.router, llm=self.llm, runner=runner, memory=self.memory, db=self.db,
                           conversations=ConversationStore(self.db), log=self.log, metrics=self.metrics,
                           settings=self.settings)

    def label(self, decision_id: int, tools: Any, labelled_by: Any) -> dict[str, Any]:
        """Store what a logged decision should have selected, its names checked where this process knows them."""
        decision = self.log.get(decision_id)
        return self.labels.add(decision, tools, labelled_by, self._names_of(decision.get("registry") or ""))

    def _names_of(self, registry_hash: str) -> set[str] | None:
        """The tool names of the registry with that hash: the configured one, or one this process has routed."""
        if registry_hash == self.registry.hash():
            return set(self.registry.names)
        router = self.factory.by_key(registry_hash) if "factory" in self.__dict__ else None  # never built for it
        return set(router.registry.names) if router is not None else None

    def start_service(self) -> None:
        """What only the service does: learn from labels, enrich bare cards in the background, build all now."""
        self.curator.labels = self.labels  # commands route as configured; the service learns from corrections
        # before the first router is built, so its bare cards are queued at once
        self.enrichment.start_background(self.llm, on_done=lambda: self.router)
        self.service  # noqa: B018  (the first request should not pay for building)
        self.router  # noqa: B018

    @property
    def llm_name(self) -> str:
        return getattr(self.llm, "name", type(self.llm).__name__)


def build(settings: dict[str, Any], *, encoder: Encoder | None = None, llm: LLMBackend | None = None) -> Parts:
    """Funes' parts over `settings`; `encoder` and `llm` replace the configured ones."""
    return Parts(settings, encoder=encoder, llm=llm)
