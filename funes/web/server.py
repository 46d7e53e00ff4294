"""Run the app under gunicorn from `python -m funes serve`."""
from __future__ import annotations

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger

PROBES = ("/healthz", "/readyz")  # polled every few seconds (and by serve's own "ready" check): not news


class _QuietProbes(Logger):
    """gunicorn's access log without the health probes' lines."""

    def access(self, resp, req, environ, request_time) -> None:
        if environ.get("PATH_INFO") not in PROBES:
            super().access(resp, req, environ, request_time)


class _Gunicorn(BaseApplication):
    def __init__(self, options: dict):
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        from funes import create_app

        return create_app()


def run(host: str, port: int, workers: int, threads: int) -> None:
    """Serve until interrupted; each worker builds its own app (encoder, router, database engine)."""
    _Gunicorn({"bind": f"{host}:{port}", "workers": workers, "threads": threads, "worker_class": "gthread",
               "timeout": 600, "accesslog": "-", "errorlog": "-", "logger_class": _QuietProbes,
               "preload_app": False,
               # gunicornc is not used, and one socket per user would make two servers on a machine collide.
               "control_socket_disable": True}).run()
