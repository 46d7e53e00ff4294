"""Faults an outside tester found in Funes as an MCP server (/mcp over real HTTP, `funes mcp` over stdio): another
local port's page running tools, 500s for bad input or a bad tool result, hung tools holding every thread, and a
tool's sys.exit or a still-running tool stopping the server."""
import json
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError
from werkzeug.serving import make_server

from funes import create_app
from tests.ollama_wire import FakeOllama
from tests.test_first_start import START_LIMIT_S, start_serve, stop
from tests.test_mcp_server import over_http

ROOT = Path(__file__).resolve().parent.parent
MODULE = '''
import os
import sys
import time

from funes import tool

HERE = os.path.dirname(os.path.abspath(__file__))


@tool
def wait_for(token: str) -> str:
    """Wait until the test releases this token, as a hung service would.

    Args:
        token: the name of the file that releases it
    """
    open(os.path.join(HERE, token + ".started"), "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(HERE, token)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return f"{token} released"


@tool
def circular() -> dict:
    """Answer a record that holds itself."""
    record = {"name": "loop"}
    record["self"] = record
    return record


@tool
def pairs() -> dict:
    """Answer a table keyed by pairs."""
    return {(1, 2): "a pair"}


@tool
def garbled() -> str:
    """Answer a file name read with the wrong encoding."""
    return b"caf\\xe9.txt".decode("utf-8", "surrogateescape")


@tool
def leave(code: int) -> str:
    """Stop the process.

    Args:
        code: the exit status
    """
    sys.exit(code)
'''


@pytest.fixture(scope="module")
def toolbox(tmp_path_factory) -> Path:
    """A folder with a Python tool module: a tool that hangs until released, bad results, sys.exit."""
    folder = tmp_path_factory.mktemp("faulty-tools")
    (folder / "faulty_tools.py").write_text(textwrap.dedent(MODULE))
    return folder


def _release(toolbox: Path, *tokens: str) -> None:
    for token in tokens:
        (toolbox / token).touch()


@pytest.fixture(scope="module")
def served(tmp_path_factory, factory, toolbox):
    """The app with the faulty tools behind a real threaded HTTP server on a free loopback port."""
    tmp = tmp_path_factory.mktemp("mcp-faults")
    ollama = FakeOllama()
    app = create_app({"DATA_DIR": str(tmp), "DATABASE_URL": f"sqlite:///{tmp}/funes.db", "LLM_BACKEND": "ollama",
                      "OLLAMA_HOST": ollama.url, "OLLAMA_MODEL": "fake", "ENRICH": "off",
                      "TOOL_MODULES": [str(toolbox / "faulty_tools.py")]}, encoder=factory.encoder)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    yield {"base": base, "url": base + "/mcp", "port": server.server_port}
    server.shutdown()
    ollama.close()


def _rpc(url: str, body: str | bytes, headers: dict | None = None) -> httpx.Response:
    return httpx.post(url, content=body, headers={"Content-Type": "application/json", **(headers or {})}, timeout=30)


def _call(name: str, arguments: dict, request_id: int = 1) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                       "params": {"name": "call_tool", "arguments": {"name": name, "arguments": arguments}}})


def _healthy(base: str) -> bool:
    return httpx.get(base + "/healthz", timeout=10).status_code == 200


# --- B: a page on another local port ---

def test_a_page_on_another_local_port_may_not_run_tools(served):
    """The hostname alone was checked: a page at http://localhost:3000 ran call_tool with a plain-text POST."""
    other = served["port"] + 1 if served["port"] < 65535 else served["port"] - 1
    body = _call("circular", {})
    for origin in (f"http://localhost:{other}", f"http://127.0.0.1:{other}", "http://localhost", "null"):
        refused = httpx.post(served["url"], content=body, headers={"Content-Type": "text/plain", "Origin": origin})
        assert refused.status_code == 403, origin
        assert "another origin" in refused.json()["error"]
    same_site = httpx.post(served["url"], content=body, headers={"Content-Type": "text/plain",
                                                                 "Sec-Fetch-Site": "same-site"})
    assert same_site.status_code == 403
    own = _rpc(served["url"], json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
               {"Origin": served["base"], "Sec-Fetch-Site": "same-origin"})
    assert own.status_code == 200 and own.json()["result"] == {}


# --- C: bad input and bad results answer a client error, never a 500 ---

@pytest.mark.parametrize("arguments", [
    '{"name": "find_tools", "arguments": {"query": "what time is it \\ud800 in Tokyo?"}}',
    '{"name": "call_tool", "arguments": {"name": "wait_for", "arguments": {"token": "\\udfff"}}}',
])
def test_a_lone_surrogate_is_a_client_error(served, arguments):
    body = '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": ' + arguments + '}'
    answered = _rpc(served["url"], body)
    assert answered.status_code == 400
    assert answered.json()["error"]["code"] == -32602 and "lone surrogate" in answered.json()["error"]["message"]
    assert _healthy(served["base"])


def test_arguments_nested_thousands_deep_are_a_client_error(served):
    deep = "[" * 3000 + "]" * 3000
    body = '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "call_tool", "arguments": ' \
           '{"name": "wait_for", "arguments": {"token": ' + deep + '}}}}'
    answered = _rpc(served["url"], body)
    assert answered.status_code == 400
    assert answered.json()["error"]["code"] == -32700 and "nested deeper than" in answered.json()["error"]["message"]
    assert _healthy(served["base"])


@pytest.mark.parametrize("tool, named", [
    ("circular", ["circular reference"]),  # the runner may make it plain, naming the loop, or refuse it
    ("pairs", ["keys must be", "(1, 2)"]),
    ("garbled", ["lone surrogate"]),
])
def test_a_result_that_is_not_json_answers_a_result_naming_the_problem(served, tool, named):
    answered = _rpc(served["url"], _call(tool, {}))
    assert answered.status_code == 200
    result = answered.json()["result"]
    text = result["content"][0]["text"]
    assert any(n in text.lower() for n in named), text
    if result.get("isError"):
        assert f"{tool} returned a result that is not JSON" in text
    else:
        assert result["structuredContent"] == json.loads(text)
    assert _healthy(served["base"])



# --- A: hung tools hold turn slots, never every thread ---

@pytest.fixture(scope="module")
def gunicorn(tmp_path_factory, data_dir, toolbox):
    """`funes serve --threads 3` (so 2 turn slots) with the faulty tools, its tools given a minute to answer."""
    url, server, log = start_serve(tmp_path_factory.mktemp("serve"), data_dir, "--threads", "3", FUNES_ENRICH="off",
                                   FUNES_LLM_BACKEND="ollama", FUNES_OLLAMA_HOST="http://127.0.0.1:9",
                                   FUNES_TOOL_TIMEOUT="60",
                                   FUNES_TOOL_MODULES=json.dumps([str(toolbox / "faulty_tools.py")]))
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while not _answers(url + "/healthz"):
            assert server.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(1)
        yield url
    finally:
        _release(toolbox, *(f"slot-{i}" for i in range(4)))
        stop(server, log)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _call_in_thread(url: str, token: str, answers: dict) -> threading.Thread:
    async def steps(session):
        return await session.call_tool("call_tool", {"name": "wait_for", "arguments": {"token": token}})
    thread = threading.Thread(target=lambda: answers.update({token: over_http(url, steps)}), daemon=True)
    thread.start()
    return thread


def test_hung_tools_over_mcp_leave_a_thread_for_health_checks(gunicorn, toolbox):
    """8 clients calling a hung tool held every thread of the server: /healthz took 28 s, /chat 30 s."""
    mcp, answers = gunicorn + "/mcp", {}
    hung = [_call_in_thread(mcp, f"slot-{i}", answers) for i in range(2)]
    deadline = time.monotonic() + 60
    while not all((toolbox / f"slot-{i}.started").exists() for i in range(2)):
        assert time.monotonic() < deadline, "the two calls did not start"
        time.sleep(0.1)

    async def one_more(session):  # every slot is taken: refused at once, not queued behind the hung ones
        with anyio.fail_after(20), pytest.raises(MCPError, match="MAX_CONCURRENT_TURNS") as refused:
            await session.call_tool("call_tool", {"name": "wait_for", "arguments": {"token": "slot-2"}})
        return refused.value
    assert over_http(mcp, one_more).error.code == -32005
    t0 = time.monotonic()
    assert httpx.get(gunicorn + "/healthz", timeout=30).status_code == 200
    assert time.monotonic() - t0 < 1
    chat = httpx.post(gunicorn + "/chat", json={"message": "hello"}, timeout=30)
    assert chat.status_code == 503 and chat.headers["Retry-After"]

    _release(toolbox, "slot-0", "slot-1")
    for thread in hung:
        thread.join(timeout=30)
    assert [answers[f"slot-{i}"].content[0].text for i in range(2)] == ["slot-0 released", "slot-1 released"]
    _release(toolbox, "slot-3")  # the slots are free again
    assert not over_http(mcp, lambda s: s.call_tool("call_tool", {"name": "wait_for", "arguments": {
        "token": "slot-3"}})).is_error


def _cards(team: int, count: int = 600) -> list[dict]:
    """A caller's own tool set, new to the server (each team's differs)."""
    things = ["invoice", "shipment", "calendar", "playlist", "recipe", "ticket", "payroll", "sensor"]
    return [{"type": "function", "function": {
        "name": f"team{team}_tool{i}", "description": f"List, create or update the {things[i % 8]} records of "
        f"project {i} of team {team}, and the {things[i * 3 % 8]} entries linked to them.",
        "parameters": {"type": "object", "properties": {"id": {"type": "string", "description": "the record"}}}}}
        for i in range(count)]


def test_callers_tool_sets_being_embedded_leave_a_thread_for_health_checks(gunicorn):
    """Big caller tool sets on POST /route each held a thread (building, or waiting for the build before theirs)
    until none was left: /healthz waited 14 s."""
    answered: list[int] = []

    def route(team: int) -> None:
        body = {"messages": "book a ticket for project 3", "tools": _cards(team)}
        answered.append(httpx.post(gunicorn + "/route", json=body, timeout=300).status_code)
    posts = [threading.Thread(target=route, args=(team,), daemon=True) for team in range(3)]
    for post in posts:
        post.start()
    deadline = time.monotonic() + 120
    while not answered:
        assert time.monotonic() < deadline, "no /route answered"
        time.sleep(0.05)
    assert answered == [503]  # the third set, refused at once while two others are embedded
    assert httpx.get(gunicorn + "/healthz", timeout=300).status_code == 200
    assert answered == [503]  # /healthz answered while both builds still ran
    for post in posts:
        post.join(timeout=300)
    assert sorted(answered) == [200, 200, 503]


# --- D: under `funes mcp`, a tool's sys.exit and a tool still running after its timeout ---

class StdioServer:
    """`python -m funes mcp` spoken to line by line, so a test sees when it stops answering and when it exits."""

    def __init__(self, env: dict[str, str], log):
        self.process = subprocess.Popen([sys.executable, "-m", "funes", "mcp"], cwd=ROOT, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in self.process.stdout], daemon=True).start()
        self.ids = iter(range(1, 1000))

    def send(self, method: str, params: dict | None = None, notify: bool = False) -> None:
        message = {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}
        self.process.stdin.write(json.dumps({**message, **({} if notify else {"id": next(self.ids)})}).encode() + b"\n")
        self.process.stdin.flush()

    def ask(self, method: str, params: dict | None = None, timeout: float = 30) -> dict:
        self.send(method, params)
        while True:  # past any notification
            reply = json.loads(self.lines.get(timeout=timeout))
            if "id" in reply:
                return reply

    def call(self, name: str, arguments: dict) -> dict:
        return self.ask("tools/call", {"name": "call_tool", "arguments": {"name": name, "arguments": arguments}})


@pytest.fixture
def stdio(tmp_path, data_dir, toolbox):
    """`funes mcp` with the faulty tools, each given 1 s, initialized."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUNES_")}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", FUNES_DATA_DIR=data_dir, FUNES_ENRICH="off",
               FUNES_DATABASE_URL=f"sqlite:///{tmp_path}/funes.db", FUNES_LLM_BACKEND="ollama",
               FUNES_OLLAMA_HOST="http://127.0.0.1:9", FUNES_TOOL_TIMEOUT="1",
               FUNES_TOOL_MODULES=json.dumps([str(toolbox / "faulty_tools.py")]))
    with open(tmp_path / "mcp.log", "w+") as log:
        server = StdioServer(env, log)
        try:
            started = server.ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                "clientInfo": {"name": "test", "version": "0"}}, timeout=START_LIMIT_S)
            assert started["result"]["serverInfo"]["name"] == "funes"
            server.send("notifications/initialized", notify=True)
            yield server
        finally:  # a hung tool ends with its process
            if server.process.poll() is None:
                server.process.kill()
                server.process.wait()


def test_a_tool_still_running_after_its_timeout_does_not_hold_the_exit(stdio):
    """Running tool threads were joined at exit: the server outlived its client by the hung tool's time."""
    timed_out = stdio.call("wait_for", {"token": "stdio-hung-1"})["result"]
    assert timed_out["isError"] and "did not answer within 1 s" in timed_out["content"][0]["text"]
    stdio.process.stdin.close()  # the client leaves, the tool still waits (for 120 s)
    assert stdio.process.wait(timeout=30) == 0


def test_a_tools_sys_exit_is_its_error_and_the_server_serves_on(stdio):
    """sys.exit in a tool, while a timed-out tool ran, left `funes mcp` hung: no answer, no exit."""
    assert stdio.call("wait_for", {"token": "stdio-hung-2"})["result"]["isError"]
    left = stdio.call("leave", {"code": 3})["result"]
    assert left["isError"] and "'leave' tried to exit the process (sys.exit(3))" in left["content"][0]["text"]
    assert stdio.ask("ping")["result"] == {}
    assert stdio.call("pairs", {})["result"]["content"][0]["text"]
