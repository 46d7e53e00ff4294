"""A tiny real HTTP server speaking Ollama's /api/chat wire format with scripted replies.

Ollama cannot be installed here; the real `ollama` client talks to this instead.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def reply(content: str = "", tool_calls: list[tuple[str, dict]] = (), prompt_tokens: int = 50) -> dict:
    """One scripted /api/chat response body."""
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"function": {"name": n, "arguments": a}} for n, a in tool_calls]
    return {"model": "fake", "created_at": "2026-11-22T00:00:00Z", "message": message, "done": True,
            "done_reason": "stop", "prompt_eval_count": prompt_tokens, "eval_count": 7}


class FakeOllama:
    """Serves `script` in order (then repeats the last one); records every request body."""

    def __init__(self):
        self.script: list[dict | int] = [reply("ok")]
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append(body)
                step = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                status, payload = (step, {"error": "scripted failure"}) if isinstance(step, int) else (200, step)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
