"""Readiness: whether this process can serve a turn now (database, disk, encoder, LLM), with reasons."""
from __future__ import annotations

import logging
import shutil
from typing import Any

log = logging.getLogger(__name__)
MIN_FREE_BYTES = 64 * 1024 * 1024  # below this the SQLite file, vector cache and logs start failing writes


def readiness(parts) -> dict[str, Any]:
    """{"ready": bool, "checks": {part: "ok" | why not}} for the database, data disk, encoder and LLM."""
    checks = {"database": _check(_database, parts), "disk": _check(_disk, parts),
              "encoder": _check(_encoder, parts), "llm": _check(_llm, parts)}
    return {"ready": all(v == "ok" for v in checks.values()), "checks": checks}


def _check(probe, parts) -> str:
    """A probe's reason, "ok", or the failure's type: a health page names the failing part, not its address."""
    try:
        return probe(parts) or "ok"
    except Exception as e:  # noqa: BLE001  (whatever broke, readiness reports it instead of failing)
        log.warning("readiness: %s failed: %s", probe.__name__.strip("_"), e)
        return f"failed ({type(e).__name__})"


def _database(parts) -> str | None:
    parts.db.ping()
    return None


def _disk(parts) -> str | None:
    free = shutil.disk_usage(parts.settings["DATA_DIR"]).free
    return None if free >= MIN_FREE_BYTES else f"{free // 2**20} MB free in the data directory"


def _encoder(parts) -> str | None:
    parts.encoder.encode_query(["ready?"])
    return None


def _llm(parts) -> str | None:
    probe = getattr(parts.llm, "probe", None)
    return probe() if probe is not None else None
