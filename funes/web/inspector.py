"""The decision inspector: recent decisions with filters, and one decision's scores against its thresholds."""
from __future__ import annotations

from flask import Blueprint, current_app, make_response, redirect, render_template, request, url_for

from funes.store.decisions import PATHS, parse_limit, parse_since
from funes.web.api import visible_decision
from funes.web.auth import caller, require_operator, visible_user

bp = Blueprint("inspector", __name__, url_prefix="/inspector", template_folder="templates",
               static_folder="static")
SIGNAL_ORDER = ("classifier", "card", "embedding", "lexical", "words", "negative", "keyword", "name")
# The pages use inline styles (bars) and no script, so scripts are refused outright; the chat page alone
# runs one script, its own file from this origin.
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


@bp.get("/")
def index():
    args = request.args
    rows = current_app.extensions["funes"].log.query(
        limit=parse_limit(args.get("limit")), path=args.get("path") or None, tool=args.get("tool") or None,
        since=parse_since(args.get("since")), user_id=visible_user())
    return render_template("decisions.html", rows=rows, paths=PATHS, args=args)


@bp.get("/chat")
def chat():
    """A chat box to try messages; its one script, served from here, streams /chat turns."""
    response = make_response(render_template("chat.html"))
    response.headers["Content-Security-Policy"] = SECURITY_HEADERS["Content-Security-Policy"].replace(
        "default-src 'none';", "default-src 'none'; script-src 'self'; connect-src 'self';")
    return response


@bp.get("/<int:decision_id>")
def detail(decision_id: int):
    row = visible_decision(decision_id)
    # Bars share one scale: the largest score or threshold shown on the page.
    scale = max([1.0] + [c["score"] for c in row["candidates"]] + [c["threshold"] for c in row["candidates"]])
    label = current_app.extensions["funes"].labels.latest(decision_id)
    return render_template("decision.html", d=row, scale=scale, signals=SIGNAL_ORDER, label=label,
                           can_label=caller().operator)


@bp.post("/<int:decision_id>/label")
def label(decision_id: int):
    """The label form: the ticked candidates (none = no tool), then back to the decision."""
    require_operator("labelling a decision")
    funes = current_app.extensions["funes"]
    funes.label(decision_id, request.form.getlist("tools"), caller().user or "inspector")
    return redirect(url_for("inspector.detail", decision_id=decision_id), code=303)
