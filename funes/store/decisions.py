"""The decision log: record one row per decision, read it back by id or by filters."""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import String, cast, delete, desc, insert, select, update
from sqlalchemy.exc import IntegrityError

from funes.errors import BadRequest, DatabaseUnavailable, NotFound
from funes.selection.decision import Decision
from funes.store.db import Database, decisions, turn_claims
from funes.store.enrichment import pid_alive, worker_id
from funes.tools.names import printable

log = logging.getLogger(__name__)
PATHS = ("tools", "memory", "route", "proxy", "mcp")
MAX_ID = 2**63 - 1
# a claim not renewed for this long belongs to a worker that died; its live claimant renews it 4 times as often
# (hosts' clocks must agree within it: a lapse is judged by the taker's clock against the claimant's)
CLAIM_LEASE_S = 20.0


def _now() -> datetime:
    return datetime.now(timezone.utc)


class DecisionLog:
    """Append-only: rows are inserted, never updated."""

    def __init__(self, db: Database):
        self.db = db

    def record(self, decision: Decision, *, endpoint: str, path: str, outcome: str = "ok",
               conversation_id: str | None = None, user_id: str | None = None, tools_offered: list[str] = (),
               tool_calls: list[dict] = (), memories_used: list[dict] = (), timings: dict[str, float] | None = None,
               usage: dict[str, int] | None = None, reply: str | None = None, error: str | None = None,
               dates: list[dict] | None = None, idempotency_key: str | None = None, conn=None) -> int:
        """Insert the row for one decision (inside the caller's transaction when given) and return its id."""
        d = decision.to_dict()
        row = {"created_at": _now(), "endpoint": endpoint, "path": path, "outcome": outcome,
               "conversation_id": conversation_id, "user_id": user_id, "message": d["message"],
               "history": d["history_used"], "decided_by": d["decided_by"], "reason": d["reason"], "selected": d["selected"],
               "candidates": d["candidates"], "thresholds": d["thresholds"], "none_score": d["none_score"],
               "no_tool_probability": d["no_tool_probability"],
               "tools_offered": list(tools_offered), "tool_calls": list(tool_calls),
               "memories_used": list(memories_used), "timings": {**d["timings_ms"], **(timings or {})}, "usage": usage,
               "reply": reply, "error": error, "cards": d["cards"], "dates": dates or None,
               "idempotency_key": idempotency_key,
               "registry": d["registry"] or None}
        if conn is None:
            with self.db.transaction() as own:
                decision_id = own.execute(insert(decisions).values(**row)).inserted_primary_key[0]
        else:
            decision_id = conn.execute(insert(decisions).values(**row)).inserted_primary_key[0]
        log.info("decision %s: %s via %s -> %s (%s) in %.1f ms", decision_id, endpoint, d["decided_by"],
                 ",".join(map(printable, d["selected"])) or "no tool", outcome, row["timings"].get("total", 0.0))
        return decision_id

    def get(self, decision_id: int) -> dict[str, Any]:
        if not 1 <= decision_id <= MAX_ID:  # beyond a 64-bit key the database would raise, not miss
            raise NotFound(f"no decision {decision_id}")
        with self.db.reading() as conn:
            row = conn.execute(select(decisions).where(decisions.c.id == decision_id)).mappings().first()
        if row is None:
            raise NotFound(f"no decision {decision_id}")
        return _row(row)

    def by_idempotency_key(self, key: str) -> dict[str, Any] | None:
        """The stored turn a retried request with this key already made, if any."""
        with self.db.reading() as conn:
            row = conn.execute(select(decisions).where(decisions.c.idempotency_key == key)).mappings().first()
        return _row(row) if row is not None else None

    def query(self, *, limit: int = 50, path: str | None = None, tool: str | None = None,
              since: datetime | None = None, conversation_id: str | None = None,
              user_id: str | None = None) -> list[dict[str, Any]]:
        """Newest first, filtered by path, a selected tool, a start time, a conversation, a user."""
        if path is not None and path not in PATHS:
            raise BadRequest(f"'path' must be one of {', '.join(PATHS)}")
        stmt = select(decisions).order_by(desc(decisions.c.id))
        if path:
            stmt = stmt.where(decisions.c.path == path)
        if tool:  # JSON list containment differs per database; a quoted match on its text works on all
            stmt = stmt.where(cast(decisions.c.selected, String).like(f'%"{tool}"%'))
        if since:
            stmt = stmt.where(decisions.c.created_at >= since)
        if conversation_id:
            stmt = stmt.where(decisions.c.conversation_id == conversation_id)
        if user_id is not None:
            stmt = stmt.where(decisions.c.user_id == user_id)
        with self.db.reading() as conn:
            rows = conn.execute(stmt.limit(limit)).mappings().all()
        return [_row(r) for r in rows]


class TurnClaims:
    """Which worker runs the turn of an Idempotency-Key: a row claimed before the turn, so the others wait for it.

    The claimant renews its claim while the turn runs; a claim not renewed for LEASE_S, or one whose process on
    this host is gone, was left by a worker that died, and the next request with the key takes it over at once."""

    def __init__(self, db: Database, lease_s: float = CLAIM_LEASE_S):
        self.db, self.lease_s = db, lease_s
        self.owner = worker_id()

    def take(self, key: str) -> bool:
        """Claim `key` (or take over a dead worker's claim); False while a live worker holds it."""
        now = time.time()
        try:
            with self.db.transaction() as conn:
                conn.execute(insert(turn_claims).values(key=key, claimed_at=now, owner=self.owner))
            return True
        except IntegrityError:
            pass
        with self.db.transaction() as conn:
            held = conn.execute(select(turn_claims.c.owner, turn_claims.c.claimed_at)
                                .where(turn_claims.c.key == key)).first()
            if held is None or (held.claimed_at >= now - self.lease_s and not _gone(held.owner)):
                return False  # given back just now (the next look inserts), or its worker is alive
            # only the claim as read is taken over: of two workers taking it at once, one wins
            taken = conn.execute(update(turn_claims).where(
                turn_claims.c.key == key, turn_claims.c.owner == held.owner,
                turn_claims.c.claimed_at == held.claimed_at).values(claimed_at=now, owner=self.owner)).rowcount
        if taken == 1:
            log.warning("took over the claim on an Idempotency-Key left by %s, a worker that is gone", held.owner)
        return taken == 1

    @contextmanager
    def held(self, key: str) -> Iterator[None]:
        """While the block runs (the turn), renew this worker's claim on `key`; then give it back."""
        stop = threading.Event()
        threading.Thread(target=self._renew, args=(key, stop), name="funes-claim", daemon=True).start()
        try:
            yield
        finally:
            stop.set()  # a renewal still under way updates no row once the claim is given back
            self.give_back(key)

    def _renew(self, key: str, stop: threading.Event) -> None:
        while not stop.wait(self.lease_s / 4):  # three renewals may fail before the claim lapses
            try:
                with self.db.transaction() as conn:
                    conn.execute(update(turn_claims).where(turn_claims.c.key == key, turn_claims.c.owner == self.owner)
                                 .values(claimed_at=time.time()))
            except Exception as e:  # an outage: the next renewal may get through
                log.warning("the claim on an Idempotency-Key was not renewed: %s", e)

    def give_back(self, key: str) -> None:
        """Drop this worker's claim on `key`; one left behind by an outage lapses and is taken over."""
        try:
            with self.db.transaction() as conn:
                conn.execute(delete(turn_claims).where(turn_claims.c.key == key, turn_claims.c.owner == self.owner))
        except DatabaseUnavailable:
            log.warning("the claim on an Idempotency-Key was not given back; it lapses in %.0f s", self.lease_s)


def _gone(owner: str) -> bool:
    """Whether the worker `owner` (host/pid/id) was a process of this host that no longer runs."""
    host, _, rest = owner.partition("/")
    pid = rest.partition("/")[0]
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return False  # another host's (its lease tells), or this process's own
    return not pid_alive(int(pid))


def _row(row) -> dict[str, Any]:
    data = dict(row)
    data.pop("idempotency_key", None)  # a lookup key, not part of the decision
    created = data["created_at"]
    if created.tzinfo is None:  # SQLite hands back naive datetimes; they were written in UTC
        created = created.replace(tzinfo=timezone.utc)
    data["created_at"] = created.isoformat()
    return data


def parse_since(value: str | None) -> datetime | None:
    """An ISO-8601 time (a date alone means its midnight UTC)."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise BadRequest(f"'since' must be an ISO-8601 date or time, not {value!r}") from None
    # SQLite keeps times as naive UTC text, so compare in UTC whatever offset the caller wrote.
    try:
        return parsed.astimezone(timezone.utc) if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    except OverflowError:  # 0001-01-01T00:00+14:00 is before the first representable UTC time
        raise BadRequest(f"'since' is out of range: {value!r}") from None


def parse_limit(value: str | None, default: int = 50, most: int = 500) -> int:
    """A row count from a query string: ASCII digits from 1 to `most`."""
    raw = default if value is None else value
    raw = str(raw)
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= most:
        raise BadRequest(f"'limit' must be a whole number from 1 to {most}")
    return int(raw)
