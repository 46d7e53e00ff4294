"""Ollama's /api/chat wire format with scripted replies, for the real `ollama` client (Ollama cannot run here)."""
from __future__ import annotations

from tests.wire import JsonServer


def reply(content: str = "", tool_calls: list[tuple[str, dict]] = (), prompt_tokens: int = 50) -> dict:
    """One scripted /api/chat response body."""
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"function": {"name": n, "arguments": a}} for n, a in tool_calls]
    return {"model": "fake", "created_at": "2026-11-22T00:00:00Z", "message": message, "done": True,
            "done_reason": "stop", "prompt_eval_count": prompt_tokens, "eval_count": 7}


class FakeOllama:
    """Serves `script` in order (then repeats the last step; an int is an error status); `requests` are the bodies."""

    def __init__(self):
        self.script: list[dict | int] = [reply("ok")]
        self._server = JsonServer(self._respond)
        self.url = self._server.url

    @property
    def requests(self) -> list[dict]:
        return [r["json"] for r in self._server.requests]

    def _respond(self, request: dict) -> tuple[int, object]:
        if request["path"] != "/api/chat":  # /api/ps: the readiness probe; the script is for chat turns
            return 200, {"models": []}
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return (step, {"error": "scripted failure"}) if isinstance(step, int) else (200, step)

    def close(self) -> None:
        self._server.close()
