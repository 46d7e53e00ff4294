"""What became of a proxied request upstream, kept on its decision: ok, an HTTP error, unreachable, or cut off.

A whole answer is read before its decision is written, so that row holds the outcome at once. A stream's
decision is written when its headers arrive (its id goes out in them) and corrected if the stream then breaks
or ends without its protocol's last line: `data: [DONE]` (OpenAI) or a chunk with `"done": true` (Ollama).
"""
from __future__ import annotations

import json

from sqlalchemy import update

from funes.store.db import Database, decisions

TAIL_BYTES = 4096  # a stream's end kept to find its last line (Ollama's closing chunk carries its counts)
OK, HTTP_ERROR, CUT = "ok", "upstream_error", "upstream_cut"


def of_down(why: str) -> str:
    """The outcome of an upstream that could not be reached (`why`: the httpx error's name) or did not answer."""
    return "upstream_timeout" if "Timeout" in why else "upstream_unreachable"


def of_status(status: int, text: str = "") -> tuple[str, str | None]:
    """The outcome an upstream's HTTP status means, and its error text."""
    return (OK, None) if status < 400 else (HTTP_ERROR, f"HTTP {status}: {text[:300]}".rstrip(": "))


def unfinished(content_type: str, content_encoding: str, tail: bytes) -> str | None:
    """Why a stream that ended is short of its protocol's end, or None (also where it cannot be told)."""
    if content_encoding.strip().lower() not in ("", "identity"):  # relayed undecoded: its bytes are not text
        return None
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    last = lines[-1] if lines else b""
    if "text/event-stream" in content_type:
        return None if last == b"data: [DONE]" else "the stream ended without data: [DONE]"
    if "ndjson" in content_type:
        try:
            done = json.loads(last).get("done") is True
        except (ValueError, AttributeError):
            done = False
        return None if done else "the stream ended without a chunk with done: true"
    return None


def settle(db: Database, decision_id: int, outcome: str, error: str | None) -> None:
    """Correct a streamed request's decision once the stream turned out not to end well."""
    with db.transaction() as conn:
        conn.execute(update(decisions).where(decisions.c.id == decision_id).values(outcome=outcome, error=error))
