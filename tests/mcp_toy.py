"""A small MCP server written with the SDK (MCPServer, FastMCP's new name), for the MCP tests.

Run as a script it serves stdio; `serve_http()` serves streamable HTTP on a free loopback port in a thread.
Its tools: echo, divide (an error result for b=0), crash (the process exits), grow (adds a tool and sends
notifications/tools/list_changed), flip (adds or removes a tool again and again, notifying each change). With
TOY_DOWN_FLAG naming an existing file it exits at start, so a test can keep it down.
"""
from __future__ import annotations

import os
import socket
import sys
import threading
import time

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def make_server(name: str = "toy") -> MCPServer:
    server = MCPServer(name)

    @server.tool()
    def echo(text: str) -> str:
        """Repeat the given text back unchanged."""
        return text

    @server.tool()
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        if b == 0:
            raise ToolError("division by zero")  # the SDK passes a ToolError's message on; others it hides
        return a / b

    @server.tool()
    def crash() -> str:
        """Stop the server process at once."""
        os._exit(3)

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Add a tool of that name to this server."""
        def sprout() -> str:
            return f"{name} sprouted"

        server.add_tool(sprout, name=name, description=f"The {name} tool this server grew when asked.")
        await ctx.session.send_tool_list_changed()
        return f"added {name}"

    @server.tool()
    async def flip(times: int, ctx: Context, every_ms: int = 20) -> str:
        """Add or remove the flipper tool `times` times, `every_ms` apart, telling the client of each change."""
        for _ in range(times):
            if "flipper" in {t.name for t in await server.list_tools()}:
                server.remove_tool("flipper")
            else:
                server.add_tool(lambda: "flipped", name="flipper", description="A tool that comes and goes.")
            await ctx.session.send_tool_list_changed()
            await anyio.sleep(every_ms / 1000)
        return f"flipped {times} times"

    return server


def serve_http(name: str = "toyhttp"):
    """Serve `make_server(name)` over streamable HTTP on a free loopback port; (url, uvicorn server) once up."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = make_server(name).streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, name=f"{name}-http", daemon=True).start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}/mcp", server


if __name__ == "__main__":
    flag = os.environ.get("TOY_DOWN_FLAG")
    if flag and os.path.exists(flag):
        sys.exit(1)
    make_server().run("stdio")
