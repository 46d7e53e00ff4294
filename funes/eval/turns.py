"""bench-chat's turns: each /chat turn streamed (first event and first words timed) and judged by code."""
from __future__ import annotations

import json
import re
import time
from typing import Any

from funes.llm.parsing import is_machinery, is_refusal, points_at_tools, says_failure
from funes.tool_loop import COULD_NOT


# The checks bench-chat began with; judge adds three stricter ones (answered, no_tool_talk, to_the_user).
CORE_CHECKS = ("tools", "arguments", "plain", "no_refusal", "no_repeat", "failure_said")


def judge(expected: set[str], body: dict[str, Any]) -> dict[str, bool]:
    """The checks of one turn: the expected tools called (none when none), arguments the tools took, a plain
    reply that is no bare refusal and names a failed tool's failure, no identical call repeated, and that
    answers: no "I could not" after a result, no telling the user to call a tool, no "the user" for "you"."""
    calls = body.get("tool_calls") or []
    reply = body.get("reply") or ""
    made = [json.dumps([c["name"], c.get("arguments")], sort_keys=True, default=str) for c in calls]
    failed = [c for c in calls if c.get("error")]
    checks = {
        "tools": {c["name"] for c in calls} == expected,
        "arguments": not any(_schema_error(c["error"]) for c in failed),
        "plain": bool(reply.strip()) and not is_machinery(reply),
        "no_refusal": not is_refusal(reply),
        "no_repeat": len(made) == len(set(made)),
        # a turn whose every call failed must say so, not answer as if it had the result
        "failure_said": not calls or len(failed) < len(calls) or says_failure(reply),
        # a result came back: the reply must use it, not give up or point the user at the machinery
        "answered": len(failed) == len(calls) or not reply.startswith(COULD_NOT),
        "no_tool_talk": not points_at_tools(reply, body.get("tools_offered") or []),
        # the results are the user's own: "the user" there means "you" (in general knowledge it may be anyone)
        "to_the_user": not calls or not re.search(r"\bthe user\b", reply, re.I),
    }
    return {**checks, "right": all(checks.values())}


def _schema_error(error: str) -> bool:
    return "is not of type" in error or "is a required property" in error or "is not one of" in error


def streamed_turn(client, message: str, user: str) -> dict[str, Any]:
    """POST a streamed /chat and read it as a person's client would: seconds to the first byte, to the
    decision event, to the first words, to the end; the final `done` (or `error`) event's data."""
    t0 = time.perf_counter()
    res = client.post("/chat", json={"message": message, "user_id": user, "stream": True}, buffered=False)
    marks: dict[str, float] = {}
    buffer, last = "", None
    for chunk in res.response:
        now = time.perf_counter() - t0
        marks.setdefault("first_byte", now)
        buffer += chunk.decode() if isinstance(chunk, bytes) else chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            fields = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
            if "event" in fields:
                marks.setdefault(fields["event"], now)
                last = (fields["event"], json.loads(fields["data"]))
    res.close()
    seconds = {k: round(v, 3) for k, v in marks.items()}
    seconds["total"] = round(time.perf_counter() - t0, 2)
    kind, data = last or ("error", {"error": "the stream ended without a final event", "status": 0})
    return {"status": 200 if kind == "done" else data.get("status", 0), "body": data, "seconds": seconds}
