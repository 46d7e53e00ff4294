"""The decision inspector: recent decisions with filters, and one decision's scores against its thresholds."""
from __future__ import annotations

from flask import Blueprint, current_app, render_template, request

from funes.store.decisions import PATHS, parse_limit, parse_since

bp = Blueprint("inspector", __name__, url_prefix="/inspector", template_folder="templates")
SIGNAL_ORDER = ("classifier", "embedding", "lexical", "words", "negative", "keyword", "name")


@bp.get("/")
def index():
    args = request.args
    rows = current_app.extensions["funes"].log.query(
        limit=parse_limit(args.get("limit")), path=args.get("path") or None, tool=args.get("tool") or None,
        since=parse_since(args.get("since")))
    return render_template("decisions.html", rows=rows, paths=PATHS, args=args)


@bp.get("/<int:decision_id>")
def detail(decision_id: int):
    row = current_app.extensions["funes"].log.get(decision_id)
    # Bars share one scale: the largest score or threshold shown on the page.
    scale = max([1.0] + [c["score"] for c in row["candidates"]] + [c["threshold"] for c in row["candidates"]])
    return render_template("decision.html", d=row, scale=scale, signals=SIGNAL_ORDER)
