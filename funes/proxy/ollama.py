"""Ollama's API on Funes: /api/chat filtered, the rest of /api passed through to FUNES_OLLAMA_HOST."""
from __future__ import annotations

from flask import Blueprint, current_app, jsonify
from werkzeug.exceptions import HTTPException

from funes.errors import FunesError
from funes.proxy import gateway
from funes.proxy.upstream import UpstreamDown, decided

bp = Blueprint("ollama_proxy", __name__, url_prefix="/api")
PASSED = {"generate": ["POST"], "tags": ["GET"], "show": ["POST"], "version": ["GET"], "ps": ["GET"],
          "embed": ["POST"]}


def _upstream():
    return current_app.extensions["funes"].ollama_upstream


@bp.post("/chat")
def chat():
    return gateway.chat("ollama", _upstream(), "/api/chat")


def _passthrough(name: str):
    def view():
        return gateway.passthrough(_upstream(), f"/api/{name}", "ollama")
    view.__name__ = f"pass_{name}"
    return view


for _name, _methods in PASSED.items():
    bp.add_url_rule(f"/{_name}", view_func=_passthrough(_name), methods=_methods)


def _error(status: int, message: str):
    """Ollama's error shape: {"error": "..."}."""
    return jsonify({"error": message}), status


@bp.errorhandler(FunesError)
def funes_error(e: FunesError):
    body, status = _error(e.status, str(e))
    return body, status, getattr(e, "headers", {})  # Busy's Retry-After


@bp.errorhandler(UpstreamDown)
def upstream_down(e: UpstreamDown):
    return decided(_error(502, f"the Ollama server behind Funes is unreachable ({e})"), e)


@bp.errorhandler(HTTPException)
def http_error(e: HTTPException):
    return _error(e.code or 500, e.description or e.name)
