"""The MCP servers' tools as bare cards (source mcp:<server>), runnable while their server is up.

A card's handler calls the server over MCP: the text content joined, or the structured content when the
server gives one; `isError` becomes a ToolError carrying the server's message. While the server is down the
card stays routable and says why it cannot run (`unavailable`), instead of disappearing.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from funes.errors import RegistryError, ToolError, ToolNotRunnable
from funes.tools.registry import Tool, card_from_dict

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class McpTool(Tool):
    """A tool of an MCP server; `status()` says why its server cannot run it now (None while it can)."""

    server: str = field(default="", compare=False)
    remote_name: str = field(default="", compare=False)  # its name on the server (the card's may be namespaced)
    status: Callable[[], str | None] | None = field(default=None, compare=False, repr=False)

    @property
    def unavailable(self) -> str | None:
        return self.status() if self.status is not None else None

    @property
    def runnable(self) -> bool:
        return self.handler is not None and self.unavailable is None

    def run(self, **arguments: Any) -> Any:
        why = self.unavailable
        if why is not None:
            raise ToolNotRunnable(why)
        return super().run(**arguments)

    def no_runner(self) -> str:
        return self.unavailable or super().no_runner()


def cards(pool) -> list[McpTool]:
    """Every listed tool of every server in `pool` (a ServerPool), in the servers file's order."""
    out = []
    for name, connection in pool.connections.items():
        source = f"mcp:{name}"
        for i, data in enumerate(connection.tools):
            try:
                card = card_from_dict(data, f"{source} tools[{i}]", source)
            except RegistryError as e:  # one malformed tool must not hide the server's others
                log.warning("skipping a tool: %s", e)
                continue
            fields = {f.name: getattr(card, f.name) for f in dataclasses.fields(Tool)}
            fields["handler"] = _handler(pool, name, card.name)
            out.append(McpTool(**fields, server=name, remote_name=card.name, status=connection.unavailable))
    return out


def _handler(pool, server: str, name: str) -> Callable[..., Any]:
    def call(**arguments: Any) -> Any:
        return result_value(pool.call(server, name, arguments), f"{name} (MCP server {server!r})")

    call.__name__ = name
    return call


def result_value(result: types.CallToolResult, what: str) -> Any:
    """The structured content when given, else the text content joined; an error result as a ToolError."""
    text = "\n".join(_text(block) for block in result.content)
    if result.is_error:
        raise ToolError(f"{what} failed: {text.strip() or 'the server gave no message'}")
    return result.structured_content if result.structured_content is not None else text


def _text(block: Any) -> str:
    """One content block as text; images, audio and resources are named, not inlined."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.EmbeddedResource) and isinstance(getattr(block.resource, "text", None), str):
        return block.resource.text
    kind = getattr(block, "mime_type", None) or getattr(block, "type", "content")
    uri = getattr(block, "uri", None)
    return f"[{kind}{' ' + uri if uri else ''}]"
