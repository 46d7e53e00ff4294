"""How much routing learns from corrections: label part of the cases through the HTTP API, score the rest."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from funes.eval.scoring import Case, Tally, stratified_split
from funes.selection import factory as factory_module


def learn_from_labels(client, cases: list[Case], cards: list[dict], share: float = 0.5, seed: int = 0,
                      progress: Callable[[Iterable], Iterable] = iter) -> dict:
    """Score the held-out cases before and after labelling the others (POST /route, POST /decisions/<id>/label)."""
    labelled, scored = stratified_split(cases, lambda c: bool(c.expected), share, seed)
    kind = _settled(client, scored[0], cards)["cards"]
    before = _score(client, scored, cards, progress)
    for case in progress(labelled):
        decision = _route(client, case, cards)
        response = client.post(f"/decisions/{decision['decision_id']}/label", json={"tools": sorted(case.expected)})
        if response.status_code != 201:
            raise RuntimeError(f"labelling {case.id}: HTTP {response.status_code} {response.get_data(as_text=True)}")
    time.sleep(factory_module.RECHECK_S)  # the service looks for new labels at most this often
    _settled(client, scored[0], cards)
    return {"labelled": len(labelled), "scored": len(scored), "cards": kind, "before": before,
            "after": _score(client, scored, cards, progress)}


def _settled(client, case: Case, cards: list[dict]) -> dict:
    """Route once, so the service notices new cards or labels, then wait for its classifier to retrain."""
    _route(client, case, cards)
    if not client.application.extensions["funes"].factory.wait_trained(600):
        raise RuntimeError("the service's classifier did not finish training in 10 minutes")
    return _route(client, case, cards)


def _route(client, case: Case, cards: list[dict]) -> dict:
    response = client.post("/route", json={"messages": case.messages, "tools": cards})
    if response.status_code != 200:
        raise RuntimeError(f"routing {case.id}: HTTP {response.status_code} {response.get_data(as_text=True)}")
    return response.get_json()


def _score(client, cases: list[Case], cards: list[dict], progress) -> dict:
    tally = Tally()
    for case in progress(cases):
        d = _route(client, case, cards)
        tally.add(case, set(d["selected"]), list(dict.fromkeys(d["selected"] + [c["name"] for c in d["candidates"]])),
                  d["timings_ms"]["total"])
    return tally.report()
