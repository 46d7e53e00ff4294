"""MCP both ways: the user's MCP servers as a tool source, and Funes as one MCP server in front of them.

  config.py      the servers file (Claude Desktop's `mcpServers`, VS Code's `servers`) as ServerSpec rows
  connection.py  one server's session: connect, list tools, watch it, restart it with backoff (async)
  client.py      ServerPool: a background thread whose asyncio loop owns every session, with a sync facade
  source.py      the servers' tools as bare cards (source mcp:<server>) whose handlers call over MCP
  server.py      what Funes offers as a server: find_tools, call_tool and pinned tools (sync, SDK types)
  http.py        the streamable-HTTP transport at /mcp (stateless JSON-response mode) as a Flask blueprint
  stdio.py       the stdio transport (`python -m funes mcp`) on the SDK's low-level Server
"""
