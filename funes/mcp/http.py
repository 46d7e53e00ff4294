"""MCP's streamable-HTTP transport at /mcp, in its stateless JSON-response mode, as a Flask blueprint.

POST a JSON-RPC request and get its response as `application/json`; a notification or a response is accepted
with 202 and no body; GET (a server-sent event stream) and DELETE (ending a session) are 405: this server keeps
no sessions and sends nothing unasked. Messages are checked and written with the SDK's pydantic types.
API keys are honoured as on every endpoint (funes.web.auth runs first). A browser page from anywhere but the
loopback host is refused, against DNS rebinding.
"""
from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import mcp_types as types
from flask import Blueprint, Response, current_app, request
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import BaseModel, ValidationError

from funes.errors import BadRequest, Forbidden
from funes.mcp.server import INSTRUCTIONS
from funes.version import version
from funes.web.auth import caller

bp = Blueprint("mcp", __name__)
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


class RpcError(Exception):
    """A JSON-RPC error to answer with."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


@bp.post("/mcp")
def endpoint():
    _check_origin()
    try:
        payload = json.loads(request.get_data())
    except (ValueError, UnicodeDecodeError):
        return _reply(types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(
            code=types.PARSE_ERROR, message="the body is not JSON")), 400)
    if isinstance(payload, list):
        return _reply(_error(None, types.INVALID_REQUEST, "JSON-RPC batches are not supported: send one message"),
                      400)
    if isinstance(payload, dict) and payload.get("params") is not None and not isinstance(payload["params"], dict):
        request_id = payload.get("id")  # a request, well formed but for its params: MCP's params are objects
        return _reply(_error(request_id if isinstance(request_id, (int, str)) else None, types.INVALID_PARAMS,
                             f"params of {payload.get('method', 'a request')} must be a JSON object"))
    if isinstance(payload, dict) and "id" in payload and not _is_id(payload["id"]):  # else read as a notification
        return _reply(_error(None, types.INVALID_REQUEST, "a request's id must be a string or an integer"), 400)
    try:
        message = types.jsonrpc_message_adapter.validate_python(payload)
    except ValidationError:
        request_id = payload.get("id") if isinstance(payload, dict) else None
        return _reply(_error(request_id if isinstance(request_id, (int, str)) else None, types.INVALID_REQUEST,
                             "not a JSON-RPC 2.0 message"), 400)
    if not isinstance(message, types.JSONRPCRequest):  # notifications/initialized, cancellations, responses
        accepted = Response(status=202)
        del accepted.headers["Content-Type"]  # no body, so no type
        return accepted
    return _reply(answer(message))


def _is_id(value: object) -> bool:
    """A JSON-RPC id MCP accepts: a string or an integer, never null or a bool."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


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


def _check_origin() -> None:
    """A browser's request must come from a loopback page: another site could reach Funes through the browser."""
    origin = request.headers.get("Origin")
    if origin and (urlsplit(origin).hostname or "") not in LOOPBACK:
        raise Forbidden(f"requests from pages at {origin} are not accepted on /mcp")


def _error(request_id: Any, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def _reply(message: BaseModel, status: int = 200) -> Response:
    data = _dump(message)
    if isinstance(message, types.JSONRPCError):
        data = {"jsonrpc": "2.0", "id": message.id, "error": data["error"]}  # "id": null stays, as JSON-RPC wants
    return Response(json.dumps(data, ensure_ascii=False), status=status, mimetype="application/json")
