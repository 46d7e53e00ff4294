"""Run the app under gunicorn from `python -m funes serve`."""
from __future__ import annotations

import time

from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter
from gunicorn.glogging import Logger

PROBES = ("/healthz", "/readyz")  # polled every few seconds (and by serve's own "ready" check): not news


class _QuietProbes(Logger):
    """gunicorn's access log without the health probes' lines."""

    def access(self, resp, req, environ, request_time) -> None:
        if environ.get("PATH_INFO") not in PROBES:
            super().access(resp, req, environ, request_time)


class _RollingArbiter(Arbiter):
    """gunicorn's master, but a reload (HUP) stops the old workers only once the new ones have loaded the app.

    gunicorn stops them at once, and for the ~10 s new workers take to load their models nothing answered,
    /healthz included. A worker has loaded once it beats (its heartbeat file's time changes after the load)."""

    _reloading_after: int | None = None  # worker age before the reload: younger workers are the reload's

    def reload(self) -> None:
        self._reloading_after = self.worker_age
        try:
            super().reload()
        finally:
            self._reloading_after = None

    def spawn_worker(self):
        pid = super().spawn_worker()  # the child never returns here
        self.WORKERS[pid].funes_unbeaten = self.WORKERS[pid].tmp.last_update()
        return pid

    def manage_workers(self) -> None:
        if self._reloading_after is not None:
            self._await_new_workers()
        super().manage_workers()

    def _await_new_workers(self) -> None:
        """Wait until the reload's workers have all loaded, one of them died (gunicorn's own handling), or timeout."""
        deadline = time.monotonic() + self.cfg.timeout
        while time.monotonic() < deadline:
            new = [w for w in self.WORKERS.values() if w.age > self._reloading_after]
            if len(new) < self.num_workers or all(w.tmp.last_update() != w.funes_unbeaten for w in new):
                return
            self.reap_workers()
            time.sleep(0.2)


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

    def run(self) -> None:
        _RollingArbiter(self).run()


def run(host: str, port: int, workers: int, threads: int) -> None:
    """Serve until interrupted; each worker builds its own app (encoder, router, database engine)."""
    _Gunicorn({"bind": f"{host}:{port}", "workers": workers, "threads": threads, "worker_class": "gthread",
               "timeout": 600, "accesslog": "-", "errorlog": "-", "logger_class": _QuietProbes,
               "preload_app": False,
               # gunicornc is not used, and one socket per user would make two servers on a machine collide.
               "control_socket_disable": True}).run()
