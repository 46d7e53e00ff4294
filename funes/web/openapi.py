"""The OpenAPI 3.1 document of Funes' HTTP API, served at /openapi.json (the fuzz test walks every path in it)."""
from __future__ import annotations

from typing import Any

from funes.messages import MAX_SHORTLIST_K, MODES, SHORTLIST_K

ERROR = {"type": "object", "required": ["error", "status"],
         "properties": {"error": {"type": "string"}, "status": {"type": "integer"}}}
MESSAGE = {"type": "object", "required": ["role", "content"],
           "properties": {"role": {"enum": ["user", "assistant", "system", "tool"]}, "content": {"anyOf": [
               {"type": "string"}, {"type": "null"}, {"type": "array", "items": {"type": "object"}}]}}}
CARD = {"type": "object", "required": ["name", "description"],
        "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                       "parameters": {"type": "object"}, "examples": {"type": "array", "items": {"type": "string"}},
                       "negatives": {"type": "array", "items": {"type": "string"}},
                       "keywords": {"type": "array", "items": {"type": "string"}},
                       "threshold": {"type": "number"}, "id": {"type": ["string", "integer"]}}}
OBJECT = {"type": "object"}


def _json(schema: dict) -> dict:
    return {"content": {"application/json": {"schema": schema}}}


def _op(summary: str, body: dict | None = None, ok: int = 200, params: list | None = None,
        errors: tuple[int, ...] = (400,)) -> dict[str, Any]:
    """One operation: its summary, JSON body, parameters, the success status and the JSON errors it may answer."""
    op: dict[str, Any] = {"summary": summary, "responses": {str(ok): {"description": "OK", **_json(OBJECT)}}}
    op["responses"].update({str(s): {"description": "error", **_json(ERROR)} for s in errors})
    if body is not None:
        op["requestBody"] = {"required": True, **_json(body)}
    if params:
        op["parameters"] = params
    return op


def _query(name: str, schema: dict) -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema}


DECISION_ID = {"name": "decision_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}
CHAT = {"type": "object", "required": ["message"],
        "properties": {"message": {"type": "string", "maxLength": 4000}, "conversation_id": {"type": "string"},
                       "user_id": {"type": "string"}}}
ROUTE = {"type": "object", "required": ["messages"],
         "properties": {"messages": {"type": "array", "items": MESSAGE}, "tools": {"type": "array", "items": CARD},
                        "mode": {"enum": list(MODES), "default": "decide"},
                        "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_SHORTLIST_K,
                                  "default": SHORTLIST_K}}}
PROXIED = {"type": "object", "required": ["messages"], "properties": {
    "model": {"type": "string"}, "messages": {"type": "array", "items": OBJECT}, "stream": {"type": "boolean"},
    "tools": {"type": "array", "items": {"type": "object", "properties": {"type": {"const": "function"},
                                                                        "function": CARD}}}}}

PATHS: dict[str, dict[str, Any]] = {
    "/chat": {"post": _op("One chat turn (header Idempotency-Key optional)", CHAT,
                          errors=(400, 404, 409, 413, 503))},
    "/route": {"post": _op("The routing Decision, no LLM; `tools` routes over the caller's cards; mode `shortlist` "
                           "also offers up to `top_k` tools by confidence", ROUTE,
                           errors=(400, 413))},
    "/tools": {"get": _op("The registry's cards", errors=())},
    "/decisions": {"get": _op("The decision log, newest first", params=[
        _query("limit", {"type": "integer", "minimum": 1, "maximum": 500}), _query("path", {"type": "string"}),
        _query("tool", {"type": "string"}), _query("since", {"type": "string", "format": "date-time"}),
        _query("conversation_id", {"type": "string"})])},
    "/decisions/{decision_id}": {"get": _op("One decision", params=[DECISION_ID], errors=(404,))},
    "/decisions/{decision_id}/label": {"post": _op(
        "What the decision should have selected ([] = no tool)", {"type": "object", "required": ["tools"],
                                                                 "properties": {"tools": {"type": "array"},
                                                                                "by": {"type": "string"}}},
        ok=201, params=[DECISION_ID], errors=(400, 404))},
    "/healthz": {"get": _op("Liveness", errors=())},
    "/readyz": {"get": _op("Readiness of database, disk, encoder and LLM", errors=(503,))},
    "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "text exposition"}}}},
    "/api/chat": {"post": _op("Ollama's chat, the client's tools filtered (proxy)", PROXIED,
                              errors=(400, 413, 502))},
    "/v1/chat/completions": {"post": _op("OpenAI's chat completions, the client's tools filtered (proxy)", PROXIED,
                                         errors=(400, 413, 502))},
    "/v1/models": {"get": _op("The upstream's models (proxy)", errors=(502,))},
}


# With any API key in force, every path but these needs one (401 without, 403 for an operator action).
OPEN_PATHS = ("/healthz", "/readyz")
SECURITY = {"bearer": {"type": "http", "scheme": "bearer"},
            "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            "basic": {"type": "http", "scheme": "basic", "description": "the key as the password (the inspector)"}}


def _secured(path: str, operations: dict[str, Any]) -> dict[str, Any]:
    """Operations with the key requirement and its 401/403 answers, unless the path is open."""
    if path in OPEN_PATHS:
        return {m: {**op, "security": []} for m, op in operations.items()}
    denied = {str(s): {"description": "no or unknown key / not allowed", **_json(ERROR)} for s in (401, 403)}
    return {m: {**op, "responses": {**op["responses"], **denied}} for m, op in operations.items()}


def document() -> dict[str, Any]:
    """The whole OpenAPI document."""
    return {"openapi": "3.1.0", "info": {"title": "Funes", "version": "0.1.0",
                                         "description": "A local-first tool router for LLM assistants. "
                                                        "Open while no API key is in force."},
            "components": {"securitySchemes": SECURITY},
            "security": [{"bearer": []}, {"apiKey": []}, {"basic": []}],
            "paths": {path: _secured(path, ops) for path, ops in PATHS.items()}}
