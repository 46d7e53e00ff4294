"""Funes as an MCP server: the SDK's own client over streamable HTTP (/mcp on a real HTTP server) and over
stdio (`python -m funes mcp`, a real subprocess), with mcp-server-time as one of the tools Funes serves."""
import json
import os
import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from werkzeug.serving import make_server

from funes import create_app
from funes.version import version
from tests.ollama_wire import FakeOllama

ROOT = Path(__file__).resolve().parent.parent
KEY = "mcp-test-key-0123456789"
QUERY = "convert 9:30 London time to Tokyo time"  # mcp-server-time's convert_time (the packs' get_datetime does
# not convert; for "what time is it in Tokyo?" beside only this server, the written get_datetime card wins)


@pytest.fixture(scope="module")
def servers_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp-servers") / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"time": {
        "command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "Etc/UTC"]}}}))
    return str(path)


@pytest.fixture(scope="module")
def served(tmp_path_factory, factory, servers_file):
    """The app behind a real HTTP server on a free loopback port, an API key in force."""
    tmp = tmp_path_factory.mktemp("mcp-server")
    ollama = FakeOllama()
    app = create_app({"DATA_DIR": str(tmp), "DATABASE_URL": f"sqlite:///{tmp}/funes.db", "LLM_BACKEND": "ollama",
                      "OLLAMA_HOST": ollama.url, "OLLAMA_MODEL": "fake", "ENRICH": "off", "MCP_SERVERS": servers_file,
                      "MCP_PINNED_TOOLS": ["get_datetime"], "API_KEYS": {KEY: {"user": "ada", "operator": True}}},
                     encoder=factory.encoder)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {"url": f"http://127.0.0.1:{server.server_port}/mcp", "client": app.test_client()}
    server.shutdown()
    app.extensions["funes"].mcp.stop()
    ollama.close()


def over_http(url: str, steps, key: str = KEY):
    """Run `steps(session)` in an initialized SDK client session over streamable HTTP."""
    async def main():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http, \
                streamable_http_client(url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            return await steps(session)
    return anyio.run(main)


async def _everything(session: ClientSession) -> dict:
    """What each test below looks at, asked in one session."""
    async def call(name, arguments):
        return await session.call_tool(name, arguments)
    return {
        "names": [t.name for t in (await session.list_tools()).tools],
        "found": await call("find_tools", {"query": QUERY}),
        "nothing": await call("find_tools", {"query": "thanks, that is all for today"}),
        "one": await call("find_tools", {"query": QUERY, "limit": 1}),
        "bad_limit": await call("find_tools", {"query": QUERY, "limit": 0}),
        "mcp_tool": await call("call_tool", {"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}),
        "pack_tool": await call("call_tool", {"name": "get_datetime", "arguments": {"timezone": "Asia/Tokyo"}}),
        "pinned": await call("get_datetime", {"timezone": "Europe/Paris"}),
        "invalid": await call("call_tool", {"name": "get_current_time", "arguments": {"timezone": ["Tokyo"]}}),
        "unknown": await call("call_tool", {"name": "get_curent_time", "arguments": {}}),
        "extra": await call("call_tool", {"name": "get_datetime", "arguments": {"timezone": "Asia/Tokyo",
                                                                                "city": "Tokyo"}}),
    }


@pytest.fixture(scope="module")
def http_answers(served):
    return over_http(served["url"], _everything)


def test_tools_list_offers_find_tools_call_tool_and_the_pinned_tools(http_answers):
    assert http_answers["names"] == ["find_tools", "call_tool", "get_datetime"]


def test_find_tools_answers_the_selected_tools_with_their_full_schemas(http_answers, served):
    found = http_answers["found"].structured_content
    assert not http_answers["found"].is_error and json.loads(http_answers["found"].content[0].text) == found
    tools = {t["name"]: t for t in found["tools"]}
    convert = tools["convert_time"]
    assert convert["source"] == "mcp:time" and convert["runnable"] is True
    assert set(convert["inputSchema"]["required"]) == {"source_timezone", "time", "target_timezone"}
    logged = served["client"].get(f"/decisions/{found['decision_id']}", headers={"X-API-Key": KEY}).get_json()
    assert logged["path"] == "mcp" and logged["message"] == QUERY
    assert logged["user_id"] == "ada" and "convert_time" in logged["selected"]
    listed = served["client"].get("/decisions?path=mcp", headers={"X-API-Key": KEY}).get_json()["decisions"]
    assert found["decision_id"] in [d["id"] for d in listed] and {d["path"] for d in listed} == {"mcp"}


def test_find_tools_answers_a_shortlist_most_likely_after_the_pick_within_its_limit(http_answers, served):
    found = http_answers["found"].structured_content["tools"]
    assert found[0]["picked"] and 1 <= len(found) <= 5
    others = [t["probability"] for t in found if not t["picked"]]
    assert others == sorted(others, reverse=True) and all(0 <= p <= 1 for p in others)
    one = http_answers["one"].structured_content
    assert [t["name"] for t in one["tools"]] == [found[0]["name"]]
    logged = served["client"].get(f"/decisions/{one['decision_id']}", headers={"X-API-Key": KEY}).get_json()
    assert logged["tools_offered"] == [found[0]["name"]]
    assert http_answers["bad_limit"].is_error and "'limit' must be an integer from 1 to 10" in \
        http_answers["bad_limit"].content[0].text


def test_find_tools_with_nothing_that_fits_says_why_and_names_the_closest(http_answers):
    nothing = http_answers["nothing"].structured_content
    assert nothing["tools"] == [] and nothing["reason"] and len(nothing["closest"]) == 3


def test_call_tool_runs_an_mcp_servers_tool_and_a_pack_tool(http_answers):
    remote = http_answers["mcp_tool"].structured_content
    assert remote["timezone"] == "Asia/Tokyo"
    assert datetime.fromisoformat(remote["datetime"]).utcoffset() == timedelta(hours=9)
    local = http_answers["pack_tool"]
    assert not local.is_error and "Tokyo" in local.content[0].text
    assert not http_answers["pinned"].is_error and "Paris" in http_answers["pinned"].content[0].text


def test_call_tool_with_bad_arguments_or_an_unknown_name_is_an_error_result(http_answers):
    assert http_answers["invalid"].is_error
    assert "invalid arguments for get_current_time: timezone:" in http_answers["invalid"].content[0].text
    assert http_answers["unknown"].is_error
    assert "the closest is 'get_current_time'" in http_answers["unknown"].content[0].text
    # an argument the tool lacks is named, not dropped (the tool would answer on its defaults)
    assert http_answers["extra"].is_error
    assert "get_datetime has no argument 'city'; it takes: timezone" in http_answers["extra"].content[0].text


def test_a_tool_the_server_does_not_offer_is_a_protocol_error(served):
    async def steps(session):
        with pytest.raises(MCPError, match="unknown tool 'get_current_time'.*call_tool"):
            await session.call_tool("get_current_time", {"timezone": "UTC"})
        return (await session.send_ping()) is not None  # the session serves on
    assert over_http(served["url"], steps)


def test_mcp_needs_the_api_key_like_every_endpoint(served):
    client = served["client"]
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert client.post("/mcp", json=ping).status_code == 401
    assert client.post("/mcp", json=ping, headers={"Authorization": "Bearer wrong"}).status_code == 401
    answered = client.post("/mcp", json=ping, headers={"Authorization": f"Bearer {KEY}"})
    assert answered.status_code == 200 and answered.get_json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    with pytest.raises(Exception):  # noqa: B017  (the SDK's client fails to initialize: the HTTP status is a 401)
        over_http(served["url"], lambda s: s.send_ping(), key="wrong")


@pytest.mark.parametrize("method, body, status, expected", [
    ("get", None, 405, None),
    ("post", "{not json", 400, -32700),
    ("post", "[]", 400, -32600),
    ("post", '{"jsonrpc": "2.0", "id": 7, "method": "resources/list"}', 200, -32601),
    ("post", '{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"arguments": {}}}', 200, -32602),
    ("post", '{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": ["find_tools"]}', 200, -32602),
    ("post", '{"jsonrpc": "2.0", "method": "notifications/initialized"}', 202, None),
    ("post", '{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}', 400, -32600),  # not a notification
    ("post", '{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', 400, -32600),
])
def test_the_transport_answers_what_it_does_not_serve_plainly(served, method, body, status, expected):
    headers = {"X-API-Key": KEY, "Content-Type": "application/json"}
    response = getattr(served["client"], method)("/mcp", data=body, headers=headers)
    assert response.status_code == status
    if status == 405:
        assert response.headers["Allow"] == "POST"
    if status == 202:
        assert response.get_data() == b"" and "Content-Type" not in response.headers
    if expected is not None:
        assert response.get_json()["error"]["code"] == expected


def test_a_page_on_another_site_may_not_call_mcp(served):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"X-API-Key": KEY, "Origin": "http://evil.example"}
    assert served["client"].post("/mcp", json=ping, headers=headers).status_code == 403
    headers["Origin"] = "http://localhost:3000"  # another port is another origin (tests/test_mcp_server_faults.py)
    assert served["client"].post("/mcp", json=ping, headers=headers).status_code == 403
    headers["Origin"] = "http://localhost"  # the test client's own origin
    assert served["client"].post("/mcp", json=ping, headers=headers).status_code == 200


def test_the_sdk_client_over_stdio_finds_and_runs_tools(tmp_path, data_dir, servers_file):
    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "FUNES_DATA_DIR": data_dir,
           "FUNES_DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "FUNES_MCP_SERVERS": servers_file,
           "FUNES_LLM_BACKEND": "ollama", "FUNES_OLLAMA_HOST": "http://127.0.0.1:9", "FUNES_ENRICH": "off"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "funes", "mcp"], env=env, cwd=str(ROOT))

    async def main():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            info = await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            found = await session.call_tool("find_tools", {"query": QUERY})
            ran = await session.call_tool("call_tool", {"name": "get_current_time",
                                                        "arguments": {"timezone": "Asia/Tokyo"}})
            pack = await session.call_tool("call_tool", {"name": "get_datetime", "arguments": {"timezone": "UTC"}})
            return info, names, found, ran, pack

    info, names, found, ran, pack = anyio.run(main)
    assert (info.server_info.name, info.server_info.version) == ("funes", version())
    assert names == ["find_tools", "call_tool"]
    schemas = {t["name"]: t["inputSchema"] for t in found.structured_content["tools"]}
    assert schemas["convert_time"]["properties"]["time"]["type"] == "string"
    assert ran.structured_content["timezone"] == "Asia/Tokyo"
    assert not pack.is_error and "UTC" in pack.content[0].text
    assert os.path.exists(tmp_path / "funes.db")  # its find_tools decision went to the configured database
