"""A threaded HTTP server on 127.0.0.1 (a free port): the stand-in upstreams of benchmarks and tests."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Loopback:
    """Serves `handler` in a daemon thread until `close`; `url` is its address."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
