"""Corrections: a person marks what a decision should have selected; routing learns from them."""
from __future__ import annotations

import difflib
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func, insert, select

from funes.errors import BadRequest
from funes.store.db import Database, decisions, labels

MAX_LABEL_TOOLS = 16


class LabelLog:
    """Labels in SQL (who, when, which registry); the latest label of a decision is the one that counts."""

    def __init__(self, db: Database):
        self.db = db

    def add(self, decision: dict[str, Any], tools: Any, labelled_by: Any,
            names: set[str] | None = None) -> dict[str, Any]:
        """Store a label for a logged decision (a row from DecisionLog.get); BadRequest when it cannot be one.

        `names`: the tools of the decision's registry, where the caller knows them (else names go unchecked)."""
        if not isinstance(tools, list) or not all(isinstance(t, str) and 0 < len(t) <= 128 for t in tools):
            raise BadRequest("'tools' must be a list of tool names ([] = no tool)")
        if len(tools) > MAX_LABEL_TOOLS:
            raise BadRequest(f"'tools' holds more than {MAX_LABEL_TOOLS} names")
        if not isinstance(labelled_by, str) or not 0 < len(labelled_by.strip()) <= 128:
            raise BadRequest("'by' must be a non-empty string of at most 128 characters")
        unknown = sorted(set(tools) - names) if names is not None else []
        if unknown:
            close = difflib.get_close_matches(unknown[0], sorted(names), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            more = f" (also unknown: {', '.join(unknown[1:])})" if len(unknown) > 1 else ""
            raise BadRequest(f"not a tool of that decision's registry: {unknown[0]}{hint}{more}")
        if not decision.get("registry"):
            raise BadRequest(f"decision {decision['id']} was logged before decisions named their registry")
        row = {"decision_id": decision["id"], "registry": decision["registry"], "tools": list(dict.fromkeys(tools)),
               "labelled_by": labelled_by, "created_at": datetime.now(timezone.utc)}
        with self.db.transaction() as conn:
            row["id"] = conn.execute(insert(labels).values(**row)).inserted_primary_key[0]
        return {**row, "created_at": _iso(row["created_at"])}

    def latest(self, decision_id: int) -> dict[str, Any] | None:
        """The label that counts for a decision, or None."""
        with self.db.reading() as conn:
            row = conn.execute(select(labels).where(labels.c.decision_id == decision_id)
                               .order_by(labels.c.id.desc()).limit(1)).mappings().first()
        if row is None:
            return None
        return {**row, "created_at": _iso(row["created_at"])}

    def version(self, registry: str) -> int:
        """Grows whenever a label for `registry` is added: routers rebuild when it changes."""
        with self.db.reading() as conn:
            return conn.execute(select(func.max(labels.c.id)).where(labels.c.registry == registry)).scalar() or 0

    def labelled(self, registry: str | None = None) -> list[dict[str, Any]]:
        """Each labelled decision once (its latest label), with its message, history and what was selected."""
        latest = select(func.max(labels.c.id)).group_by(labels.c.decision_id)
        query = (select(labels.c.decision_id, labels.c.tools, labels.c.registry, decisions.c.message,
                        decisions.c.history, decisions.c.selected)
                 .join(decisions, decisions.c.id == labels.c.decision_id).where(labels.c.id.in_(latest))
                 .order_by(labels.c.decision_id))
        if registry is not None:
            query = query.where(labels.c.registry == registry)
        with self.db.reading() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]


def _iso(when: datetime) -> str:
    """ISO-8601 in UTC (SQLite hands back naive datetimes; they were written in UTC)."""
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).isoformat()
