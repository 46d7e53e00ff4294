"""The decision inspector: recent decisions with filters, and one decision's scores against its thresholds."""
from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, current_app, make_response, redirect, render_template, request, url_for

import config
from funes.errors import BadRequest
from funes.store.decisions import PATHS, parse_limit, parse_since
from funes.tools.registry import Tool
from funes.web.api import visible_decision
from funes.web.auth import caller, require_operator, visible_user

bp = Blueprint("inspector", __name__, url_prefix="/inspector", template_folder="templates",
               static_folder="static")
SIGNAL_ORDER = ("classifier", "card", "embedding", "lexical", "negative", "keyword", "name")
# The rules of funes.selection.policy, each in one line for people (docs/routing.md explains them in full).
RULE_GLOSS = {
    "about_tool": "the message asks how a tool works, not to run it: no tool",
    "closing": "the message only thanks, praises or says goodbye: no tool",
    "name": "the message names a tool to run: that tool",
    "classifier": "the classifier's probability for a tool reached that tool's threshold",
    "similarity": "a tool's similarity to its card reached its threshold and beat the no-tool anchors (no classifier)",
    "gate": "the learned gate judged that the message needs one of the bare cards: the closest one",
    "veto": "the classifier is sure enough that no tool is needed (P(no tool) ≥ NONE_VETO)",
    "history": "the message read with the previous user turn selected a tool",
    "keyword": "a card's keyword pattern matched and its similarity reached KEYWORD_MIN_SCORE",
    "fallback": "the classifier picked nothing but was not sure of none: its best enriched card stands",
    "mixed_veto": "a user's bare pick was dropped: the packs' classifier is sure no tool is needed",
    "none": "no rule fired: nothing reached its threshold, so the answer needs no tool",
}
SETTING_HELP = {s.name: s.help for s in config.SETTINGS}
# The pages use inline styles (bars) and no script, so scripts are refused outright; the chat page and the
# decision page (its label filter) run one script each, their own file from this origin (see _interactive).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


@bp.after_request
def security_headers(response):
    """Every inspector page: no framing, no sniffing, no scripts, no referrer."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def _interactive(html: str, connect: bool = False):
    """A page that runs scripts served from here (with `connect`, fetching from here too) and posts back here."""
    response = make_response(html)
    allowed = "script-src 'self';" + (" connect-src 'self';" if connect else "")
    response.headers["Content-Security-Policy"] = SECURITY_HEADERS["Content-Security-Policy"].replace(
        "default-src 'none';", f"default-src 'none'; {allowed}")
    # Under no-referrer a browser's POST says "Origin: null", which the cross-site check refuses; same-origin
    # sends the origin back here only, so still nothing reaches another site.
    response.headers["Referrer-Policy"] = "same-origin"
    return response


@bp.get("/")
def index():
    args = request.args
    try:
        rows = current_app.extensions["funes"].log.query(
            limit=parse_limit(args.get("limit")), path=args.get("path") or None, tool=args.get("tool") or None,
            since=parse_since(args.get("since")), user_id=visible_user())
    except BadRequest as e:  # a person typed it in the form: the page again, saying what to fix
        return render_template("decisions.html", rows=[], paths=PATHS, args=args, error=str(e)), 400
    return render_template("decisions.html", rows=rows, paths=PATHS, args=args)


@bp.app_template_filter("as_json")
def as_json(value: Any) -> str:
    """A value as readable JSON for a page (Jinja escapes it): `tojson` writes ' as \\u0027, for scripts."""
    return json.dumps(value, ensure_ascii=False, default=str)


@bp.get("/chat")
def chat():
    """A chat box to try messages; its one script, served from here, streams /chat turns."""
    return _interactive(render_template("chat.html"), connect=True)


@bp.get("/<int:decision_id>")
def detail(decision_id: int):
    row = visible_decision(decision_id)
    # Bars share one scale: the largest score or threshold shown on the page.
    scale = max([1.0] + [c["score"] for c in row["candidates"]] + [c["threshold"] for c in row["candidates"]])
    funes = current_app.extensions["funes"]
    tools, configured = _registry_tools(row.get("registry") or "")
    logged = [c["name"] for c in row["candidates"]]
    names = logged + sorted(set(tools or ()) - set(logged))
    settings = [(k, v, SETTING_HELP.get(k, "")) for k, v in sorted(row["thresholds"].items())]
    # a signal no candidate was measured on (no classifier, no words) is a column of dashes: left out
    signals = [s for s in SIGNAL_ORDER if any(c["signals"].get(s) is not None for c in row["candidates"])]
    return _interactive(render_template(
        "decision.html", d=row, scale=scale, signals=signals, label=funes.labels.latest(decision_id),
        can_label=caller().operator, reason=row.get("reason") or logged_reason(row), reason_logged=bool(row.get("reason")),
        gloss=RULE_GLOSS.get(row["decided_by"], ""), cards=_card_states(tools, logged) if configured else {},
        configured=configured, known=tools is not None, names=names, settings=settings))


def _registry_tools(key: str) -> tuple[dict[str, Tool] | None, bool]:
    """The tools of the registry that hashes to `key` by name, where this process knows it, and whether it is the
    configured one (as `Parts._names_of` finds them)."""
    funes = current_app.extensions["funes"]
    if not key:
        return None, False
    if key == funes.registry.hash():
        return {t.name: t for t in funes.registry}, True
    router = funes.factory.by_key(key) if "factory" in funes.__dict__ else None  # never built: never routed here
    return ({t.name: t for t in router.registry}, False) if router is not None else (None, False)


def _card_states(tools: dict[str, Tool], names: list[str]) -> dict[str, dict[str, str]]:
    """Each candidate's card state now (written, bare, enriched, ...), why, and where the tool came from."""
    found = [tools[n] for n in names if n in tools]
    states = current_app.extensions["funes"].enrichment.card_states(found)
    return {t.name: {"state": state, "why": why, "source": t.source} for t, (state, why) in zip(found, states)}


def logged_reason(row: dict[str, Any]) -> str:
    """The reason sentence from a row's logged numbers, for rows logged without one."""
    rule, p_none = row["decided_by"], row.get("no_tool_probability")
    chosen = [c for c in row["candidates"] if c.get("selected")]
    fixed = {"about_tool": "no tool: the message asks how a tool works, not to run it",
             "closing": "no tool: the message only thanks, praises or says goodbye",
             "mixed_veto": "no tool: the packs' classifier is sure no tool is needed (MIXED_NONE_VETO)"}
    if rule in fixed:
        return fixed[rule]
    if rule == "veto" and p_none is not None:
        return f"no tool: P(no tool) {p_none:.2f} ≥ NONE_VETO {row['thresholds'].get('NONE_VETO', 0):.2f}"
    if not chosen:
        best = max(row["candidates"], key=lambda c: c["score"], default=None)
        top = f"; best {best['name']} {best['score']:.2f} < {best['threshold']:.2f}" if best else ""
        return f"no tool: nothing reached its threshold{top}" + (f"; P(no tool) {p_none:.2f}" if p_none is not None
                                                                  else "")
    if rule == "name":
        return f"{', '.join(c['name'] for c in chosen)}: named in the message as a tool to run"
    label = "P" if p_none is not None else "similarity"
    return "; ".join(f"{c['name']}: {label} {c['score']:.2f} " + ("≥" if c["score"] >= c["threshold"] else "<")
                     + f" {c['threshold']:.2f}" for c in chosen) + (" (with the previous turn)" if rule == "history"
                                                                     else "")


@bp.post("/<int:decision_id>/label")
def label(decision_id: int):
    """The label form: the ticked tools (none = no tool), then back to the decision."""
    require_operator("labelling a decision")
    funes = current_app.extensions["funes"]
    funes.label(decision_id, request.form.getlist("tools"), caller().user or "inspector")
    return redirect(url_for("inspector.detail", decision_id=decision_id), code=303)
