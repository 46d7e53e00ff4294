"""MCP's stdio transport for `python -m funes mcp`, on the SDK's low-level Server.

The SDK owns the wire (handshake, framing, both protocol eras); its two handlers hand the request to
funes.mcp.server in a worker thread, since routing and tools are sync. While serving, the SDK points fd 1 at
stderr, so a stray print cannot corrupt the protocol.
"""
from __future__ import annotations

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from funes.errors import BadRequest
from funes.mcp.server import INSTRUCTIONS, FunesTools
from funes.version import version


def serve(tools: FunesTools) -> None:
    """Serve `tools` over this process's stdin and stdout until the client closes them."""
    anyio.run(_serve, _server(tools))


def _server(tools: FunesTools) -> Server:
    async def list_tools(ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return await anyio.to_thread.run_sync(tools.list_tools)

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            return await anyio.to_thread.run_sync(tools.call, params.name, params.arguments)
        except BadRequest as e:  # a name this server does not offer: a protocol error, as over HTTP
            raise MCPError(types.INVALID_PARAMS, str(e)) from None

    return Server("funes", version=version(), instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool)


async def _serve(server: Server) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
