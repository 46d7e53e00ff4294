"""One proxied chat request: route over the client's tools, log the Decision, forward, relay the answer."""
from __future__ import annotations

import json
import time
from typing import Any

from flask import Response, current_app, request

from funes.errors import BadRequest, RegistryError
from funes.messages import check_caller_cards
from funes.proxy import outcome
from funes.proxy.filter import Filtered, apply, cards_of, conversation
from funes.selection.shortlist import shortlist
from funes.proxy.upstream import Upstream, UpstreamDown, read_whole, relay, response_headers
from funes.proxy.upstream import body as answer
from funes.web.auth import caller, forwarded_headers
from funes.web.jsonio import json_object


def chat(endpoint: str, upstream: Upstream, path: str) -> Response:
    """Forward a chat request with only the tools Funes selects (untouched when it carries none).

    It holds a turn slot (MAX_CONCURRENT_TURNS) as a /chat turn does, until its answer is relayed: a hung upstream
    holds a thread as a hung LLM does."""
    release = current_app.extensions["funes"].service.slots.take()  # refused now, while no thread waits on it
    try:
        response = _forward(endpoint, upstream, path)
    except BaseException:
        release()
        raise
    if response.is_streamed:
        response.call_on_close(release)  # the thread relaying the stream is free again
    else:
        release()
    return response


def _forward(endpoint: str, upstream: Upstream, path: str) -> Response:
    raw = request.get_data()
    body = json_object(raw)
    routed = _route(body, endpoint) if body.get("tools") else None
    if routed is None:
        return passthrough(upstream, path, endpoint, raw)
    data = json.dumps(routed.body, ensure_ascii=False).encode()
    try:
        response = upstream.send("POST", path, _headers(endpoint), data)
    except UpstreamDown as e:
        e.decision_id = _record(routed, endpoint, outcome.of_down(str(e)), f"no answer: {e}")
        raise
    if "content-length" in response.headers or response.is_error:  # a whole answer: read, then record it
        try:
            content = answer(response) if "content-length" in response.headers else read_whole(response)
        except UpstreamDown as e:
            e.decision_id = _record(routed, endpoint, outcome.CUT, f"the answer broke off: {e}")
            raise
        decision_id = _record(routed, endpoint, *outcome.of_status(response.status_code,
                                                                   content.decode("utf-8", "replace")))
        return Response(content, status=response.status_code, headers=_headers_out(response, routed, decision_id))
    decision_id = _record(routed, endpoint, outcome.OK, None)
    db = current_app.extensions["funes"].db
    kind, encoding = response.headers.get("content-type", ""), response.headers.get("content-encoding", "")

    def ended(broke: str | None, tail: bytes) -> None:
        if why := broke or outcome.unfinished(kind, encoding, tail):
            outcome.settle(db, decision_id, outcome.CUT, why)
    return Response(relay(response, ended), status=response.status_code,
                    headers=_headers_out(response, routed, decision_id))


def _headers_out(response, routed: Filtered, decision_id: int) -> list[tuple[str, str]]:
    """The upstream's headers, and which decision filtered the tools and how many it kept."""
    return response_headers(response) + [("X-Funes-Decision-Id", str(decision_id)),
                                         ("X-Funes-Tools", f"{routed.offered}->{len(routed.kept)}")]


def passthrough(upstream: Upstream, path: str, endpoint: str, data: bytes | None = None) -> Response:
    """Forward any other request as it came."""
    data = request.get_data() if data is None else data
    response = upstream.send(request.method, path, _headers(endpoint), data)
    return Response(answer(response), status=response.status_code, headers=response_headers(response))


def _headers(endpoint: str) -> dict[str, str]:
    """The client's headers less Funes' own key; an OpenAI server gets the configured key where that was it."""
    headers = forwarded_headers()
    key = current_app.extensions["funes"].settings["OPENAI_API_KEY"]
    if endpoint == "openai" and key and not any(k.lower() == "authorization" for k in headers):
        headers["Authorization"] = f"Bearer {key}"
    return headers


def _route(body: dict[str, Any], endpoint: str) -> Filtered | None:
    """The filtered body and what was decided (recorded once the upstream answered); None when there is no
    user message to route on."""
    funes = current_app.extensions["funes"]
    turns = conversation(body.get("messages"))
    if not turns:
        return None
    settings = funes.settings
    cards = check_caller_cards(cards_of(body["tools"]), settings)
    try:
        router = funes.factory.router_for_cards(cards)  # cached by the tools' content, enriched when cached
    except RegistryError as e:
        raise BadRequest(str(e)) from None
    t0 = time.perf_counter()
    decision = router.select(turns)
    funes.metrics.routed(endpoint, decision.decided_by, time.perf_counter() - t0, path="proxy")
    k = settings["PROXY_SHORTLIST"]  # a client's model that chooses well among a few: offer what routing may mean
    return apply(body, decision, [c["name"] for c in cards], shortlist(decision, k, settings).tools if k else None)


def _record(routed: Filtered, endpoint: str, result: str, error: str | None) -> int:
    """Log the decision with what became of the request upstream; its id."""
    funes = current_app.extensions["funes"]
    return funes.log.record(routed.decision, endpoint=endpoint, path="proxy", outcome=result, error=error,
                            tools_offered=routed.kept, user_id=caller().user)
