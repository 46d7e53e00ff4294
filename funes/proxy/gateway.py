"""One proxied chat request: route over the client's tools, log the Decision, forward, relay the answer."""
from __future__ import annotations

import json
import time
from typing import Any

from flask import Response, current_app, request

from funes.errors import BadRequest, RegistryError
from funes.messages import check_cards
from funes.proxy.filter import Filtered, apply, cards_of, conversation
from funes.proxy.upstream import Upstream, response_headers
from funes.proxy.upstream import body as answer
from funes.web.auth import caller, forwarded_headers
from funes.web.jsonio import json_object


def chat(endpoint: str, upstream: Upstream, path: str) -> Response:
    """Forward a chat request with only the tools Funes selects (untouched when it carries none)."""
    raw = request.get_data()
    body = json_object(raw)
    routed = _route(body, endpoint) if body.get("tools") else None
    data = raw if routed is None else json.dumps(routed[0].body, ensure_ascii=False).encode()
    response = upstream.send("POST", path, _headers(endpoint), data)
    headers = response_headers(response)
    if routed is not None:
        filtered, decision_id = routed
        headers += [("X-Funes-Decision-Id", str(decision_id)),
                    ("X-Funes-Tools", f"{filtered.offered}->{len(filtered.kept)}")]
    return Response(answer(response), status=response.status_code, headers=headers)


def passthrough(upstream: Upstream, path: str, endpoint: str) -> Response:
    """Forward any other request as it came."""
    response = upstream.send(request.method, path, _headers(endpoint), request.get_data())
    return Response(answer(response), status=response.status_code, headers=response_headers(response))


def _headers(endpoint: str) -> dict[str, str]:
    """The client's headers less Funes' own key; an OpenAI server gets the configured key where that was it."""
    headers = forwarded_headers()
    key = current_app.extensions["funes"].settings["OPENAI_API_KEY"]
    if endpoint == "openai" and key and not any(k.lower() == "authorization" for k in headers):
        headers["Authorization"] = f"Bearer {key}"
    return headers


def _route(body: dict[str, Any], endpoint: str) -> tuple[Filtered, int] | None:
    """The filtered body and its decision id; None when there is no user message to route on."""
    funes = current_app.extensions["funes"]
    turns = conversation(body.get("messages"))
    if not turns:
        return None
    settings = funes.settings
    cards = check_cards(cards_of(body["tools"]), settings["MAX_REQUEST_TOOLS"], settings["MAX_CARD_CHARS"],
                        settings["MAX_REQUEST_TEXTS"])
    try:
        router = funes.factory.router_for_cards(cards)  # cached by the tools' content, enriched when cached
    except RegistryError as e:
        raise BadRequest(str(e)) from None
    t0 = time.perf_counter()
    decision = router.select(turns)
    funes.metrics.routed(endpoint, decision.decided_by, time.perf_counter() - t0, path="proxy")
    filtered = apply(body, decision, [c["name"] for c in cards])
    decision_id = funes.log.record(decision, endpoint=endpoint, path="proxy", tools_offered=filtered.kept,
                                   user_id=caller().user)
    return filtered, decision_id
