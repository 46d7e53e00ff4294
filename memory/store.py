"""Long-term memories per user: rows in SQL (SQLite or PostgreSQL), vectors in one FAISS index per user.

Each row keeps its embedding as float32 bytes, so a new store rebuilds its indexes from the database
without calling the embedding model. Searches first compare the user's row ids with the indexed ones and
index what other worker processes added (or drop what they deleted), so gunicorn workers sharing one
database agree even when PostgreSQL commits rows out of id order.
"""
from __future__ import annotations

import logging
import threading
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Iterable

import faiss
import numpy as np
from sqlalchemy import (Column, DateTime, Index, Integer, LargeBinary, MetaData, String, Table, Text, delete,
                        func, insert, select)
from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

metadata = MetaData()

memories = Table(
    "memories", metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", String(255), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("text", Text, nullable=False),
    Column("source", Text),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("vector", LargeBinary, nullable=False),
    Index("ix_memories_user_id_id", "user_id", "id"),
    # Without AUTOINCREMENT SQLite reuses the highest id after a delete, and the catch-up by id set would
    # then pair a new row with a stale vector in another process.
    sqlite_autoincrement=True,
)


@dataclass(frozen=True)
class MemoryHit:
    """One memory returned by a search, with its cosine similarity to the query."""

    id: int
    text: str
    score: float
    kind: str
    source: str | None
    created_at: datetime


class MemoryStore:
    """Store and search each user's memories; one instance is shared by all threads of a process."""

    def __init__(self, engine: Engine, embed: Callable[[list[str]], np.ndarray], *, top_k: int, min_score: float):
        self.engine = engine
        self.top_k = top_k
        self.min_score = min_score
        self._embed = embed
        self._lock = threading.Lock()
        self._indexes: dict[str, faiss.IndexIDMap] = {}
        self._ids: dict[str, set[int]] = {}
        self._dim: int | None = None
        self._load_all()

    def add(self, user_id: str, text: str, *, kind: str = "note", source: str | None = None) -> int:
        """Store one memory and return its row id."""
        return self.add_many(user_id, [text], kind=kind, source=source)[0]

    def add_many(self, user_id: str, texts: Iterable[str], *, kind: str = "note",
                 source: str | None = None) -> list[int]:
        """Store several memories with one embedding call in one transaction, all or nothing."""
        _check_user(user_id)
        texts = [_clean(text) for text in texts]
        if not texts:
            return []
        vectors = self._embed_checked(texts)
        now = datetime.now(timezone.utc)
        rows = [{"user_id": user_id, "kind": kind, "text": text, "source": source, "created_at": now,
                 "vector": vector.tobytes()} for text, vector in zip(texts, vectors)]
        stmt = insert(memories).returning(memories.c.id, sort_by_parameter_order=True)
        with self._lock:
            with self.engine.begin() as conn:
                ids = list(conn.scalars(stmt, rows))
            self._sync(user_id)
        log.info("stored %d %s memories for user %s", len(ids), kind, user_id)
        return ids

    def search(self, user_id: str, query: str, *, top_k: int | None = None,
               min_score: float | None = None) -> list[MemoryHit]:
        """Return the user's best memories for `query` scoring at least `min_score`, best first."""
        _check_user(user_id)
        k = self.top_k if top_k is None else top_k
        floor = self.min_score if min_score is None else min_score
        if k <= 0 or not query.strip():
            return []
        with self._lock:
            self._sync(user_id)
            if user_id not in self._indexes:
                return []  # no memories: skip the embedding call
        vector = self._embed_checked([query])
        with self._lock:
            index = self._indexes.get(user_id)
            if index is None:
                return []  # deleted while the query was being embedded
            scores, ids = index.search(vector, min(k, index.ntotal))
        found = {int(i): float(s) for i, s in zip(ids[0], scores[0]) if i >= 0 and s >= floor}
        return self._hits(user_id, found)

    def count(self, user_id: str) -> int:
        """Return how many memories the user has."""
        stmt = select(func.count()).select_from(memories).where(memories.c.user_id == user_id)
        with self.engine.connect() as conn:
            return conn.scalar(stmt)

    def delete_user(self, user_id: str) -> int:
        """Forget every memory of the user and return how many were deleted."""
        with self._lock:
            with self.engine.begin() as conn:
                deleted = conn.execute(delete(memories).where(memories.c.user_id == user_id)).rowcount
            self._indexes.pop(user_id, None)
            self._ids.pop(user_id, None)
        log.info("deleted %d memories of user %s", deleted, user_id)
        return deleted

    def _load_all(self) -> None:
        """Rebuild every user's index from the vectors stored in the database."""
        stmt = select(memories.c.user_id, memories.c.id, memories.c.vector).order_by(memories.c.id)
        by_user: dict[str, list] = defaultdict(list)
        with self.engine.connect() as conn:
            for row in conn.execute(stmt):
                by_user[row.user_id].append(row)
        with self._lock:
            for user_id, rows in by_user.items():
                self._index_rows(user_id, rows)
        log.info("loaded %d memories of %d users", sum(map(len, by_user.values())), len(by_user))

    def _sync(self, user_id: str) -> None:
        """Index the user's rows this store has not seen and drop deleted ones; call with the lock held."""
        known = set(self._ids.get(user_id, ()))
        with self.engine.connect() as conn:
            stored = set(conn.scalars(select(memories.c.id).where(memories.c.user_id == user_id)))
            added, gone = sorted(stored - known), sorted(known - stored)
            if added:
                self._index_rows(user_id, conn.execute(select(memories.c.id, memories.c.vector)
                                                       .where(memories.c.id.in_(added))).all())
        if gone:
            self._indexes[user_id].remove_ids(np.array(gone, dtype=np.int64))
            self._ids[user_id].difference_update(gone)

    def _index_rows(self, user_id: str, rows: list) -> None:
        """Add rows (id, vector bytes) to the user's index; call with the lock held."""
        if not rows:
            return
        vectors = np.frombuffer(b"".join(row.vector for row in rows), dtype=np.float32)
        vectors = vectors.reshape(len(rows), -1)
        if self._dim is None:
            self._dim = vectors.shape[1]
        if user_id not in self._indexes:
            self._indexes[user_id] = faiss.IndexIDMap(faiss.IndexFlatIP(self._dim))
        self._indexes[user_id].add_with_ids(vectors, np.array([row.id for row in rows], dtype=np.int64))
        self._ids.setdefault(user_id, set()).update(row.id for row in rows)

    def _embed_checked(self, texts: list[str]) -> np.ndarray:
        """Embed texts into unit float32 rows, refusing a dimension that differs from the stored one."""
        vectors = np.array(self._embed(texts), dtype=np.float32, order="C", ndmin=2)
        if vectors.shape[0] != len(texts):
            raise ValueError(f"embed returned {vectors.shape[0]} vectors for {len(texts)} texts")
        if self._dim is not None and vectors.shape[1] != self._dim:
            raise ValueError(f"embed returned {vectors.shape[1]}-dimensional vectors but stored memories have "
                             f"{self._dim}: the embedding model changed")
        # Scores are cosines only on unit vectors, and min_score is tuned as a cosine.
        faiss.normalize_L2(vectors)
        return vectors

    def _hits(self, user_id: str, scores: dict[int, float]) -> list[MemoryHit]:
        """Load the rows behind `scores`, never another user's, best score first."""
        if not scores:
            return []
        cols = [memories.c[name] for name in ("id", "text", "kind", "source", "created_at")]
        stmt = select(*cols).where(memories.c.user_id == user_id, memories.c.id.in_(list(scores)))
        with self.engine.connect() as conn:
            rows = conn.execute(stmt).all()
        hits = [MemoryHit(row.id, row.text, scores[row.id], row.kind, row.source, _utc(row.created_at))
                for row in rows]
        return sorted(hits, key=lambda hit: (-hit.score, hit.id))


def _check_user(user_id: str) -> None:
    # An empty id would pool every anonymous caller's memories into one shared user.
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError("user_id must be a non-empty string")


def _clean(text: str) -> str:
    text = text.strip()
    if not text:
        raise ValueError("cannot store an empty memory")
    return text


def _utc(value: datetime) -> datetime:
    # SQLite returns naive datetimes even for timezone-aware columns; every stored time is UTC.
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
