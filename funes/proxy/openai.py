"""OpenAI's chat API on Funes: /v1/chat/completions filtered, /v1/models passed through to FUNES_OPENAI_BASE_URL."""
from __future__ import annotations

from flask import Blueprint, current_app, jsonify
from werkzeug.exceptions import HTTPException

from funes.errors import FunesError
from funes.proxy import gateway
from funes.proxy.upstream import UpstreamDown, decided

bp = Blueprint("openai_proxy", __name__, url_prefix="/v1")


def _upstream():
    return current_app.extensions["funes"].openai_upstream


@bp.post("/chat/completions")
def chat_completions():
    return gateway.chat("openai", _upstream(), "/chat/completions")


@bp.get("/models")
def models():
    return gateway.passthrough(_upstream(), "/models", "openai")


def _error(status: int, message: str, kind: str):
    """OpenAI's error shape, which its SDK turns into the matching exception."""
    return jsonify({"error": {"message": message, "type": kind, "param": None, "code": None}}), status


@bp.errorhandler(FunesError)
def funes_error(e: FunesError):
    body, status = _error(e.status, str(e), "invalid_request_error" if e.status < 500 else "server_error")
    return body, status, getattr(e, "headers", {})  # Busy's Retry-After


@bp.errorhandler(UpstreamDown)
def upstream_down(e: UpstreamDown):
    return decided(_error(502, f"the OpenAI-compatible server behind Funes is unreachable ({e})",
                           "upstream_unavailable"), e)


@bp.errorhandler(HTTPException)
def http_error(e: HTTPException):
    return _error(e.code or 500, e.description or e.name, "invalid_request_error")
