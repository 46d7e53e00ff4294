"""Funes: a local-first tool router for LLM assistants.

`create_app` wires config, the database, the router, memory, the LLM backend and the blueprints.
The I/O edges (encoder, LLM backend, database URL) can be handed in, so tests swap them.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cachetools import LRUCache
from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

import config as settings_module
from funes.errors import FunesError

log = logging.getLogger(__name__)


@dataclass
class Components:
    """Everything a request handler needs, built once per app."""

    settings: dict[str, Any]
    factory: Any
    router: Any
    db: Any
    log: Any
    memory: Any
    metrics: Any
    service: Any
    llm_name: str
    packs: dict[str, Any] = field(default_factory=dict)
    context: Any = None
    # Routers over cards a /route caller brought, by their content: a few registries per client.
    request_routers: LRUCache = field(default_factory=lambda: LRUCache(maxsize=32))
    request_routers_lock: threading.Lock = field(default_factory=threading.Lock)


def database_url(cfg: dict[str, Any]) -> str:
    """The configured URL, or a SQLite file in the data directory."""
    return cfg["DATABASE_URL"] or f"sqlite:///{Path(cfg['DATA_DIR']).resolve() / 'funes.db'}"


def llm_from_settings(cfg: dict[str, Any]):
    """The LLM backend config names."""
    from funes.llm import backend_from_settings

    kind = cfg["LLM_BACKEND"]
    limit = {"num_predict": cfg["LLM_MAX_TOKENS"]} if kind == "ollama" else {"max_tokens": cfg["LLM_MAX_TOKENS"]}
    common = {"timeout": cfg["LLM_TIMEOUT"], "options": {**limit, **cfg["LLM_OPTIONS"]},
              "name_cutoff": cfg["NAME_FUZZY_CUTOFF"]}
    if kind == "ollama":
        return backend_from_settings(kind, host=cfg["OLLAMA_HOST"], model=cfg["OLLAMA_MODEL"], **common)
    if kind == "openai":
        return backend_from_settings(kind, base_url=cfg["OPENAI_BASE_URL"], model=cfg["OPENAI_MODEL"],
                                     api_key=cfg["OPENAI_API_KEY"] or None, **common)
    return backend_from_settings(kind, data_dir=cfg["DATA_DIR"], threads=cfg["LLM_THREADS"],
                                 ctx_size=cfg["LLM_CTX"], **common)


def build(cfg: dict[str, Any], *, encoder=None, llm=None) -> Components:
    """Build the service's parts from settings; `encoder` and `llm` replace the configured ones."""
    from funes.conversations import ConversationStore
    from funes.db import Database
    from funes.decisions import DecisionLog
    from funes.metrics import Metrics
    from funes.selection.factory import RouterFactory
    from funes.service import ChatService
    from funes.tools.context import ToolContext, bind_handlers, pack_metadata
    from funes.tools.loaders import load_packs
    from funes.tools.runner import ToolRunner
    from memory.store import MemoryStore
    from memory.store import metadata as memory_metadata

    factory = RouterFactory(cfg, encoder)
    db = Database(database_url(cfg), extra=(memory_metadata, *pack_metadata(cfg["PACKS"])))
    registry = load_packs(cfg["PACKS"], cfg["TOOLS_FILES"])
    context = ToolContext(db.engine, factory.encoder.embed, Path(cfg["DATA_DIR"]), cfg)
    packs = bind_handlers(registry, cfg["PACKS"], context)
    router = factory.router(registry)
    memory = MemoryStore(db.engine, factory.encoder.encode_query, top_k=cfg["MEMORY_TOP_K"],
                         min_score=cfg["MEMORY_MIN_SCORE"])
    llm = llm if llm is not None else llm_from_settings(cfg)
    decision_log, metrics = DecisionLog(db), Metrics()
    runner = ToolRunner(cfg["TOOL_TIMEOUT"], retries=cfg["TOOL_RETRIES"])
    service = ChatService(router=router, llm=llm, runner=runner, memory=memory, db=db,
                          conversations=ConversationStore(db), log=decision_log, metrics=metrics, settings=cfg)
    return Components(settings=cfg, factory=factory, router=router, db=db, log=decision_log, memory=memory,
                      metrics=metrics, service=service, llm_name=getattr(llm, "name", type(llm).__name__),
                      packs=packs, context=context)


def _error(status: int, message: str):
    response = jsonify({"error": message, "status": status})
    response.status_code = status
    return response


def create_app(test_config: dict[str, Any] | None = None, *, encoder=None, llm=None) -> Flask:
    """The Flask app: defaults, config file, FUNES_* environment, then `test_config`."""
    app = Flask(__name__)
    cfg = settings_module.load(test_config)
    app.config.update(cfg)
    app.json.sort_keys = False
    app.extensions["funes"] = build(cfg, encoder=encoder, llm=llm)

    from funes import api, inspector

    app.register_blueprint(api.bp)
    app.register_blueprint(inspector.bp)

    @app.errorhandler(FunesError)
    def funes_error(e: FunesError):
        return _error(e.status, str(e))

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException):
        return _error(e.code or 500, e.description or e.name)

    @app.errorhandler(Exception)
    def unexpected(e: Exception):
        log.exception("unhandled error")
        return _error(500, f"internal error: {type(e).__name__}")

    return app
