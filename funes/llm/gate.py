"""One LLM shared by chat turns and background work: turns go first.

`TurnGate.turn()` wraps a chat turn; background work (card enrichment) waits in `wait_idle` until no turn is
in flight, and holds its request's `Cancel` in `background()`, so a turn that starts cancels it at once.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

POLL_S = 0.25  # how often a waiting background worker looks again at the gate and its stop event


class Cancelled(Exception):
    """A request was cancelled from another thread (a chat turn took the LLM, or the process stops)."""


class Cancel:
    """A request's off switch: `cancel()`, from any thread, runs the hooks the request registered (closing its socket)."""

    def __init__(self):
        self.cancelled = False
        self._hooks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def cancel(self) -> None:
        with self._lock:
            self.cancelled, hooks, self._hooks = True, self._hooks, []
        for hook in hooks:
            _quietly(hook)

    def on_cancel(self, hook: Callable[[], None]) -> None:
        """Run `hook` when cancelled (at once if it already was)."""
        with self._lock:
            if not self.cancelled:
                self._hooks.append(hook)
                return
        _quietly(hook)


def _quietly(hook: Callable[[], None]) -> None:
    try:
        hook()
    except OSError:  # the socket was closed already
        pass


class TurnGate:
    """Chat turns in flight on one LLM; background requests start only between turns and stop when one begins."""

    def __init__(self):
        self._cond = threading.Condition()
        self._turns = 0
        self._last_end = float("-inf")
        self._background: set[Cancel] = set()

    @property
    def busy(self) -> bool:
        return self._turns > 0

    @contextmanager
    def turn(self) -> Iterator[None]:
        """A chat turn: background requests in flight are cancelled, new ones wait until it ends."""
        with self._cond:
            self._turns += 1
            running = list(self._background)
        for cancel in running:
            cancel.cancel()
        try:
            yield
        finally:
            with self._cond:
                self._turns -= 1
                self._last_end = time.monotonic()
                self._cond.notify_all()

    def wait_idle(self, stop: threading.Event, quiet_s: float = 0.0) -> bool:
        """Block until no turn is in flight and none ended within `quiet_s`; False when `stop` is set first."""
        with self._cond:
            while not stop.is_set():
                quiet = quiet_s - (time.monotonic() - self._last_end)
                if self._turns == 0 and quiet <= 0:
                    return True
                self._cond.wait(min(POLL_S, quiet) if self._turns == 0 else POLL_S)
        return False

    @contextmanager
    def background(self, cancel: Cancel) -> Iterator[Cancel]:
        """Background work holding `cancel`: cancelled when a turn starts (at once if one is in flight)."""
        with self._cond:
            self._background.add(cancel)
            busy = self._turns > 0
        if busy:
            cancel.cancel()
        try:
            yield cancel
        finally:
            with self._cond:
                self._background.discard(cancel)
