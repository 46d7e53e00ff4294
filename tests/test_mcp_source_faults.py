"""Faults an outside tester found in MCP servers as a tool source, each reproduced with real stdio servers: the
SDK's toy server (tests/mcp_toy.py) and a raw JSON-RPC one that misbehaves on purpose (tests/mcp_raw.py)."""
import gc
import json
import logging
import sys
import time

import pytest

from funes import create_app
from funes.mcp.client import ServerPool
from funes.mcp.config import ServerSpec
from funes.mcp.connection import Timing
from tests import mcp_raw, mcp_toy
from tests.ollama_wire import FakeOllama
from tests.test_first_start import START_LIMIT_S, start_serve, stop
from tests.test_serve_workers import _ready, _workers

TIMING = Timing(connect_s=8.0, ping_s=15.0, retry_s=0.3, retry_max_s=1.0)
WEATHER = "What's the weather like in Oslo right now?"


def _app(tmp_path, factory, servers: dict, **extra):
    """The service over the packs and `servers` (the mcpServers entries), its LLM a fake Ollama, in the session's
    data dir (its card vectors already cached) with a database of its own."""
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    ollama = FakeOllama()
    app = create_app({"DATA_DIR": factory.settings["DATA_DIR"], "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": ollama.url, "OLLAMA_MODEL": "fake",
                      "MCP_SERVERS": str(path), "MCP_CONNECT_TIMEOUT": TIMING.connect_s, "MCP_RETRY_S": TIMING.retry_s,
                      "MCP_RETRY_MAX_S": TIMING.retry_max_s, "ENRICH": "off", **extra}, encoder=factory.encoder)
    return app, ollama


def _call(client, name, arguments):
    """call_tool through Funes' own MCP endpoint: the structured result or text, and whether it failed."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "call_tool", "arguments": {"name": name, "arguments": arguments}}}
    result = client.post("/mcp", json=body).get_json()["result"]
    return result.get("structuredContent", result["content"][0]["text"]), bool(result.get("isError"))


def test_one_bad_schema_skips_that_tool_and_keeps_the_servers_others(tmp_path, factory, caplog):
    caplog.set_level(logging.WARNING)
    app, ollama = _app(tmp_path, factory, {"raw": {"command": sys.executable, "args": [mcp_raw.__file__],
                                                         "env": {"RAW_BAD": "1"}}})
    pool = app.extensions["funes"].mcp
    try:
        client = app.test_client()
        tools = {t["name"]: t for t in client.get("/tools").get_json()["tools"]}
        assert tools["echo"]["source"] == "mcp:raw" and tools["echo"]["runnable"]
        assert tools["shout"]["source"] == "mcp:raw" and "bad" not in tools and "listy" not in tools
        assert _call(client, "shout", {"text": "still here"}) == ("STILL HERE", False)
        pool.wait_for(lambda p: False, 1.5)  # long past a restart's first wait (0.3 s): none happened
        assert pool.states()[0]["status"] == "up" and pool.states()[0]["starts"] == 1
        skipped = [r.getMessage() for r in caplog.records if "skipping tool" in r.getMessage()]
        assert len(skipped) == 2 and "'bad'" in skipped[0] and "'listy'" in skipped[1]  # one warning each
    finally:
        pool.stop()
        ollama.close()


def test_a_byte_that_is_not_utf8_or_a_line_that_is_not_json_spoils_one_message_not_the_session(caplog):
    caplog.set_level(logging.DEBUG)
    pool = ServerPool([ServerSpec("noisy", sys.executable, (mcp_raw.__file__,), env={"RAW_NOISE": "1"})], TIMING,
                      call_timeout_s=10.0)
    try:
        pool.start()
        for text in ("one", "two"):  # each answer comes after a bad byte and a line that is not JSON
            result = pool.call("noisy", "echo", {"text": text})
            assert result.content[0].text == text
        assert pool.states()[0]["status"] == "up" and pool.states()[0]["starts"] == 1
        unreadable = [r for r in caplog.records if "unreadable" in r.getMessage()]
        assert len(unreadable) == 4 and all("\n" not in r.getMessage() for r in unreadable)
        assert not [r for r in caplog.records if r.exc_info] and "Traceback" not in caplog.text
    finally:
        pool.stop()


@pytest.fixture(scope="module")
def toy(tmp_path_factory, factory):
    """The service over the packs and the toy SDK server, whose `flip` tool changes its tool list on demand."""
    tmp = tmp_path_factory.mktemp("mcp-flip")
    app, ollama = _app(tmp, factory, {"toy": {"command": sys.executable, "args": [mcp_toy.__file__]}})
    pool = app.extensions["funes"].mcp
    yield app.test_client(), pool
    pool.stop()
    ollama.close()


def _flipper(pool) -> bool:
    return any(t["name"] == "flipper" for t in pool.connections["toy"].tools)


def _rss_mb() -> float:
    """This process's resident memory (psutil may not be installed)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


def test_a_list_flipping_every_20_ms_is_reread_about_once_a_second_and_the_newest_wins(toy):
    client, pool = toy
    pool.wait_for(lambda p: False, 1.5)  # any listing still due from start-up is done
    had, version = _flipper(pool), pool.version
    assert pool.call("toy", "flip", {"times": 51, "every_ms": 20}).is_error is False  # 51 changes in ~1 s
    assert pool.wait_for(lambda p: _flipper(p) != had, 5)  # the list as the flips left it
    pool.wait_for(lambda p: False, 1.5)
    assert pool.version - version <= 10  # not a new list (and router) per change: ~50 a second
    routed = {t["name"] for t in client.get("/tools").get_json()["tools"]}
    assert ("flipper" in routed) != had  # the router was rebuilt over the newest list


def test_a_changing_tool_list_leaves_memory_flat(toy):
    client, pool = toy

    def change_and_route(flips: int) -> None:
        version = pool.version
        pool.call("toy", "flip", {"times": flips, "every_ms": 20})
        assert pool.wait_for(lambda p: p.version != version, 10)
        assert client.post("/route", json={"messages": WEATHER}).status_code == 200  # a router over the new list

    for _ in range(5):  # warm-up: the first rebuilds fill caches that are bounded
        change_and_route(5)
    gc.collect()
    before = _rss_mb()
    for _ in range(23):  # 207 changes, the router rebuilt after every 9th (an odd count: the list differs)
        change_and_route(9)
    gc.collect()
    assert abs(_rss_mb() - before) <= 20, f"{before:.0f} MB before, {_rss_mb():.0f} MB after 207 changes"


def test_serve_starts_each_stdio_server_once_per_worker_and_never_in_its_master(tmp_path, data_dir, factory):
    pids = tmp_path / "pids"
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"raw": {"command": sys.executable, "args": [mcp_raw.__file__],
                                                          "env": {"RAW_PIDS": str(pids)}}}}))
    url, server, log = start_serve(tmp_path, data_dir, "--workers", "2", FUNES_ENRICH="off",
                                   FUNES_MCP_SERVERS=str(servers), TMPDIR=str(tmp_path))
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while len(_workers(server.pid)) < 2 or not _ready(url) or \
                len(pids.read_text().splitlines() if pids.exists() else []) < 2:
            assert server.poll() is None and time.monotonic() < deadline, "serve did not become ready"
            time.sleep(1)
        time.sleep(3)  # a start still to come would be seen
        parents = [int(line.split()[1]) for line in pids.read_text().splitlines()]
        assert sorted(parents) == sorted(_workers(server.pid))  # once in each worker, never in another process
    finally:
        stop(server, log)
