"""One MCP server kept connected: start it, list its tools, watch it, restart it with exponential backoff.

Everything here runs on the pool's event loop (funes.mcp.client); other threads only read `state` and `tools`,
each replaced whole, never mutated. A server is lost when its output ends (the process died), a ping or the
first listing goes unanswered within the connect timeout (it hangs), or a call finds the connection closed.
"""
from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from funes.mcp.config import ServerSpec

log = logging.getLogger(__name__)
MAX_PAGES = 100  # tools/list pages read from one server: a paginator that never ends cannot hang the listing


@dataclass(frozen=True)
class Timing:
    """The pool's tuning numbers (MCP_* settings)."""

    connect_s: float    # to start, initialize and list; also how long a ping may take
    ping_s: float       # between liveness pings of a quiet server
    retry_s: float      # first wait before a restart; doubles per failure
    retry_max_s: float  # longest wait between two restarts


@dataclass(frozen=True)
class State:
    status: str                    # connecting | up | down
    reason: str = ""               # why it is not up
    retry_at: float | None = None  # time.monotonic() of the next attempt, while down


class Lost(Exception):
    """The session ended or could not start; the message says why, for people."""


class Connection:
    """One server's session, restarted whenever it is lost; `call` runs a tool on it."""

    def __init__(self, spec: ServerSpec, timing: Timing, on_change: Callable[[], None]):
        self.spec, self.timing = spec, timing
        self.state = State("connecting", "starting")
        self.tools: tuple[dict[str, Any], ...] = ()  # the last listing, as MCP JSON; kept while the server is down
        self.starts = 0      # sessions that came up
        self.tried = False   # the first attempt is over, up or down (start-up waits for this, bounded)
        self._on_change = on_change
        self._session: ClientSession | None = None
        self._wake: anyio.Event | None = None
        self._lost: str | None = None
        self._relist = False
        self._up_at: float | None = None  # time.monotonic() the current session came up

    def unavailable(self) -> str | None:
        """Why this server's tools cannot run now, or None when they can."""
        state = self.state
        if state.status == "up":
            return None
        retry = f"; next attempt in {max(0.0, state.retry_at - time.monotonic()):.0f} s" if state.retry_at else ""
        return f"MCP server {self.spec.name!r} is {state.status}: {state.reason}{retry}"

    async def keep(self) -> None:
        """Connect, serve until the session is lost, wait, connect again: until cancelled."""
        delay = self.timing.retry_s
        while True:
            self._up_at = None
            try:
                reason = await self._run_once()
            except Exception as e:  # noqa: BLE001  (whatever failed, the server is down and is retried)
                reason = self._lost or describe(e, self.spec)  # "the process exited" over "connection closed"
            if self._up_at is not None and time.monotonic() - self._up_at > self.timing.ping_s:
                delay = self.timing.retry_s  # it ran well for a while: a fresh failure is retried soon
            self._set(State("down", reason, time.monotonic() + delay))
            log.warning("MCP server %s is down (%s); restarting in %.0f s", self.spec.name, reason, delay)
            await anyio.sleep(delay)
            delay = min(delay * 2, self.timing.retry_max_s)
            self._set(State("connecting", f"restarting after: {reason}"))

    async def _run_once(self) -> str:
        """One session from start to loss; the reason it was lost."""
        self._lost, self._relist = None, False
        async with self._transport() as (read, write), anyio.create_task_group() as pump:
            inbox_writer, inbox = anyio.create_memory_object_stream(0)
            pump.start_soon(self._pump, read, inbox_writer)
            try:
                async with ClientSession(inbox, write, message_handler=self._on_message) as session:
                    with anyio.move_on_after(self.timing.connect_s) as handshake:
                        await session.initialize()
                        await self._list(session)
                    if handshake.cancelled_caught:
                        reason = self._lost or f"no answer to initialize within {self.timing.connect_s:g} s"
                        self._set(State("down", reason))  # now, not once the process is stopped (seconds)
                        raise Lost(reason)
                    self._session, self.starts, self._up_at = session, self.starts + 1, time.monotonic()
                    self._set(State("up"))
                    log.info("MCP server %s is up with %d tools", self.spec.name, len(self.tools))
                    return await self._watch(session)
            finally:
                self._session = None
                pump.cancel_scope.cancel()

    async def _watch(self, session: ClientSession) -> str:
        """Wait for a loss, a tools/list_changed, or the next ping; the reason once lost."""
        while True:
            self._wake = anyio.Event()
            if self._lost:
                return self._lost
            if self._relist:
                self._relist = False
                with anyio.move_on_after(self.timing.connect_s) as listing:
                    await self._list(session)
                if listing.cancelled_caught:
                    return f"no answer to tools/list within {self.timing.connect_s:g} s"
                continue
            with anyio.move_on_after(self.timing.ping_s):
                await self._wake.wait()
                continue
            with anyio.move_on_after(self.timing.connect_s) as ping:
                await session.send_ping()
            if ping.cancelled_caught:
                return self._lost or f"no answer to ping within {self.timing.connect_s:g} s"

    async def _list(self, session: ClientSession) -> None:
        """Read every page of the server's tools; a changed list tells the pool."""
        tools, cursor = [], None
        for _ in range(MAX_PAGES):
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools += [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        if tuple(tools) != self.tools:
            self.tools = tuple(tools)
            self._on_change()

    async def call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> types.CallToolResult:
        """Run one tool; MCPError as the server or the SDK raised it (CONNECTION_CLOSED also loses the session)."""
        session = self._session
        if session is None or self.state.status != "up":
            raise Lost(self.unavailable() or f"MCP server {self.spec.name!r} is not connected")
        try:
            return await session.call_tool(name, arguments, read_timeout_seconds=timeout_s)
        except MCPError as e:
            if e.code == types.CONNECTION_CLOSED:
                self.lose(f"the connection closed during a call to {name}")
            raise

    def lose(self, reason: str) -> None:
        """End the session (on the loop): its watcher returns and the server is restarted."""
        if self._lost is None:
            self._lost = reason
        if self._wake is not None:
            self._wake.set()

    async def _pump(self, read, inbox) -> None:
        """Hand the transport's messages to the session, and notice at once when they end."""
        try:
            async with inbox:
                async for item in read:
                    await inbox.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        self.lose("the server process exited" if not self.spec.url else "the server closed the connection")

    async def _on_message(self, message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist = True
            if self._wake is not None:
                self._wake.set()
        elif isinstance(message, Exception):
            log.warning("MCP server %s sent something unreadable: %s", self.spec.name, message)

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        spec = self.spec
        if spec.url:
            timeout = httpx2.Timeout(self.timing.connect_s, read=None)  # each request has its own read timeout
            async with httpx2.AsyncClient(headers=spec.headers, timeout=timeout) as client, \
                    streamable_http_client(spec.url, http_client=client) as streams:
                yield streams
        else:
            params = StdioServerParameters(command=spec.command, args=list(spec.args), env=spec.env or None,
                                           cwd=spec.cwd)
            async with stdio_client(params) as streams:
                yield streams

    def _set(self, state: State) -> None:
        self.state = state
        self.tried = self.tried or state.status != "connecting"
        self._on_change()


def describe(error: BaseException, spec: ServerSpec) -> str:
    """An exception (the first leaf of an exception group) as one line for people."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, Lost):
        return str(error)
    if isinstance(error, FileNotFoundError) and not spec.url:
        return f"cannot start {spec.command!r}: no such command or file"
    if isinstance(error, MCPError):
        return f"MCP error {error.code}: {error.message}"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
