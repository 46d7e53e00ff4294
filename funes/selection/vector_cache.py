"""Card vectors on disk, so a restart does not re-embed: one SQLite file a data dir, keyed by model and text hash.

Keys are hashes, so a row cannot say which model or text it was for once neither is in use: each row carries
the day it was last read or written instead, and rows no process has used for KEEP_DAYS are dropped when a
cache opens. Old models' vectors and old cards' texts go that way; a cold registry is re-embedded once.
"""
from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)
VECTORS_VERSION = 2  # of what the disk cache holds; 2: each text embedded alone (funes.selection.onnx_direct)
KEEP_DAYS = 30  # a row unused this long is dropped: a month covers a server that restarts rarely
CHUNK = 500  # keys a statement (SQLite's default limit on parameters is 999)


def today() -> int:
    """Days since 1970 (UTC): the unit rows are dated in."""
    return int(time.time() // 86400)


class VectorCache:
    """Card vectors on disk for one model: read, written and dated by the day they were last used."""

    def __init__(self, path: Path, model_id: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        self._model_id = model_id
        self._lock = threading.Lock()
        with self._db:
            self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB, used INTEGER)")
        try:
            _tidy(self._db, path)
        except sqlite3.OperationalError as e:  # read-only, or held by another process past the timeout
            log.warning("card vectors in %s not pruned: %s", path, e)

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{VECTORS_VERSION}\0{self._model_id}\0{text}".encode()).hexdigest()

    def get_many(self, texts: list[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those texts that have one; each row read is dated today."""
        keys = {self._key(t): t for t in texts}
        found: dict[str, np.ndarray] = {}
        items, day, stale = list(keys), today(), []
        with self._lock:
            for i in range(0, len(items), CHUNK):
                chunk = items[i:i + CHUNK]
                marks = ",".join("?" * len(chunk))
                for key, blob, used in self._db.execute(
                        f"SELECT key, vec, used FROM vectors WHERE key IN ({marks})", chunk):
                    found[keys[key]] = np.frombuffer(blob, dtype=np.float32)
                    if used is None or used < day:  # rows read today already: no write at all
                        stale.append(key)
            if stale:
                _date(self._db, stale, day)
        return found

    def put_many(self, pairs: dict[str, np.ndarray]) -> None:
        day = today()
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                                 [(self._key(t), v.astype(np.float32).tobytes(), day) for t, v in pairs.items()])


def _date(db: sqlite3.Connection, keys: list[str], day: int) -> None:
    """Mark rows as used on `day`; a cache that cannot be written (read-only, locked) still serves its vectors."""
    try:
        with db:
            db.executemany("UPDATE vectors SET used = ? WHERE key = ?", [(day, key) for key in keys])
    except sqlite3.OperationalError as e:
        log.debug("card vectors not dated: %s", e)


def _tidy(db: sqlite3.Connection, path: Path) -> None:
    """Date the rows of a file from before rows were dated (as used today), then drop those unused too long."""
    with db:
        if "used" not in {row[1] for row in db.execute("PRAGMA table_info(vectors)")}:
            try:
                db.execute("ALTER TABLE vectors ADD COLUMN used INTEGER")
            except sqlite3.OperationalError as e:  # another worker added it first
                if "duplicate column" not in str(e):
                    raise
            db.execute("UPDATE vectors SET used = ? WHERE used IS NULL", (today(),))
        gone = db.execute("DELETE FROM vectors WHERE used < ?", (today() - KEEP_DAYS,)).rowcount
    if gone:
        log.info("dropped %d card vector(s) unused for %d days from %s", gone, KEEP_DAYS, path)


def cached_vectors(disk: VectorCache | None, texts: list[str], embed, dim: int) -> np.ndarray:
    """`embed(texts)` row by row, reading and filling the disk cache (None: no cache)."""
    if not texts:
        return np.zeros((0, dim), np.float32)
    unique = list(dict.fromkeys(texts))
    known = disk.get_many(unique) if disk else {}
    missing = [t for t in unique if t not in known]
    if missing:
        log.info("embedding %d card texts (%d cached)", len(missing), len(known))
        fresh = dict(zip(missing, embed(missing)))
        if disk:
            disk.put_many(fresh)
        known.update(fresh)
    return np.stack([known[t] for t in texts])
