"""The one place Funes' parts are built from settings: `create_app`, every CLI command and the benchmarks use it.

Each part is made on first use, so `funes decisions` never loads the encoder and `funes route` never opens
the database; the service touches them all at start. The I/O edges (encoder, LLM backend) can be handed in.
"""
from __future__ import annotations

import threading
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.cards.auto import AutoEnrichment
from funes.cards.curator import Curator
from funes.llm import LLMBackend, backend_from_settings
from funes.metrics import Metrics
from funes.proxy.upstream import Upstream
from funes.selection.encoder import Encoder
from funes.selection.factory import RouterFactory, encoder_from_settings, text_encoder_from_settings
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

if TYPE_CHECKING:
    from funes.mcp.client import ServerPool
    from funes.mcp.server import FunesTools


class Parts:
    """Funes' parts over one settings object, each built once, on first use."""

    def __init__(self, settings: dict[str, Any], *, encoder: Encoder | None = None, llm: LLMBackend | None = None,
                 text_encoder: Encoder | None = None):
        self.settings = settings
        self._encoder, self._llm, self._text_encoder = encoder, llm, text_encoder
        self._registry: tuple[int, Registry] | None = None  # (MCP tools version, registry) read at that version
        self._registry_lock = threading.Lock()
        self._routed: tuple[int, Router] | None = None  # (MCP tools version, router) of the newest router built
        self._rebuilding = threading.Lock()  # one rebuild for a changed MCP tool list at a time

    @cached_property
    def encoder(self) -> Encoder:
        """EMBED_MODEL's encoder: it routes every message (MiniLM tuned for tools by default)."""
        return self._encoder or encoder_from_settings(self.settings)

    @cached_property
    def text_encoder(self) -> Encoder:
        """MiniLM for tool data, memories and sifting generated texts: the routing encoder is tuned to match
        requests with tools, not for general similarity, and the vectors already stored were made by MiniLM."""
        return self._text_encoder or text_encoder_from_settings(self.settings, self.encoder)

    @cached_property
    def enrichment(self) -> AutoEnrichment:
        """Generated texts for bare cards, from the database's enrichments table (written by any worker or host's
        service, or by `cards enrich`); the database is opened only when a bare card is routed."""
        from funes.store.enrichment import EnrichmentStore

        return AutoEnrichment(self.settings, self.text_encoder, self.llm, store=lambda: EnrichmentStore(self.db))

    @cached_property
    def curator(self) -> Curator:
        """Texts added before routing: generated ones always, corrections where the service gives it the labels."""
        return Curator(self.enrichment)

    @cached_property
    def factory(self) -> RouterFactory:
        return RouterFactory(self.settings, self.encoder, curator=self.curator)

    @property
    def registry(self) -> Registry:
        """Every configured source's tools (packs, files, Python modules, plugins, MCP servers); `packs` binds pack
        handlers. Re-read when an MCP server's tool list changes, the bound handlers carried over."""
        return self._versioned()[1]

    def _versioned(self) -> tuple[int, Registry]:
        """The registry with the MCP tools version it was read at (0: no MCP servers configured)."""
        from funes.tools.sources import configured, with_servers

        with self._registry_lock:
            version = self.mcp.version if self.mcp is not None else 0
            if self._registry is None:
                self._registry = (version, configured(self.settings, self.mcp))
            elif self._registry[0] != version:
                self._registry = (version, with_servers(self._registry[1], self.mcp))
            return self._registry

    @cached_property
    def mcp(self) -> ServerPool | None:
        """The MCP servers of MCP_SERVERS, started (start-up waits at most MCP_CONNECT_TIMEOUT); None when unset."""
        import atexit

        from funes.mcp.client import ServerPool
        from funes.mcp.config import load_servers
        from funes.mcp.connection import Timing

        if not self.settings["MCP_SERVERS"]:
            return None
        s = self.settings
        timing = Timing(s["MCP_CONNECT_TIMEOUT"], s["MCP_PING_INTERVAL"], s["MCP_RETRY_S"], s["MCP_RETRY_MAX_S"])
        pool = ServerPool(load_servers(s["MCP_SERVERS"]), timing, s["TOOL_TIMEOUT"])
        atexit.register(pool.stop)  # their processes end with this one's
        return pool.start()

    @property
    def router(self) -> Router:
        """The configured registry's router, rebuilt when its bare cards are enriched or people label its decisions,
        and built anew (under a new key) when an MCP server's tool list changes: one such build at a time, over the
        newest list, while other threads route with the last router."""
        version, registry = self._versioned()
        newest = self._routed
        if newest is not None and newest[0] != version:
            if not self._rebuilding.acquire(blocking=False):
                return newest[1]  # another thread builds the newest list's router
            try:
                version, registry = self._versioned()  # the newest list wins, should it have changed meanwhile
                router = self.factory.current(_router_key(version), lambda: registry, pin=True)
            finally:
                self._rebuilding.release()
        else:
            router = self.factory.current(_router_key(version), lambda: registry, pin=True)
        self._keep_newest(version, router)
        return router

    def _keep_newest(self, version: int, router: Router) -> None:
        """Remember the router of the newest MCP tools version, and unpin any older one: a router kept for each
        list a server ever had would hold its memory for good."""
        with self._registry_lock:
            newest = self._routed
            if newest is None or version >= newest[0]:
                self._routed = (version, router)
                stale = newest[0] if newest is not None and newest[0] != version else None
            else:  # a thread that read an older list re-pinned its router meanwhile
                stale = version
        if stale is not None:
            self.factory.unpin(_router_key(stale))

    @cached_property
    def runner(self) -> ToolRunner:
        """Runs tool calls (timeouts, retries, caches) for chat turns and MCP clients alike."""
        return ToolRunner(self.settings["TOOL_TIMEOUT"], retries=self.settings["TOOL_RETRIES"])

    @cached_property
    def mcp_server(self) -> FunesTools:
        """What Funes offers as an MCP server: find_tools, call_tool and the pinned tools."""
        from funes.mcp.server import FunesTools

        self.packs  # noqa: B018  (the packs' handlers bound: call_tool runs them)
        return FunesTools(self)

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
        return ToolContext(self.db.engine, self.text_encoder.embed, Path(self.settings["DATA_DIR"]), self.settings)

    @cached_property
    def packs(self) -> dict[str, Any]:
        """Each pack's handlers, bound to its cards in the registry."""
        return bind_handlers(self.registry, self.settings["PACKS"], self.tool_context)

    @cached_property
    def memory(self) -> MemoryStore:
        return MemoryStore(self.db.engine, self.text_encoder.encode_query, top_k=self.settings["MEMORY_TOP_K"],
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
        return ChatService(router=lambda: self.router, llm=self.llm, runner=self.runner, memory=self.memory, db=self.db,
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
        import atexit

        self.curator.labels = self.labels  # commands route as configured; the service learns from corrections
        # before the first router is built, so its bare cards are queued at once; chat turns go first
        self.enrichment.start_background(self.service.gate, on_done=lambda: self.router)
        atexit.register(self.enrichment.stop)  # its card in flight goes back to the queue for the next start
        self.router  # noqa: B018  (the first request should not pay for building)
        if self.settings["LLM_BACKEND"] == "embedded" and hasattr(self.llm, "warm_up"):
            # nor for loading the model: llama.cpp starts now, beside the first requests; /readyz waits for it
            self.llm_warming = threading.Thread(target=self._warm_up, name="funes-llm-warm-up", daemon=True)
            self.llm_warming.start()

    def _warm_up(self) -> None:
        """Warm the embedded model; a failure is logged, and met again as an error by the first chat."""
        import logging

        from funes.errors import LLMUnavailable

        from funes import dates
        from funes.tool_loop import dated

        today = dates.today(self.settings["TIME_ZONE"])  # the prompts as a turn today starts them: their prefill cached
        try:
            self.llm.warm_up([dated(self.settings[name], today) for name in ("SYSTEM_PROMPT", "TOOLS_PROMPT")])
        except LLMUnavailable as e:
            logging.getLogger(__name__).warning("LLM warm-up failed: %s", e)

    @property
    def llm_name(self) -> str:
        return getattr(self.llm, "name", type(self.llm).__name__)


def _router_key(version: int) -> str:
    """The factory's key for the configured registry at an MCP tools version (0: no MCP servers)."""
    return "configured" if version == 0 else f"configured@mcp{version}"


def build(settings: dict[str, Any], *, encoder: Encoder | None = None, llm: LLMBackend | None = None,
          text_encoder: Encoder | None = None) -> Parts:
    """Funes' parts over `settings`; `encoder`, `llm` and `text_encoder` replace the configured ones."""
    return Parts(settings, encoder=encoder, llm=llm, text_encoder=text_encoder)
