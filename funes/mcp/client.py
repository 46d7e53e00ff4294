"""The MCP servers of one process: a daemon thread's asyncio loop owns every session; Flask threads call in.

The SDK is async and the service is sync: `call` hands a coroutine to the loop (`run_coroutine_threadsafe`)
and waits for it under the tool timeout. MCP errors become Funes errors here and nowhere else.
`version` counts changes to the servers' tool lists (not to their up/down state), so the registry is re-read
only when there is something new to route.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from funes.errors import ToolError, ToolNotRunnable
from funes.mcp.config import ServerSpec
from funes.mcp.connection import Connection, Lost, Timing
from funes.mcp.source import cards

log = logging.getLogger(__name__)
CALL_GRACE_S = 1.0  # past the tool timeout, how long the loop may take to hand back the SDK's own timeout error
STOP_S = 10.0       # for stopping every server at exit (each stdio server gets ~4 s to exit, in parallel)


class ServerPool:
    """Keeps each configured MCP server connected and runs tool calls on it."""

    def __init__(self, specs: list[ServerSpec], timing: Timing, call_timeout_s: float):
        self.timing, self.call_timeout_s = timing, call_timeout_s
        self.connections = {spec.name: Connection(spec, timing, self._changed) for spec in specs}
        self.version = 0
        self._listed: tuple = ()
        self._changes = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ServerPool:
        """Start the loop and every server, then wait until each has answered or failed, at most the connect timeout."""
        if self._loop is not None:
            return self
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="funes-mcp", daemon=True)
        self._thread.start()
        for connection in self.connections.values():
            asyncio.run_coroutine_threadsafe(connection.keep(), self._loop)
        self.wait_settled(self.timing.connect_s)
        return self

    def cards(self) -> list:
        """Every listed tool of every server as a card (an McpTool), in the servers file's order."""
        return cards(self)

    def wait_settled(self, timeout_s: float) -> bool:
        """Whether every server came up or failed at least once within `timeout_s` (start-up, tests)."""
        deadline = time.monotonic() + timeout_s
        with self._changes:
            while not all(c.tried for c in self.connections.values()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changes.wait(left)
        return True

    def wait_for(self, predicate, timeout_s: float) -> bool:
        """Whether `predicate(pool)` became true within `timeout_s`, checked at each change (tests, benches)."""
        deadline = time.monotonic() + timeout_s
        with self._changes:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changes.wait(left)
        return True

    def call(self, server: str, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Run tool `name` of `server`: ToolNotRunnable while it is down, ToolError when the call fails."""
        if self._loop is None:
            raise ToolNotRunnable(f"MCP server {server!r} is not started")
        future = asyncio.run_coroutine_threadsafe(
            self.connections[server].call(name, arguments, self.call_timeout_s), self._loop)
        try:
            return future.result(self.call_timeout_s + CALL_GRACE_S)
        except FutureTimeout:
            future.cancel()
            raise ToolError(f"{name} on MCP server {server!r} did not answer within "
                            f"{self.call_timeout_s:g} s") from None
        except Lost as e:
            raise ToolNotRunnable(str(e)) from None
        except MCPError as e:
            if e.code == types.REQUEST_TIMEOUT:
                raise ToolError(f"{name} on MCP server {server!r} did not answer within "
                                f"{self.call_timeout_s:g} s") from None
            raise ToolError(f"{name} on MCP server {server!r} failed: {e.message}") from None

    def states(self) -> list[dict[str, Any]]:
        """Each server's state, for health pages and the CLI."""
        return [{"name": name, "transport": c.spec.transport, "target": c.spec.describe(), "status": c.state.status,
                 "reason": c.unavailable(), "tools": len(c.tools), "starts": c.starts}
                for name, c in self.connections.items()]

    def health(self) -> str:
        """"ok" when every server is up, else which are not and why (a readiness check that only degrades)."""
        down = [c.unavailable() for c in self.connections.values() if c.state.status != "up"]
        return "ok" if not down else "degraded: " + "; ".join(down)

    def stop(self) -> None:
        """Stop every server (their processes end) and the loop."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(_cancel_all(), loop).result(STOP_S)
        except Exception:  # noqa: BLE001  (at exit: a server that will not stop is not worth a traceback)
            log.warning("MCP servers did not all stop within %.0f s", STOP_S)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(STOP_S)

    def _changed(self) -> None:
        """A server's state or tools changed (on the loop): count a new version when the tool lists differ."""
        with self._changes:
            listed = tuple((name, c.tools) for name, c in self.connections.items())
            if listed != self._listed:
                self._listed, self.version = listed, self.version + 1
            self._changes.notify_all()


async def _cancel_all() -> None:
    """Cancel every task on the loop but this one, and wait for them to unwind (stdio servers are stopped)."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
