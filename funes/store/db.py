"""The service's database: one SQLAlchemy engine per app, the schema, and transactions.

SQLite by default, PostgreSQL (or any SQLAlchemy URL) when FUNES_DATABASE_URL says so.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import (JSON, Boolean, Column, DateTime, Float, ForeignKey, Index, Integer, MetaData, String, Table,
                        Text, create_engine, event, inspect)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import InterfaceError, OperationalError

from funes.errors import DatabaseUnavailable, DiskFull

log = logging.getLogger(__name__)
OUTAGES = (OperationalError, InterfaceError)  # the database is down, unreachable, unwritable or full: not a bug
DISK_FULL = ("database or disk is full", "No space left on device", "could not extend file")
# what an outage's message may say, named to the client; anything else is named by its type (no addresses)
REASONS = (*DISK_FULL, "unable to open database file", "readonly database", "disk I/O error", "database is locked",
           "Connection refused", "timeout expired", "could not translate host name", "server closed the connection",
           "the database system is shutting down", "the database system is starting up", "too many connections")

metadata = MetaData()

conversations = Table(
    "conversations", metadata,
    Column("id", String(64), primary_key=True),
    Column("user_id", String(128), nullable=False, index=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

messages = Table(
    "messages", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("conversation_id", String(64), ForeignKey("conversations.id"), nullable=False, index=True),
    Column("role", String(16), nullable=False),
    Column("content", Text, nullable=False),
    Column("decision_id", Integer, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# One append-only row per routing decision; JSON columns keep it inspectable without joins.
decisions = Table(
    "decisions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("endpoint", String(16), nullable=False),          # chat | route | ollama | openai
    Column("path", String(16), nullable=False, index=True),  # tools | memory | route | proxy
    Column("outcome", String(32), nullable=False),           # ok | tool_error | llm_unavailable | llm_bad_reply | error
    Column("conversation_id", String(64), nullable=True, index=True),
    Column("user_id", String(128), nullable=True),
    Column("message", Text, nullable=False),
    Column("history", JSON, nullable=False),
    Column("decided_by", String(16), nullable=False),      # the rule that fired (funes.selection.policy)
    Column("reason", Text, nullable=True),                   # one sentence with its numbers (added later: nullable)
    Column("selected", JSON, nullable=False),
    Column("candidates", JSON, nullable=False),
    Column("thresholds", JSON, nullable=False),
    Column("none_score", Float, nullable=True),
    Column("no_tool_probability", Float, nullable=True),
    Column("tools_offered", JSON, nullable=False),
    Column("tool_calls", JSON, nullable=False),
    Column("memories_used", JSON, nullable=False),
    Column("timings", JSON, nullable=False),
    Column("usage", JSON, nullable=True),                    # LLM calls and tokens of a chat turn
    Column("reply", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("cards", String(16), nullable=True),              # written | bare | enriched (added later: nullable)
    Column("registry", String(64), nullable=True, index=True),  # hash of the cards routed over
    Column("dates", JSON, nullable=True),  # relative time in the message resolved to dates (funes.dates)
    Column("idempotency_key", String(64), nullable=True),  # hash of (user, Idempotency-Key) of a stored turn
)
Index("ix_decisions_path_created", decisions.c.path, decisions.c.created_at)
Index("ux_decisions_idempotency_key", decisions.c.idempotency_key, unique=True)  # a retried turn is stored once

turn_claims = Table(  # a /chat turn with an Idempotency-Key in flight: one worker runs it, the others wait
    "turn_claims", metadata,
    Column("key", String(64), primary_key=True),       # the decision's idempotency_key
    Column("claimed_at", Float, nullable=False),       # unix time; an old claim's worker died, another may take it
    Column("owner", String(128), nullable=False),      # host/pid/id of the worker running the turn
)

labels = Table(  # what a person said a decision should have selected; the latest per decision counts
    "labels", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("decision_id", Integer, ForeignKey("decisions.id"), nullable=False, index=True),
    Column("registry", String(64), nullable=False, index=True),  # the registry the decision was routed over
    Column("tools", JSON, nullable=False),                       # [] = no tool
    Column("labelled_by", String(128), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

api_keys = Table(  # who a caller is: a key names its user; only the key's hash is kept
    "api_keys", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),  # the key's first characters, to tell keys apart in a listing
    Column("user_id", String(128), nullable=False),
    Column("operator", Boolean, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
)

enrichments = Table(  # one row per enrichment key (card hash, model, prompt, sampling): its job and, once done, texts
    "enrichments", metadata,
    Column("key", String(64), primary_key=True),
    Column("card", String(256), nullable=False),             # the card's name, for people reading the table
    Column("model", String(256), nullable=False),
    Column("state", String(16), nullable=False, index=True),  # queued | running | done | failed
    Column("attempts", Integer, nullable=False),             # failed answers so far (a pause or a yield is none)
    Column("error", Text, nullable=True),                    # why the last attempt failed or the queue paused
    Column("next_attempt_at", Float, nullable=True),         # unix time before which a failed card is not retried
    Column("claimed_by", String(128), nullable=True),        # host/pid/id of the worker enriching it
    Column("lease_until", Float, nullable=True),             # unix time after which another worker may take it
    Column("texts", JSON, nullable=True),                    # examples, negatives, keywords, seconds: once done
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
)


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    # Foreign keys are off by default in SQLite; wait for a busy writer instead of failing at once.
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _retry_locked(action, attempts: int = 50, pause_s: float = 0.2) -> None:
    """Run a schema step that another starting worker may hold the lock for (or have just done)."""
    for attempt in range(attempts):
        try:
            action()
            return
        except OperationalError as e:
            raced = any(m in str(e) for m in ("locked", "already exists", "duplicate column"))
            if attempt == attempts - 1 or not raced:
                raise
            time.sleep(pause_s)


def _add_missing_columns(conn, meta: MetaData) -> None:
    """Columns added to a table after a database was made (all nullable), so an old data dir keeps working."""
    inspector = inspect(conn)
    for table in meta.sorted_tables:
        have = {c["name"] for c in inspector.get_columns(table.name)}
        added = [c for c in table.columns if c.name not in have]
        for column in added:
            if not column.nullable:  # old rows have no value for it
                raise RuntimeError(f"{table.name}.{column.name} was added to the schema later: it must be nullable")
            kind = column.type.compile(dialect=conn.dialect)
            conn.exec_driver_sql(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}')
        for index in table.indexes if added else ():  # an added column's index, too
            index.create(conn, checkfirst=True)


def unavailable(e: Exception) -> DatabaseUnavailable:
    """The Funes error for a database outage: 507 when its disk is full, else 503, naming the part."""
    text = str(getattr(e, "orig", None) or e)
    reason = next((r for r in REASONS if r.lower() in text.lower()), type(getattr(e, "orig", None) or e).__name__)
    log.warning("database unavailable: %s", text)
    full = any(r.lower() in text.lower() for r in DISK_FULL)
    return (DiskFull if full else DatabaseUnavailable)(f"database unavailable: {reason}")


@contextmanager
def outages() -> Iterator[None]:
    """Raise a database outage inside the block as DatabaseUnavailable (or DiskFull)."""
    try:
        yield
    except OUTAGES as e:
        raise unavailable(e) from e


def database_url(settings: dict) -> str:
    """The configured URL, or a SQLite file in the data directory."""
    return settings["DATABASE_URL"] or f"sqlite:///{Path(settings['DATA_DIR']).resolve() / 'funes.db'}"


class Database:
    """An engine, its schema (Funes' tables plus any extra MetaData), and transactions."""

    def __init__(self, url: str, extra: tuple[MetaData, ...] = ()):
        sqlite = url.startswith("sqlite:///")
        if sqlite:
            Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
            event.listen(self.engine, "connect", _sqlite_pragmas)
            # WAL (kept in the file once set) lets gunicorn workers read while one writes.
            _retry_locked(lambda: self._exec("PRAGMA journal_mode=WAL"))
        else:
            self.engine = create_engine(url, pool_pre_ping=True)
        for meta in (metadata, *extra):
            _retry_locked(lambda meta=meta: self._create(meta))

    def _create(self, meta: MetaData) -> None:
        """Create missing tables; on PostgreSQL under a lock, since workers starting together race in its catalog."""
        with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(4242)")  # any constant shared by all workers
            meta.create_all(conn)
            _add_missing_columns(conn, meta)

    def _exec(self, sql: str) -> None:
        with self.engine.connect() as conn:
            conn.exec_driver_sql(sql)

    @contextmanager
    def transaction(self):
        """A connection whose work commits whole at the end of the block, or not at all."""
        with outages(), self.engine.begin() as conn:
            yield conn

    @contextmanager
    def reading(self):
        with outages(), self.engine.connect() as conn:
            yield conn

    def ping(self) -> bool:
        with self.reading() as conn:
            conn.exec_driver_sql("SELECT 1")
        return True


__all__ = ["Database", "Connection", "api_keys", "database_url", "conversations", "messages", "decisions", "enrichments",
           "labels", "metadata", "turn_claims"]
