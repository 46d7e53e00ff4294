"""MCP commands: `mcp` serves Funes over stdio to an MCP client; `mcp-servers` shows the configured servers."""
from __future__ import annotations

import contextlib
import json
import os
import sys

import click

from funes.cli import _parts, cli, cli_errors


@cli.command("mcp")
@click.pass_context
@cli_errors
def mcp_cmd(ctx: click.Context) -> None:
    """Serve Funes as an MCP server over stdio: find_tools, call_tool and MCP_PINNED_TOOLS.

    Point Claude Desktop or VS Code at `python -m funes mcp` and list your other MCP servers in FUNES_MCP_SERVERS'
    file: the client then sees two tools, and Funes routes among all of them (docs/mcp.md)."""
    from funes.mcp.stdio import serve

    with _stdout_to_stderr():  # loading models may print; stdout is the protocol's
        parts = _parts(ctx)
        tools = parts.mcp_server  # packs bound, MCP servers started
        parts.router  # noqa: B018  (built before the client's first request)
    serve(tools)


@cli.command("mcp-servers")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per server.")
@click.pass_context
@cli_errors
def mcp_servers(ctx: click.Context, as_json: bool) -> None:
    """Connect to the servers of FUNES_MCP_SERVERS and show each one's state, tools and, when down, why."""
    parts = _parts(ctx)
    if parts.mcp is None:
        raise click.ClickException("no MCP servers configured: set FUNES_MCP_SERVERS to a servers file")
    try:
        for state in parts.mcp.states():
            if as_json:
                click.echo(json.dumps(state))
            else:
                why = f"  ({state['reason']})" if state["reason"] else ""
                click.echo(f"{state['name']}  {state['transport']}  {state['status']}  {state['tools']} tools{why}")
    finally:
        parts.mcp.stop()


@contextlib.contextmanager
def _stdout_to_stderr():
    """Point fd 1 (and sys.stdout) at stderr meanwhile, whatever writes to it: Python or a native library."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
