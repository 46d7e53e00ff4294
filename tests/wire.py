"""A tiny real HTTP server for tests: the wire protocols of services that cannot run here
(Ollama, an OpenAI-compatible server, Open-Meteo) are spoken by a callback, and the real clients talk to it."""
from __future__ import annotations

import json
import socket
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

from funes.eval.loopback import Loopback

# respond(request) -> (status, JSON-able body or raw bytes); request = {method, path, query, headers, json}
Responder = Callable[[dict], tuple[int, object]]


class JsonServer:
    """Serves GET and POST on 127.0.0.1 (a free port) with `respond`; keeps every request it saw."""

    def __init__(self, respond: Responder):
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def _serve(self, method: str):
                url = urlparse(self.path)
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                request = {"method": method, "path": url.path, "query": {k: v[0] for k, v in parse_qs(url.query).items()},
                           "headers": dict(self.headers), "json": json.loads(raw) if raw else None}
                server.requests.append(request)
                status, body = respond(request)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client hung up (a cancelled request)
                    pass

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

        self._server = Loopback(Handler)
        self.url = self._server.url

    def close(self) -> None:
        self._server.close()


def closed_port() -> int:
    """A loopback port nothing listens on (a service that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
