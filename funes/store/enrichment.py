"""Enrichment jobs in SQL: one row per card key, claimed atomically, so every worker and host enriches a card once.

A row goes queued -> running (claimed, with a lease) -> done (texts kept) | failed (retried after a backoff).
A claim is one UPDATE ... WHERE state/lease allow it; its rowcount says who won, on SQLite and PostgreSQL alike.
"""
from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError

from funes.store.db import Database, enrichments

STATES = ("queued", "running", "done", "failed")
CHUNK = 500  # keys per IN (...) list: SQLite caps the bound parameters of one statement


@dataclass(frozen=True)
class Job:
    """One card's enrichment as the table holds it (texts only where asked for)."""

    key: str
    card: str
    state: str
    attempts: int
    error: str | None
    next_attempt_at: float | None
    claimed_by: str | None
    lease_until: float | None
    texts: dict | None = None

    def due_in(self, now: float) -> float:
        """Seconds until a worker may claim it (0 = now; inf = done)."""
        if self.state == "done":
            return float("inf")
        if self.state == "running":
            return max(0.0, (self.lease_until or 0.0) - now)
        return max(0.0, (self.next_attempt_at or 0.0) - now)


def worker_id() -> str:
    """Who holds a claim: host, process and a random part (a restarted process is another worker)."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


class EnrichmentStore:
    """The enrichments table: add, read, claim, finish, fail, release."""

    def __init__(self, db: Database):
        self.db = db

    def jobs(self, keys: Iterable[str], texts: bool = False) -> dict[str, Job]:
        """The rows of these keys (missing keys have none); `texts` also reads done rows' texts."""
        keys = list(dict.fromkeys(keys))
        columns = [c for c in enrichments.c if texts or c.name not in ("texts", "model", "created_at", "updated_at")]
        out: dict[str, Job] = {}
        with self.db.reading() as conn:
            for i in range(0, len(keys), CHUNK):
                rows = conn.execute(select(*columns).where(enrichments.c.key.in_(keys[i:i + CHUNK])))
                for row in rows.mappings():
                    out[row["key"]] = Job(**{k: row[k] for k in Job.__dataclass_fields__ if k in row})
        return out

    def add(self, cards: Iterable[tuple[str, str, str]], state: str = "queued", texts: dict | None = None) -> None:
        """Rows for (key, card name, model) not in the table yet; existing rows are left as they are."""
        now = datetime.now(timezone.utc)
        rows = [{"key": k, "card": name[:256], "model": model[:256], "state": state, "attempts": 0, "texts": texts,
                 "created_at": now, "updated_at": now} for k, name, model in cards]
        if not rows:
            return
        with self.db.transaction() as conn:
            dialect = {"sqlite": sqlite, "postgresql": postgresql}.get(conn.dialect.name)
            if dialect is not None:
                conn.execute(dialect.insert(enrichments).on_conflict_do_nothing(index_elements=["key"]), rows)
                return
        for row in rows:  # another database: one row at a time, a duplicate is someone else's
            try:
                with self.db.transaction() as conn:
                    conn.execute(enrichments.insert(), row)
            except IntegrityError:
                pass

    def claim(self, key: str, worker: str, lease_s: float, due_only: bool = True) -> bool:
        """Take the card for `worker` until the lease ends; False when another holds it (or it is done, or,
        with `due_only`, a failed card's retry time has not come)."""
        now = time.time()
        waiting = enrichments.c.state.in_(("queued", "failed"))
        if due_only:
            waiting = and_(waiting, or_(enrichments.c.next_attempt_at.is_(None), enrichments.c.next_attempt_at <= now))
        lapsed = and_(enrichments.c.state == "running", enrichments.c.lease_until < now)
        return self._update(and_(enrichments.c.key == key, or_(waiting, lapsed)),
                            state="running", claimed_by=worker, lease_until=now + lease_s)

    def finish(self, key: str, texts: dict) -> None:
        """Keep the card's texts: done for every worker from now on."""
        self._update(and_(enrichments.c.key == key, enrichments.c.state != "done"), state="done", texts=texts,
                     error=None, claimed_by=None, lease_until=None, next_attempt_at=None)

    def fail(self, key: str, worker: str, error: str, retry_s: float, retry_max_s: float) -> tuple[int, float]:
        """Record a failed attempt and when to try again (doubling, capped); (attempts, seconds to the retry)."""
        job = self.jobs([key]).get(key)
        attempts = (job.attempts if job else 0) + 1
        wait = min(retry_max_s, retry_s * 2 ** (attempts - 1))
        self._update(self._held(key, worker), state="failed", attempts=attempts, error=error[:2000],
                     next_attempt_at=time.time() + wait, claimed_by=None, lease_until=None)
        return attempts, wait

    def release(self, key: str, worker: str, reason: str | None = None, pause_s: float = 0.0) -> None:
        """Give the card back without counting an attempt (a chat turn came, the LLM is down, the process stops)."""
        job = self.jobs([key]).get(key)
        state = "failed" if job is not None and job.attempts else "queued"  # a failed card keeps its story
        values: dict[str, Any] = {"state": state, "claimed_by": None, "lease_until": None}
        if reason is not None:
            values.update(error=reason[:2000], next_attempt_at=time.time() + pause_s)
        self._update(self._held(key, worker), **values)

    def requeue_orphans(self) -> int:
        """Give back cards left running by processes of this host that are gone (a crash, a kill): how many."""
        prefix = socket.gethostname() + "/"
        with self.db.reading() as conn:
            held = conn.execute(select(enrichments.c.key, enrichments.c.claimed_by).where(
                enrichments.c.state == "running", enrichments.c.claimed_by.startswith(prefix))).all()
        orphans = [(k, w) for k, w in held if not pid_alive(int(w.split("/")[1]))]
        for key, worker in orphans:
            self.release(key, worker)
        return len(orphans)

    def _held(self, key: str, worker: str):
        return and_(enrichments.c.key == key, enrichments.c.state == "running", enrichments.c.claimed_by == worker)

    def _update(self, where, **values: Any) -> bool:
        with self.db.transaction() as conn:
            result = conn.execute(update(enrichments).where(where).values(
                **values, updated_at=datetime.now(timezone.utc)))
        return result.rowcount == 1
