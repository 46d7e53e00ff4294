"""Readiness: whether this process can serve a turn now (database, disk, encoder, LLM), with reasons.

The embedded LLM is "warming up", so not ready, until its start-up load and first completion are done.

The MCP servers' check (where MCP_SERVERS is set) only degrades: a server that is down makes its own tools
unrunnable, never the rest of Funes unready."""
from __future__ import annotations

import logging
import shutil
import threading
import time
from typing import Any

from funes.errors import FunesError

log = logging.getLogger(__name__)
MIN_FREE_BYTES = 64 * 1024 * 1024  # below this the SQLite file, vector cache and logs start failing writes
DEGRADING = frozenset({"mcp"})  # checks whose failure is reported but leaves the process ready
LLM_PROBE_TTL_S = 5.0  # /readyz asks the LLM server at most this often (each ask is held to PROBE_TIMEOUT_S)
_probes: dict[int, tuple[object, float, str | None]] = {}  # id(llm) -> (llm, when, its answer)
_probing = threading.Lock()


def readiness(parts) -> dict[str, Any]:
    """{"ready": bool, "checks": {part: "ok" | why not}} for the database, data disk, encoder, LLM (and MCP servers)."""
    checks = {"database": _check(_database, parts), "disk": _check(_disk, parts),
              "encoder": _check(_encoder, parts), "llm": _check(_llm, parts)}
    if parts.settings.get("MCP_SERVERS"):
        checks["mcp"] = _check(_mcp, parts)
    return {"ready": all(v == "ok" for k, v in checks.items() if k not in DEGRADING), "checks": checks}


def _check(probe, parts) -> str:
    """A probe's reason, "ok", or the failure's type: a health page names the failing part, not its address."""
    try:
        return probe(parts) or "ok"
    except FunesError as e:  # says which part failed and how, never where it lives
        log.warning("readiness: %s failed: %s", probe.__name__.strip("_"), e)
        return str(e)
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
    parts.text_encoder.encode_query(["ready?"])  # tool data and memories
    return None


def _llm(parts) -> str | None:
    warming = getattr(parts, "llm_warming", None)  # the embedded model loading at start (Parts.start_service)
    if warming is not None and warming.is_alive():
        return "warming up"
    return _probe(parts.llm)


def _probe(llm) -> str | None:
    """The LLM server's answer to its probe, asked at most once per LLM_PROBE_TTL_S: readiness checks that come
    meanwhile, or while one asks, get the last answer instead of queueing on a slow or hung server."""
    probe = getattr(llm, "probe", None)
    if probe is None:
        return None
    last = _probes.get(id(llm))
    if last is not None and time.monotonic() - last[1] < LLM_PROBE_TTL_S:
        return last[2]
    if not _probing.acquire(blocking=last is None):  # another check is asking now: its answer comes soon
        return last[2]
    try:
        if (now := _probes.get(id(llm))) is not last:  # asked while this one waited
            return now[2]
        answer = probe()
        _probes[id(llm)] = (llm, time.monotonic(), answer)
        return answer
    finally:
        _probing.release()


def _mcp(parts) -> str | None:
    """Each MCP server that is not up, and why ("degraded: ..."), or None when all are."""
    state = parts.mcp.health()
    return None if state == "ok" else state
