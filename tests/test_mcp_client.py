"""MCP servers as a tool source: real servers (mcp-server-time, mcp-server-git, a toy SDK server over stdio and
over streamable HTTP) started by Funes, beside broken ones (a command that does not exist, one that hangs)."""
import json
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

from funes import create_app
from funes.errors import RegistryError
from funes.mcp.client import ServerPool
from funes.mcp.config import ServerSpec, load_servers
from funes.mcp.connection import Timing
from tests import mcp_toy
from tests.ollama_wire import FakeOllama

CONNECT_S = 8.0  # the servers' connect timeout here: the hanging one holds start-up this long, no longer
HANG = "import sys\nfor line in sys.stdin:\n    pass\n"  # reads requests, never answers


@pytest.fixture(scope="module")
def world(tmp_path_factory, factory):
    """One app over every kind of server; the toy stdio server can be kept down with its flag file."""
    tmp = tmp_path_factory.mktemp("mcp-client")
    repo = tmp / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "notes.txt").write_text("hello\n")
    url, http_server = mcp_toy.serve_http("toyhttp")
    flag = tmp / "toy-down"
    servers = {"mcpServers": {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "Etc/UTC"]},
        "git": {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repo)]},
        "toy": {"command": sys.executable, "args": [mcp_toy.__file__], "env": {"TOY_DOWN_FLAG": str(flag)}},
        "toyhttp": {"type": "http", "url": url},
        "ghost": {"command": "no-such-mcp-server-here"},
        "hang": {"command": sys.executable, "args": ["-c", HANG]},
    }}
    path = tmp / "servers.json"
    path.write_text(json.dumps(servers))
    ollama = FakeOllama()
    app = create_app({"DATA_DIR": str(tmp), "DATABASE_URL": f"sqlite:///{tmp}/funes.db", "LLM_BACKEND": "ollama",
                      "OLLAMA_HOST": ollama.url, "OLLAMA_MODEL": "fake", "MCP_SERVERS": str(path),
                      "MCP_CONNECT_TIMEOUT": CONNECT_S, "MCP_RETRY_S": 0.3, "MCP_RETRY_MAX_S": 1.0, "ENRICH": "off"},
                     encoder=factory.encoder)
    parts = app.extensions["funes"]
    yield {"app": app, "client": app.test_client(), "parts": parts, "pool": parts.mcp, "flag": flag,
           "repo": repo}
    parts.mcp.stop()
    http_server.should_exit = True
    ollama.close()


def _tools(client) -> dict:
    return {t["name"]: t for t in client.get("/tools").get_json()["tools"]}


def _call(client, name, arguments):
    """call_tool through Funes' own MCP endpoint: the structured result, or the error text."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "call_tool", "arguments": {"name": name, "arguments": arguments}}}
    result = client.post("/mcp", json=body).get_json()["result"]
    text = result["content"][0]["text"]
    return (text, True) if result.get("isError") else (result.get("structuredContent", text), False)


def test_start_up_waits_for_the_servers_at_most_their_connect_timeout():
    specs = [ServerSpec("time", sys.executable, ("-m", "mcp_server_time")), ServerSpec("hang", sys.executable,
                                                                                      ("-c", HANG))]
    pool = ServerPool(specs, Timing(connect_s=4.0, ping_s=15.0, retry_s=1.0, retry_max_s=2.0), call_timeout_s=5.0)
    t0 = time.monotonic()
    try:
        pool.start()
        took = time.monotonic() - t0
        assert 4.0 <= took < 5.5  # the hanging server held it the connect timeout, and no longer
        assert pool.connections["time"].state.status == "up"  # the other came up meanwhile
        assert pool.connections["hang"].state.status != "up"
    finally:
        pool.stop()


def test_each_servers_tools_join_the_registry_with_their_source(world):
    tools = _tools(world["client"])
    assert tools["get_current_time"]["source"] == "mcp:time" and tools["get_current_time"]["runnable"]
    assert tools["convert_time"]["source"] == "mcp:time"
    assert tools["git_status"]["source"] == "mcp:git"
    assert tools["get_weather"]["source"] == "pack:assistant"  # the packs are still there


def test_a_name_another_server_already_uses_is_namespaced(world):
    tools = _tools(world["client"])
    assert tools["echo"]["source"] == "mcp:toy"
    assert tools["toyhttp__echo"]["source"] == "mcp:toyhttp"  # the HTTP server's echo, served as well
    # the SDK's servers wrap a plain return value as structured content {"result": ...}
    assert _call(world["client"], "toyhttp__echo", {"text": "over http"}) == ({"result": "over http"}, False)


def test_route_sends_the_time_in_tokyo_to_the_time_server(world):
    decision = world["client"].post("/route", json={"messages": "what time is it in Tokyo?"}).get_json()
    # the gate picks the closest card: here convert_time, the time server's other tool (a known miss)
    assert decision["selected"] and set(decision["selected"]) <= {"get_current_time", "convert_time"}


def test_calling_the_time_tool_through_funes_gives_the_real_time(world):
    result, failed = _call(world["client"], "get_current_time", {"timezone": "Asia/Tokyo"})
    assert not failed and result["timezone"] == "Asia/Tokyo"
    then = datetime.fromisoformat(result["datetime"])
    assert then.utcoffset() == timedelta(hours=9)
    assert abs(then - datetime.now(timezone.utc)) < timedelta(minutes=2)


def test_the_git_server_reads_the_test_repository(world):
    text, failed = _call(world["client"], "git_status", {"repo_path": str(world["repo"])})
    assert not failed and "notes.txt" in text  # untracked, as `git status` says


def test_a_tool_error_is_a_clear_error_and_the_server_keeps_serving(world):
    text, failed = _call(world["client"], "divide", {"a": 1, "b": 0})
    assert failed and "division by zero" in text and "MCP server 'toy'" in text
    assert _call(world["client"], "divide", {"a": 6, "b": 3}) == ({"result": 2.0}, False)


def test_invalid_arguments_never_reach_the_server(world):
    text, failed = _call(world["client"], "get_current_time", {"timezone": 5})
    assert failed and text.startswith("invalid arguments for get_current_time: timezone:")
    text, failed = _call(world["client"], "get_current_time", {})
    assert failed and "'timezone' is a required property" in text


def test_an_unknown_name_is_an_error_naming_the_closest_tool(world):
    text, failed = _call(world["client"], "get_curent_time", {"timezone": "UTC"})
    assert failed and "no tool named 'get_curent_time'" in text and "'get_current_time'" in text


def test_broken_servers_degrade_readiness_without_failing_it(world):
    response = world["client"].get("/readyz")
    state = response.get_json()
    assert response.status_code == 200 and state["status"] == "ready"
    mcp = state["checks"]["mcp"]
    assert mcp.startswith("degraded: ") and "'time'" not in mcp
    assert "'ghost'" in mcp and "cannot start 'no-such-mcp-server-here': no such command or file" in mcp
    assert world["pool"].wait_for(lambda p: "no answer to initialize within 8 s" in (
        p.connections["hang"].state.reason or ""), 2 * CONNECT_S)
    assert "ghost" not in json.dumps(_tools(world["client"]))  # never up: it has no tools to show


def test_a_server_that_dies_is_shown_down_with_its_reason_then_restarted(world):
    client, pool, flag = world["client"], world["pool"], world["flag"]
    flag.touch()  # it may not come back until the flag goes
    text, failed = _call(client, "crash", {})
    assert failed and "crash" in text
    assert pool.wait_for(lambda p: p.connections["toy"].state.status == "down", 10)
    echo = _tools(client)["echo"]
    assert echo["runnable"] is False and "MCP server 'toy' is" in echo["not_runnable"]  # GET /tools says why
    text, failed = _call(client, "echo", {"text": "anyone?"})
    assert failed and "MCP server 'toy' is" in text and "exited" in text
    found = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "find_tools", "arguments": {"query": "repeat the given text back unchanged"}}}).get_json()
    listed = {t["name"]: t for t in found["result"]["structuredContent"]["tools"]}
    if "echo" in listed:
        assert listed["echo"]["runnable"] is False and "MCP server 'toy'" in listed["echo"]["unavailable"]
    assert _call(client, "get_current_time", {"timezone": "UTC"})[1] is False  # the others serve on
    flag.unlink()
    assert pool.wait_for(lambda p: p.connections["toy"].state.status == "up", 20)
    assert _call(client, "echo", {"text": "back"}) == ({"result": "back"}, False)


def test_a_tools_list_changed_notification_refreshes_the_registry(world):
    client, pool = world["client"], world["pool"]
    assert pool.wait_for(lambda p: p.connections["toy"].state.status == "up", 20)
    assert "sprout" not in _tools(client)
    assert _call(client, "grow", {"name": "sprout"}) == ({"result": "added sprout"}, False)
    assert pool.wait_for(lambda p: any(t["name"] == "sprout" for t in p.connections["toy"].tools), 10)
    assert _tools(client)["sprout"]["source"] == "mcp:toy"  # the router was rebuilt over the new list
    assert _call(client, "sprout", {}) == ({"result": "sprout sprouted"}, False)


@pytest.mark.parametrize("text, error", [
    ("{", "invalid JSON"),
    ('{"tools": []}', "expected {\"mcpServers\""),
    ('{"mcpServers": {"a": {"args": ["x"]}}}', "server 'a': 'command' must be a non-empty string"),
    ('{"mcpServers": {"a": {"type": "sse", "url": "http://x"}}}', "the SSE transport is not supported"),
    ('{"servers": {"a": {"type": "stdio", "command": "x", "env": {"K": 1}}}}', "'env' must be an object of strings"),
])
def test_a_malformed_servers_file_is_one_error_naming_the_server(tmp_path, text, error):
    path = tmp_path / "servers.json"
    path.write_text(text)
    with pytest.raises(RegistryError, match="MCP_SERVERS") as raised:
        load_servers(str(path))
    assert error in str(raised.value)


def test_vs_code_and_claude_desktop_shapes_both_load(tmp_path):
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"servers": {
        "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer k"}},
        "local": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"], "alwaysAllow": ["x"]},
        "off": {"command": "x", "disabled": True},
        "self": {"command": "python", "args": ["-m", "funes", "mcp"]}}}))
    specs = {s.name: s for s in load_servers(str(path))}
    assert set(specs) == {"remote", "local"}  # disabled, and Funes itself (it would start itself forever)
    assert specs["remote"].transport == "http" and specs["remote"].headers == {"Authorization": "Bearer k"}
    assert specs["local"].transport == "stdio" and specs["local"].args == ("mcp-server-time",)


def test_the_bench_dumps_a_tools_file_the_loaders_read_and_counts_tokens(world, tmp_path):
    from bench import mcp_clients
    from funes.tools.loaders import load_file

    listed = {name: list(c.tools) for name, c in world["pool"].connections.items() if name in ("time", "git")}
    out = tmp_path / "tools.json"
    mcp_clients.tools_file(listed, out)
    assert load_file(out).names == [t["name"] for t in listed["time"] + listed["git"]]
    assert mcp_clients.tokens("x" * 400) == 100
    answers = mcp_clients.find_tools_answers(world["parts"], ["convert 9:30 London time to Tokyo time"])
    assert answers["convert 9:30 London time to Tokyo time"]["tools"][0] == "convert_time"
