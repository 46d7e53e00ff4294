"""The JSON API: /chat /route /tools /decisions /healthz /readyz /metrics /openapi.json."""
from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from funes.errors import BadRequest, NotFound, RegistryError
from funes.health import readiness
from funes.messages import SHORTLIST_K, check_caller_cards, check_message, check_messages, check_mode, check_top_k
from funes.selection.shortlist import shortlist
from funes.store.decisions import parse_limit, parse_since
from funes.web.auth import acting_user, caller, require_operator, visible_user
from funes.web.jsonio import json_object
from funes.web.openapi import document as openapi_document
from funes.web.stream import relay

bp = Blueprint("api", __name__)


def _funes():
    return current_app.extensions["funes"]


def _body() -> dict[str, Any]:
    if not request.is_json:
        raise BadRequest("the body must be a JSON object (Content-Type: application/json)")
    return json_object(request.get_data())  # its text checked there, as the proxy's is


def _optional_str(data: dict, key: str, max_len: int = 128) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > max_len:
        raise BadRequest(f"'{key}' must be a non-empty string of at most {max_len} characters")
    return value


@bp.post("/chat")
def chat():
    data, settings = _body(), _funes().settings
    message = check_message(data.get("message"), settings["MAX_MESSAGE_CHARS"])
    key = request.headers.get("Idempotency-Key")
    if key is not None and not (0 < len(key) <= 128 and key.isprintable()):
        raise BadRequest("the Idempotency-Key header must be 1 to 128 printable characters")
    stream = data.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("'stream' must be true or false")
    args = (message, _optional_str(data, "conversation_id", 64), acting_user(_optional_str(data, "user_id")), key)
    service, client = _funes().service, request.remote_addr  # the address scopes an anonymous caller's key
    release = service.slots.take()  # refused now, while no thread waits on it, when every turn slot is taken
    if stream:  # server-sent events: the decision first, then tool calls and words as they come
        response = Response(relay(lambda emit: service.chat(*args, emit=emit, client=client)),
                            mimetype="text/event-stream",
                            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        response.call_on_close(release)  # the thread relaying the stream is free again
        return response
    try:
        return jsonify(service.chat(*args, client=client))
    finally:
        release()


@bp.post("/route")
def route():
    """The router's Decision; with mode "shortlist", also the tools a client choosing itself is offered (top_k)."""
    data, funes = _body(), _funes()
    messages = check_messages(data.get("messages"), funes.settings["MAX_ROUTE_MESSAGES"],
                              funes.settings["MAX_MESSAGE_CHARS"])
    mode, top_k = check_mode(data.get("mode", "decide")), check_top_k(data.get("top_k", SHORTLIST_K))
    router = _router_for(data.get("tools"))
    t0 = time.perf_counter()
    decision = router.select(messages)
    listed = shortlist(decision, top_k, funes.settings) if mode == "shortlist" else None
    funes.metrics.routed("route", decision.decided_by, time.perf_counter() - t0, path="route")
    decision_id = funes.log.record(decision, endpoint="route", path="route", user_id=caller().user,
                                   tools_offered=list(listed.tools if listed else decision.selected))
    extra = {"mode": mode, **({"shortlist": listed.to_dict()} if listed else {})}
    return jsonify({**decision.to_dict(), **extra, "decision_id": decision_id})


def _router_for(tools: Any):
    """The app's router, or one over the caller's own cards (cached by their content)."""
    funes = _funes()
    if tools is None:
        return funes.router
    check_caller_cards(tools, funes.settings)
    try:  # a new set takes seconds to embed, and others wait for it: in a turn slot, so /healthz keeps a thread
        with funes.service.slots.hold():
            return funes.factory.router_for_cards(tools)
    except RegistryError as e:
        raise BadRequest(str(e)) from None


@bp.get("/tools")
def tools():
    """Every routed tool with where it came from, whether it runs here and its card's state; enrichment's progress."""
    funes = _funes()
    routed = list(funes.router.tools)
    states = funes.enrichment.card_states(routed)
    rows = [{**t.to_dict(), "source": t.source, "runnable": t.runnable,
             **({} if t.runnable else {"not_runnable": t.no_runner()}), "card": state, "reason": reason}
            for t, (state, reason) in zip(routed, states)]
    return jsonify({"tools": rows, "enrichment": funes.enrichment.summary(routed, states)})


@bp.get("/decisions")
def decisions():
    rows = _funes().log.query(limit=parse_limit(request.args.get("limit")), path=request.args.get("path") or None,
                              tool=request.args.get("tool") or None, since=parse_since(request.args.get("since")),
                              conversation_id=request.args.get("conversation_id") or None, user_id=visible_user())
    return jsonify({"decisions": rows})


def visible_decision(decision_id: int) -> dict[str, Any]:
    """A logged decision this caller may read: an operator any, a user only their own (else 404)."""
    row, user = _funes().log.get(decision_id), visible_user()
    if user is not None and row["user_id"] != user:
        raise NotFound(f"no decision {decision_id}")
    return row


@bp.get("/decisions/<int:decision_id>")
def decision(decision_id: int):
    return jsonify(visible_decision(decision_id))


@bp.post("/decisions/<int:decision_id>/label")
def label(decision_id: int):
    """What the decision should have selected ({"tools": [...]}, [] = no tool); routing learns from it."""
    require_operator("labelling a decision")
    data = _body()
    by = caller().user or _optional_str(data, "by") or "operator"  # a key's user is who labelled, whatever 'by' says
    return jsonify(_funes().label(decision_id, data.get("tools"), by)), 201


@bp.get("/healthz")
def healthz():
    """Liveness: 200 while this process answers, whatever its parts (a database outage is /readyz's to report)."""
    funes = _funes()
    return jsonify({"status": "ok", "tools": len(funes.router.tools), "llm": funes.llm_name,
                    "classifier": funes.router.classifier is not None})


@bp.get("/readyz")
def readyz():
    """200 when a turn can be served now, else 503; either way each part's state."""
    state = readiness(_funes())
    return jsonify({"status": "ready" if state["ready"] else "not ready", **state}), 200 if state["ready"] else 503


@bp.get("/openapi.json")
def openapi():
    return jsonify(openapi_document())


@bp.get("/metrics")
def metrics():
    require_operator("reading /metrics")  # counts over every user
    return Response(_funes().metrics.render(), content_type=_funes().metrics.content_type)
