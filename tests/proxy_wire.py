"""Upstreams for the proxy tests: a small real HTTP server that records what it got and answers in
Ollama's (NDJSON) or OpenAI's (SSE) wire format, streamed in chunks or whole."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from funes.eval.loopback import Loopback


@dataclass
class Reply:
    status: int = 200
    content_type: str = "application/json"
    chunks: list[bytes] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)


def ollama_stream(*parts: dict) -> Reply:
    """Ollama's streamed /api/chat: one JSON object per line."""
    return Reply(content_type="application/x-ndjson", chunks=[json.dumps(p).encode() + b"\n" for p in parts])


def openai_stream(*parts: dict) -> Reply:
    """OpenAI's streamed chat completion: server-sent events ending in [DONE]."""
    events = [f"data: {json.dumps(p)}\n\n".encode() for p in parts] + [b"data: [DONE]\n\n"]
    return Reply(content_type="text/event-stream", chunks=events)


def whole(body: dict, status: int = 200) -> Reply:
    return Reply(status=status, chunks=[json.dumps(body).encode()])


class Upstream:
    """Serves `replies[path]` (the last one repeats); `received` holds every request's method, path, headers, body."""

    def __init__(self):
        self.replies: dict[str, list[Reply]] = {}
        self.received: list[dict] = []
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # chunked responses: a stream arrives piece by piece

            def log_message(self, *args):
                pass

            def _serve(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                upstream.received.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                          "raw": raw, "json": json.loads(raw) if raw else None})
                queue = upstream.replies.get(self.path) or [whole({"error": "no reply scripted"}, 404)]
                reply = queue.pop(0) if len(queue) > 1 else queue[0]
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in reply.chunks:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            do_GET = do_POST = _serve

        self._server = Loopback(Handler)
        self.url = self._server.url

    def close(self) -> None:
        self._server.close()
