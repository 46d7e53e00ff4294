"""Funes: a local-first tool router for LLM assistants.

`create_app` loads the settings, builds every part through `funes.build` and registers the blueprints.
The I/O edges (encoder, LLM backend, database URL) can be handed in, so tests swap them.
"""
from __future__ import annotations

import logging
from typing import Any

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

import config as settings_module
from funes.errors import FunesError

log = logging.getLogger(__name__)


def _error(status: int, message: str):
    response = jsonify({"error": message, "status": status})
    response.status_code = status
    return response


def create_app(test_config: dict[str, Any] | None = None, *, encoder=None, llm=None, text_encoder=None) -> Flask:
    """The Flask app: defaults, config file, FUNES_* environment, then `test_config`."""
    from funes.build import build
    from funes.mcp import http as mcp_http
    from funes.proxy import ollama, openai
    from funes.store.db import OUTAGES, unavailable
    from funes.web import api, auth, inspector
    from funes.web.jsonio import StrictJSON

    app = Flask(__name__)
    app.json = StrictJSON(app)
    app.json.sort_keys = False
    from funes.store.keys import configured_keys

    settings = settings_module.load(test_config)
    configured_keys(settings["API_KEYS"])  # a malformed key stops start-up here, not every request with a 500
    parts = build(settings, encoder=encoder, llm=llm, text_encoder=text_encoder)
    app.config["MAX_CONTENT_LENGTH"] = parts.settings["MAX_BODY_BYTES"]  # larger bodies are a 413
    parts.start_service()
    app.extensions["funes"] = parts
    app.before_request(auth.check_host)  # a Host outside ALLOWED_HOSTS is a 400, before anything else
    app.before_request(auth.before_request)  # who is calling, before any blueprint's view
    app.after_request(auth.cors)  # pages of ALLOWED_ORIGINS may read the answers
    app.register_blueprint(api.bp)
    app.register_blueprint(inspector.bp)
    app.register_blueprint(ollama.bp)  # Funes in front of Ollama and OpenAI clients (funes.proxy)
    app.register_blueprint(openai.bp)
    app.register_blueprint(mcp_http.bp)  # Funes as an MCP server at /mcp (funes.mcp)

    @app.errorhandler(FunesError)
    def funes_error(e: FunesError):
        response = _error(e.status, str(e))
        response.headers.update(getattr(e, "headers", {}))
        return response

    def database_down(e: Exception):  # from code that uses the engine itself, outside Database's blocks
        return funes_error(unavailable(e))

    for outage in OUTAGES:
        app.register_error_handler(outage, database_down)

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException):
        if e.code == 413:  # werkzeug's text names no limit: say which, and how to raise it
            limit = app.config["MAX_CONTENT_LENGTH"]
            return _error(413, f"the request body is over {limit:,} bytes (FUNES_MAX_BODY_BYTES)")
        return _error(e.code or 500, e.description or e.name)

    @app.errorhandler(Exception)
    def unexpected(e: Exception):
        log.exception("unhandled error")
        return _error(500, f"internal error: {type(e).__name__}")

    return app


def __getattr__(name: str):
    """`from funes import tool`: the tool decorator, imported only when asked for."""
    if name == "tool":
        from funes.tools.loaders import tool

        return tool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
