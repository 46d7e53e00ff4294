"""What an MCP client pays with Funes in front of its servers, against the servers connected directly.

    .venv/bin/python bench/mcp_clients.py [--calls 50] [--json] [--dump bench/mcp_servers_tools.json]

Servers: mcp-server-time, mcp-server-git (on a scratch repository) and mcp-server-fetch, over stdio.
Tokens: the `tools/list` a client would load from all three (as JSON) against Funes' own `tools/list` and the
median `find_tools` answer over QUERIES. Tokens are estimated as characters / 4 (tiktoken is not installed;
for JSON with English text that is within ~10-15% of cl100k counts), the same rule for every side.
Latency: p50 of CALLS `get_current_time` calls, the SDK client straight to mcp-server-time, against the same
client calling `call_tool` through Funes over stdio (`python -m funes mcp`) and over HTTP (/mcp).
The three servers' listing is also written as an MCP `tools/list` result, for `funes eval --tools`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

import config  # noqa: E402
from funes.build import build  # noqa: E402
from funes.mcp.client import ServerPool  # noqa: E402
from funes.mcp.config import load_servers  # noqa: E402
from funes.mcp.connection import Timing  # noqa: E402

QUERIES = ["what time is it in Tokyo?", "convert 9:30 London time to Tokyo time", "show the last five commits",
           "what did I change but not stage yet?", "fetch https://example.com and summarise it",
           "create a branch called release", "thanks, that is all"]
WARMUP = 5  # calls before timing starts (imports, first connections)


def tokens(text: str) -> int:
    """Estimated tokens of `text`: characters / 4."""
    return round(len(text) / 4)


def servers_file(folder: Path) -> Path:
    """A servers file for the three servers (git on a fresh repository in `folder`)."""
    repo = folder / "repo"
    repo.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    python = sys.executable
    servers = {"mcpServers": {"time": {"command": python, "args": ["-m", "mcp_server_time"]},
                              "git": {"command": python, "args": ["-m", "mcp_server_git", "--repository", str(repo)]},
                              "fetch": {"command": python, "args": ["-m", "mcp_server_fetch"]}}}
    path = folder / "servers.json"
    path.write_text(json.dumps(servers), encoding="utf-8")
    return path


def listings(path: Path, connect_s: float = 30.0) -> dict[str, list[dict]]:
    """Each server's `tools/list` tools, as a client connected to it directly would load them."""
    pool = ServerPool(load_servers(str(path)), Timing(connect_s, 60.0, 1.0, 5.0), call_timeout_s=30.0).start()
    try:
        pool.wait_for(lambda p: all(c.state.status == "up" for c in p.connections.values()), connect_s)
        return {name: list(c.tools) for name, c in pool.connections.items()}
    finally:
        pool.stop()


def tools_file(listed: dict[str, list[dict]], out: Path) -> None:
    """Write every server's tools as one MCP `tools/list` result (the loaders read that shape)."""
    tools = [tool for server_tools in listed.values() for tool in server_tools]
    out.write_text(json.dumps({"tools": tools}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def find_tools_answers(parts, queries: list[str]) -> dict[str, dict]:
    """Each query's `find_tools` answer: its tokens as the client reads it (the text content), the tools named."""
    answers = {}
    for query in queries:
        answer = parts.mcp_server.find_tools(query)
        answers[query] = {"tokens": tokens(answer.content[0].text),
                          "tools": [t["name"] for t in answer.structured_content["tools"]]}
    return answers


async def p50_ms(call, n: int) -> float:
    """The median wall time of `await call()` over `n` runs after WARMUP, in ms."""
    for _ in range(WARMUP):
        await call()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


async def over(streams_cm, steps):
    """Run `steps(session)` in an initialized SDK session over the transport `streams_cm` opens."""
    async with streams_cm as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await steps(session)


def latencies(path: Path, settings: dict, n: int) -> dict[str, float]:
    """p50 ms of get_current_time: direct, through Funes over stdio, through Funes over HTTP."""
    direct = StdioServerParameters(command=sys.executable, args=["-m", "mcp_server_time"])
    time_only = path.parent / "time_only.json"
    time_only.write_text(json.dumps({"mcpServers": {"time": json.loads(path.read_text())["mcpServers"]["time"]}}))
    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "FUNES_DATA_DIR": settings["DATA_DIR"],
           "FUNES_DATABASE_URL": settings["DATABASE_URL"], "FUNES_MCP_SERVERS": str(time_only),
           "FUNES_PACKS": "[]", "FUNES_ENRICH": "off", "FUNES_LLM_BACKEND": "ollama"}
    funes = StdioServerParameters(command=sys.executable, args=["-m", "funes", "mcp"], env=env, cwd=str(ROOT))
    args = {"timezone": "Asia/Tokyo"}
    through = {"name": "get_current_time", "arguments": args}
    out = {"direct": anyio.run(over, stdio_client(direct), lambda s: p50_ms(
        lambda: s.call_tool("get_current_time", args), n))}
    out["funes_stdio"] = anyio.run(over, stdio_client(funes), lambda s: p50_ms(
        lambda: s.call_tool("call_tool", through), n))
    url, stop = _http(settings, time_only)
    try:
        out["funes_http"] = anyio.run(over, streamable_http_client(url), lambda s: p50_ms(
            lambda: s.call_tool("call_tool", through), n))
    finally:
        stop()
    return {k: round(v, 2) for k, v in out.items()}


def _http(settings: dict, servers: Path):
    """Funes' app behind a real HTTP server on a free loopback port: (url of /mcp, stop)."""
    from werkzeug.serving import make_server

    from funes import create_app

    app = create_app({**settings, "MCP_SERVERS": str(servers)})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        app.extensions["funes"].mcp.stop()
    return f"http://127.0.0.1:{server.server_port}/mcp", stop


def run(n: int, dump: Path | None) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="funes-mcp-bench-"))
    path = servers_file(folder)
    listed = listings(path)
    if dump is not None:
        tools_file(listed, dump)
    settings = {"DATA_DIR": str(Path(config.DEFAULTS["DATA_DIR"]).resolve()), "PACKS": [], "ENRICH": "off",
                "DATABASE_URL": f"sqlite:///{folder}/funes.db", "LLM_BACKEND": "ollama", "MCP_SERVERS": str(path)}
    parts = build(config.load(settings))
    try:
        answers = find_tools_answers(parts, QUERIES)
        own = tokens(json.dumps(parts.mcp_server.list_tools().model_dump(by_alias=True, mode="json",
                                                                         exclude_none=True)))
    finally:
        parts.mcp.stop()
    direct = {name: tokens(json.dumps({"tools": tools})) for name, tools in listed.items()}
    return {"tools": {name: len(tools) for name, tools in listed.items()},
            "tokens": {"tools_list_direct": direct, "tools_list_direct_total": sum(direct.values()),
                       "tools_list_funes": own,
                       "find_tools_median": statistics.median(a["tokens"] for a in answers.values()),
                       "find_tools_each": answers},
            "call_p50_ms": latencies(path, settings, n), "calls": n, "token_rule": "characters / 4"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--dump", type=Path, default=ROOT / "bench" / "mcp_servers_tools.json")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = run(args.calls, args.dump)
    if args.json:
        print(json.dumps(report, indent=1))
        return
    t, p = report["tokens"], report["call_p50_ms"]
    print(f"tools/list of {', '.join(f'{k} ({v} tools)' for k, v in report['tools'].items())}: "
          f"{t['tools_list_direct_total']} tokens ({t['tools_list_direct']}); Funes' tools/list {t['tools_list_funes']}; "
          f"median find_tools answer {t['find_tools_median']} (tokens = {report['token_rule']})")
    print(f"get_current_time p50 over {report['calls']} calls: direct {p['direct']} ms, through Funes over stdio "
          f"{p['funes_stdio']} ms, over HTTP {p['funes_http']} ms")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
