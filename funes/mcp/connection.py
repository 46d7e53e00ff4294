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
from mcp.shared.message import SessionMessage
from mcp_types.methods import validate_server_result
from pydantic import ValidationError

from funes.mcp.config import ServerSpec

log = logging.getLogger(__name__)
MAX_PAGES = 100  # tools/list pages read from one server: a paginator that never ends cannot hang the listing
# A server's tools are re-read at most this often, the newest list each time: one whose list flips every few ms
# must not have the service rebuild its router as often (a second is nothing to wait for a new tool).
RELIST_GAP_S = 1.0
# The SDK logs a traceback for each stdout line that is not JSON-RPC; `_on_message` says it in one line instead.
_SDK_PARSE_ERROR = "Failed to parse JSONRPC message from server"
logging.getLogger("mcp.client.stdio").addFilter(lambda record: record.msg != _SDK_PARSE_ERROR)


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
        self._listed_at = float("-inf")  # time.monotonic() of the last listing
        self._skipped: set[str] = set()   # tools already warned about as unreadable: warned once, not per listing

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
            session = ClientSession(inbox, write, message_handler=self._on_message)
            pump.start_soon(self._pump, read, inbox_writer, session)
            try:
                async with session:
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
                wait = self._listed_at + RELIST_GAP_S - time.monotonic()
                if wait > 0:  # the changes meanwhile are read at once, then
                    with anyio.move_on_after(wait):
                        await self._wake.wait()
                    continue
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
        self._listed_at = time.monotonic()
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

    async def _pump(self, read, inbox, session: ClientSession) -> None:
        """Hand the transport's messages to the session, and notice at once when they end."""
        try:
            async with inbox:
                async for item in read:
                    # the version the SDK assumes before a handshake, as no tools are listed before one
                    await inbox.send(self._readable(item, session.protocol_version or "2025-11-25"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        self.lose("the server process exited" if not self.spec.url else "the server closed the connection")

    def _readable(self, item: SessionMessage | Exception, version: str) -> SessionMessage | Exception:
        """`item`, a tools/list page without the tools the SDK would reject: it rejects the whole page for one."""
        message = item.message if isinstance(item, SessionMessage) else None
        # only a tools/list result has a top-level list of tools (the request ids are the SDK's own)
        if not isinstance(message, types.JSONRPCResponse) or not isinstance(message.result.get("tools"), list):
            return item
        page = message.result
        kept = [tool for i, tool in enumerate(page["tools"]) if self._readable_tool(page, i, version)]
        if len(kept) == len(page["tools"]):
            return item
        return SessionMessage(message.model_copy(update={"result": {**page, "tools": kept}}), item.metadata)

    def _readable_tool(self, page: dict[str, Any], i: int, version: str) -> bool:
        """Whether tool `i` of a page passes the SDK's checks; a failing one is warned about once, by name."""
        tool = page["tools"][i]
        try:
            validate_server_result("tools/list", version, {**page, "tools": [tool]})
            types.Tool.model_validate(tool, by_name=False)
            return True
        except (ValidationError, ValueError) as e:
            name = tool.get("name") if isinstance(tool, dict) else None
            name = repr(name) if isinstance(name, str) else f"number {i + 1}"
            if name not in self._skipped:
                self._skipped.add(name)
                log.warning("MCP server %s: skipping tool %s: %s", self.spec.name, name, one_line(e))
            return False

    async def _on_message(self, message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._relist = True
            if self._wake is not None:
                self._wake.set()
        elif isinstance(message, Exception):  # one message spoiled, not the session
            log.warning("MCP server %s sent something unreadable: %s", self.spec.name, one_line(message))

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        spec = self.spec
        if spec.url:
            timeout = httpx2.Timeout(self.timing.connect_s, read=None)  # each request has its own read timeout
            async with httpx2.AsyncClient(headers=spec.headers, timeout=timeout) as client, \
                    streamable_http_client(spec.url, http_client=client) as streams:
                yield streams
        else:
            # "replace": a byte that is not UTF-8 spoils one message; "strict" would end the session for good
            params = StdioServerParameters(command=spec.command, args=list(spec.args), env=spec.env or None,
                                           cwd=spec.cwd, encoding_error_handler="replace")
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
    return one_line(error)


def one_line(error: BaseException) -> str:
    """An exception as one short line: a pydantic error as where and what of its first error, with its input."""
    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        got = " ".join(str(first.get("input", "")).split())
        return f"{where + ': ' if where else ''}{first['msg']} (got {got[:80]!r})"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
