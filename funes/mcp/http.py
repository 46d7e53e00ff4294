"""MCP's streamable-HTTP transport at /mcp, in its stateless JSON-response mode, as a Flask blueprint.

POST a JSON-RPC request and get its response as `application/json`; a notification or a response is accepted
with 202 and no body; GET (a server-sent event stream) and DELETE (ending a session) are 405: this server keeps
no sessions and sends nothing unasked. Messages are checked and written with the SDK's pydantic types.
API keys and the cross-site check are those of every endpoint (funes.web.auth runs first): a browser page of
another origin, another port of localhost included, is refused unless ALLOWED_ORIGINS lists it.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import mcp_types as types
from flask import Blueprint, Response, current_app, request
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import BaseModel, ValidationError

from funes.errors import BadRequest, Busy
from funes.mcp.server import FIND_TOOLS, INSTRUCTIONS
from funes.version import version
from funes.web.auth import caller
from funes.web.jsonio import check_text

bp = Blueprint("mcp", __name__)
BUSY = -32005  # JSON-RPC's implementation-defined range; the SDK's own codes take -32000, -32001 and -320xx


class RpcError(Exception):
    """A JSON-RPC error to answer with."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@bp.post("/mcp")
def endpoint():
    try:  # nesting and NaN bounded as on every endpoint: a body 3,000 levels deep is a parse error, not a crash
        payload = current_app.json.loads(request.get_data())
    except (ValueError, UnicodeDecodeError) as e:
        return _reply(_error(None, types.PARSE_ERROR, f"the body is not JSON: {e}"), 400)
    if isinstance(payload, list):
        return _reply(_error(None, types.INVALID_REQUEST, "JSON-RPC batches are not supported: send one message"),
                      400)
    request_id = _request_id(payload)
    try:
        check_text(payload)  # a lone surrogate reaches no tool, database or reply (UTF-8 cannot hold it)
    except BadRequest as e:
        return _reply(_error(request_id, types.INVALID_PARAMS, str(e)), 400)
    if isinstance(payload, dict) and payload.get("params") is not None and not isinstance(payload["params"], dict):
        # a request, well formed but for its params: MCP's params are objects
        return _reply(_error(request_id, types.INVALID_PARAMS,
                             f"params of {payload.get('method', 'a request')} must be a JSON object"))
    if isinstance(payload, dict) and "id" in payload and request_id is None:  # else read as a notification
        return _reply(_error(None, types.INVALID_REQUEST, "a request's id must be a string or an integer"), 400)
    try:
        message = types.jsonrpc_message_adapter.validate_python(payload)
    except ValidationError:
        return _reply(_error(request_id, types.INVALID_REQUEST, "not a JSON-RPC 2.0 message"), 400)
    if not isinstance(message, types.JSONRPCRequest):  # notifications/initialized, cancellations, responses
        accepted = Response(status=202)
        del accepted.headers["Content-Type"]  # no body, so no type
        return accepted
    return _answered(message)


def _answered(message: types.JSONRPCRequest) -> Response:
    """The reply to a request, in a turn slot where it runs a tool; refused at once when none is free."""
    try:
        release = _turn_slot(message)
    except Busy as e:  # in MCP's terms, with HTTP's Retry-After: the client's retry comes back when a slot is free
        busy = _reply(_error(message.id, BUSY, str(e)), 503)
        busy.headers.update(e.headers)
        return busy
    try:
        return _reply(answer(message))
    finally:
        release()


def _turn_slot(message: types.JSONRPCRequest) -> Callable[[], None]:
    """A turn slot (MAX_CONCURRENT_TURNS, shared with /chat and the proxy) for a call that runs a tool, which may
    hang until TOOL_TIMEOUT: hung tools then hold at most the slots, never the thread /healthz needs. Busy when
    none is free. find_tools routes, as /route does, and takes none."""
    if message.method != "tools/call" or (message.params or {}).get("name") == FIND_TOOLS:
        return lambda: None
    return current_app.extensions["funes"].service.slots.take()


def _request_id(payload: Any) -> int | str | None:
    """The id a reply can echo: a string or an integer, never null, a bool or text UTF-8 cannot hold."""
    value = payload.get("id") if isinstance(payload, dict) else None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@bp.route("/mcp", methods=["GET", "DELETE"])
def no_stream():
    response = Response(json.dumps({"error": "this MCP server is stateless: POST JSON-RPC messages to /mcp",
                                    "status": 405}), status=405, mimetype="application/json")
    response.headers["Allow"] = "POST"
    return response


def answer(message: types.JSONRPCRequest) -> types.JSONRPCResponse | types.JSONRPCError:
    """The response to one request: its result, or the JSON-RPC error saying what was wrong."""
    try:
        result = _dispatch(message.method, message.params or {})
    except RpcError as e:
        return _error(message.id, e.code, e.message)
    except ValidationError as e:
        return _error(message.id, types.INVALID_PARAMS, f"invalid params for {message.method}: "
                      f"{e.errors()[0]['msg'] if e.errors() else e}")
    except BadRequest as e:
        return _error(message.id, types.INVALID_PARAMS, str(e))
    return types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result=_dump(result))


def _dispatch(method: str, params: dict[str, Any]) -> BaseModel:
    tools = current_app.extensions["funes"].mcp_server
    if method == "initialize":
        asked = types.InitializeRequestParams.model_validate(params).protocol_version
        return types.InitializeResult(
            protocol_version=asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION,
            capabilities=types.ServerCapabilities(tools=types.ToolsCapability(list_changed=False)),
            server_info=types.Implementation(name="funes", version=version()), instructions=INSTRUCTIONS)
    if method == "ping":
        return types.EmptyResult()
    if method == "tools/list":
        return tools.list_tools()
    if method == "tools/call":
        call = types.CallToolRequestParams.model_validate(params)
        return tools.call(call.name, call.arguments, caller().user)
    raise RpcError(types.METHOD_NOT_FOUND, f"method not found: {method}")


def _error(request_id: Any, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def _reply(message: BaseModel, status: int = 200) -> Response:
    data = _dump(message)
    if isinstance(message, types.JSONRPCError):
        data = {"jsonrpc": "2.0", "id": message.id, "error": data["error"]}  # "id": null stays, as JSON-RPC wants
    return Response(json.dumps(data, ensure_ascii=False), status=status, mimetype="application/json")
