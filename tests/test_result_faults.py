"""Faults an outside tester found in tool results, the decision log, /chat's JSON, the proxy and Idempotency-Key
retries, each reproduced over the wire: a user's tool module, a small real upstream, a real HTTP client."""
import dataclasses
import json
import logging
import math
import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from sqlalchemy import insert

from funes import create_app
from funes.errors import RegistryError
from funes.service import _key_hash
from funes.store.db import turn_claims
from funes.store.decisions import CLAIM_LEASE_S
from tests.ollama_wire import reply
from tests.test_proxy import TOOLS, WEATHER, function, serve
from tests.test_stream import events

ODD_TOOLS = '''
import dataclasses, datetime, decimal
import pydantic
from funes import tool


@dataclasses.dataclass
class Point:
    x: int
    when: datetime.date


class Model(pydantic.BaseModel):
    name: str
    at: datetime.datetime


class Opaque:
    def __repr__(self):
        return "<Opaque thing>"


def _looped():
    loop = {"name": "loop"}
    loop["self"] = loop
    return loop


VALUES = {
    "datetime": lambda: datetime.datetime(2026, 11, 24, 9, 30, tzinfo=datetime.timezone.utc),
    "set": lambda: {"b", "a", "c"},
    "bytes": lambda: b"\\x00\\x01binary",
    "decimal": lambda: decimal.Decimal("12.50"),
    "dataclass": lambda: Point(3, datetime.date(2026, 1, 2)),
    "pydantic": lambda: Model(name="n", at=datetime.datetime(2026, 1, 2, 3, 4)),
    "object": Opaque,
    "circular": _looped,
    "tuple_keys": lambda: {(1, 2): "pair", "plain": frozenset({3, 1})},
    "huge": lambda: "x" * 5_000_000,
    "nan": lambda: {"score": float("nan"), "p": float("inf")},
}


@tool(examples=["fetch the odd report", "give me the odd report"])
def odd_report(kind: str):
    """Fetch the odd report of a kind.

    Args:
        kind: Which report.
    """
    return VALUES[kind]()
'''
EXPECTED = {  # what the LLM, the log and the response get for each kind
    "datetime": "2026-11-24T09:30:00+00:00",
    "set": ["a", "b", "c"],
    "decimal": "12.50",
    "dataclass": {"x": 3, "when": "2026-01-02"},
    "pydantic": {"name": "n", "at": "2026-01-02T03:04:00"},
    "object": "<Opaque thing>",
    "nan": {"score": None, "p": None},
}
KINDS = [*EXPECTED, "bytes", "circular", "tuple_keys"]
ASK = "fetch the odd report please"


@pytest.fixture
def odd_app(factory, data_dir, tmp_path, ollama):
    module = tmp_path / "odd_tools.py"
    module.write_text(ODD_TOOLS)
    return create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/odd.db", "PACKS": [],
                       "ENRICH": "off", "LLM_BACKEND": "ollama", "OLLAMA_HOST": ollama.url, "OLLAMA_MODEL": "fake",
                       "OFFER_ALL_TOOLS": True, "TOOL_MODULES": [str(module)]}, encoder=factory.encoder)


def no_constant(name: str):
    raise AssertionError(f"{name} is not JSON")


def strict(text: str):
    """JSON as RFC 8259 has it: a bare NaN or Infinity fails."""
    return json.loads(text, parse_constant=no_constant)


def check_result(kind: str, result) -> None:
    if kind in EXPECTED:
        assert result == EXPECTED[kind]
    elif kind == "bytes":
        assert isinstance(result, str) and "8 bytes" in result and "AAFiaW5hcnk=" in result
    elif kind == "circular":
        assert result["name"] == "loop" and "circular" in result["self"]
    else:
        assert result == {"(1, 2)": "pair", "plain": [1, 3]}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_tool_result_of_any_python_type_reaches_the_llm_the_log_and_the_reply(odd_app, ollama, kind, streamed):
    ollama.script = [reply(tool_calls=[("odd_report", {"kind": kind})]), reply("Here is your odd report.")]
    res = odd_app.test_client().post("/chat", json={"message": ASK, "stream": streamed})
    assert res.status_code == 200, res.get_data(as_text=True)
    if streamed:
        for line in res.get_data(as_text=True).splitlines():
            if line.startswith("data: "):
                strict(line[6:])
        got = events(res)
        assert "error" not in [k for k, _ in got], got[-1]
        body = got[-1][1]
        check_result(kind, next(d for k, d in got if k == "tool_call")["result"])
    else:
        body = strict(res.get_data(as_text=True))
    assert body["reply"] == "Here is your odd report."
    check_result(kind, body["tool_calls"][0]["result"])
    logged = strict(odd_app.test_client().get(f"/decisions/{body['decision_id']}").get_data(as_text=True))
    assert logged["outcome"] == "ok" and logged["reply"] == "Here is your odd report."
    check_result(kind, logged["tool_calls"][0]["result"])
    sent = json.loads(next(m for m in ollama.requests[1]["messages"] if m["role"] == "tool")["content"])
    check_result(kind, sent["result"])


def test_a_huge_tool_result_is_cut_with_a_marker_everywhere_it_goes(odd_app, ollama):
    ollama.script = [reply(tool_calls=[("odd_report", {"kind": "huge"})]), reply("That report is long.")]
    res = odd_app.test_client().post("/chat", json={"message": ASK})
    assert res.status_code == 200, res.json
    limit = odd_app.extensions["funes"].settings["TOOL_RESULT_MAX_CHARS"]
    kept = res.json["tool_calls"][0]["result"]
    logged = odd_app.test_client().get(f"/decisions/{res.json['decision_id']}").json["tool_calls"][0]["result"]
    sent = next(m for m in ollama.requests[1]["messages"] if m["role"] == "tool")["content"]
    for text in (kept, logged, sent):
        assert len(text) < limit + 200 and "cut" in text and "4,98" in text  # how much was cut: ~4.98 M of 5 M
    assert kept == logged and kept.startswith("xxxx")


# --- E: responses are JSON: a NaN anywhere in a logged decision reads back as null ---

def test_a_nan_in_a_logged_decision_is_null_in_the_json_read_back(odd_app):
    funes, nan = odd_app.extensions["funes"], float("nan")
    decision = funes.router.select([{"role": "user", "content": ASK}])
    odd = dataclasses.replace(decision, candidates=tuple(dataclasses.replace(c, score=nan, probability=math.inf)
                                                         for c in decision.candidates))
    decision_id = funes.log.record(odd, endpoint="route", path="route", timings={"llm": nan})
    client = odd_app.test_client()
    for row in (strict(client.get("/decisions").get_data(as_text=True))["decisions"][0],
                strict(client.get(f"/decisions/{decision_id}").get_data(as_text=True))):
        assert row["candidates"][0]["score"] is None and row["candidates"][0]["probability"] is None
        assert row["timings"]["llm"] is None and row["candidates"][0]["name"] == "odd_report"


# --- D: a lone surrogate anywhere in a request is a 400 naming where, on the proxy as on /chat and /route ---

@pytest.fixture
def proxy_url(factory, data_dir, tmp_path, upstream):
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/proxy.db", "ENRICH": "off",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": upstream.url, "OPENAI_BASE_URL": f"{upstream.url}/v1"},
                     encoder=factory.encoder)
    server, url = serve(app)
    yield url
    server.shutdown()


def surrogate_body(body: dict, placeholder: str) -> bytes:
    """`body` as JSON with a lone surrogate written as a JSON escape where `placeholder` was."""
    return json.dumps(body).replace(placeholder, "a\\ud800b").encode()


@pytest.mark.parametrize("path,where", [
    ("/v1/chat/completions", "tools[0].function.name"), ("/api/chat", "tools[0].function.name"),
    ("/route", "tools[0].function.name"), ("/chat", "message"), ("/route", "messages[0].content")])
def test_a_lone_surrogate_is_a_400_naming_where_it_is(proxy_url, upstream, path, where):
    tools = [function("SURROGATE", "Current weather for a city.", city="the city"), *TOOLS]
    if where == "message":
        body = {"message": "hello SURROGATE"}
    elif where.startswith("messages"):
        body = {"messages": [{"role": "user", "content": "SURROGATE weather in Oslo?"}], "tools": TOOLS}
    else:
        body = {"model": "m", "messages": WEATHER, "tools": tools}
    res = httpx.post(proxy_url + path, content=surrogate_body(body, "SURROGATE"),
                     headers={"Content-Type": "application/json"}, timeout=30)
    assert res.status_code == 400, res.text
    error = str(res.json()["error"])
    assert "lone surrogate" in error and where in error
    assert upstream.received == []  # nothing went upstream


# --- F: a control character in a tool name is refused at load, and a caller's never forges a log line ---

NEWLINE_TOOL = '''
from funes import tool


@tool(name="get_weather\\nERROR forged line")
def weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city.
    """
    return "sunny"
'''


def test_a_tool_module_naming_a_tool_with_a_newline_fails_to_load_naming_it(factory, data_dir, tmp_path):
    module = tmp_path / "newline_tools.py"
    module.write_text(NEWLINE_TOOL)
    with pytest.raises(RegistryError) as raised:
        create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/f.db", "PACKS": [],
                    "ENRICH": "off", "TOOL_MODULES": [str(module)]}, encoder=factory.encoder)
    assert str(raised.value) == (f"module:{module}: tool name 'get_weather\\nERROR forged line' holds the control "
                                 "character '\\n'; a name must be printable text (letters, digits, _ and -)")


def test_a_tools_file_naming_a_tool_with_a_control_character_fails_to_load(factory, data_dir, tmp_path):
    cards = tmp_path / "tools.json"
    cards.write_text(json.dumps([function("lock\rdoor", "Lock a door.", door="which door")]))
    with pytest.raises(RegistryError, match=r"tools.json:1: tool name 'lock\\rdoor' holds the control character"):
        create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/f.db", "PACKS": [],
                    "ENRICH": "off", "TOOLS_FILES": [str(cards)]}, encoder=factory.encoder)


def forged(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "\n" in r.getMessage() and "forged" in r.getMessage()]


def test_a_proxy_clients_tool_named_with_a_newline_is_a_400_and_forges_no_log_line(proxy_url, upstream, caplog):
    caplog.set_level(logging.INFO)
    tools = [function("get_weather\nERROR forged line", "Current weather for a city.", city="the city"), *TOOLS]
    res = httpx.post(proxy_url + "/v1/chat/completions", json={"model": "m", "messages": WEATHER, "tools": tools},
                     timeout=30)
    assert res.status_code == 400, res.text
    assert "'get_weather\\nERROR forged line' holds the control character" in res.json()["error"]["message"]
    assert upstream.received == [] and forged(caplog) == []


def test_the_decision_log_line_escapes_a_tool_name_it_did_not_check(odd_app, caplog):
    caplog.set_level(logging.INFO)
    funes = odd_app.extensions["funes"]
    decision = funes.router.select([{"role": "user", "content": ASK}])
    funes.log.record(dataclasses.replace(decision, selected=("get_weather\nERROR forged line",)), endpoint="route",
                     path="route")
    lines = [r.getMessage() for r in caplog.records if r.name == "funes.store.decisions"]
    assert forged(caplog) == [] and any("'get_weather\\nERROR forged line'" in line for line in lines)


# --- G: a tool module calling os._exit while imported is an error naming it and the code ---

def test_a_tool_module_calling_os_exit_at_import_is_an_error_naming_it_and_its_code(data_dir, tmp_path):
    module = tmp_path / "exits.py"
    module.write_text("import os\n\nos._exit(3)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "FUNES_DATA_DIR": str(data_dir), "FUNES_TOOL_MODULES": json.dumps([str(module)]),
           "FUNES_PACKS": "[]", "FUNES_ENRICH": "off", "PYTHONPATH": root}
    done = subprocess.run([sys.executable, "-m", "funes", "tools"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert done.stderr.splitlines()[-1] == (f"Error: TOOL_MODULES: {module} failed to import: ExitedAtImport: it "
                                            "called os._exit(3), which would end the process with exit code 3 and "
                                            "no message")


# --- C: a retry with the same Idempotency-Key never waits out a dead worker's claim ---

def dead_pid() -> int:
    """The pid of a process of this host that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("claimant", ["dead process here", "lapsed lease elsewhere"])
def test_a_retry_takes_over_at_once_the_claim_a_killed_worker_left(factory, data_dir, tmp_path, ollama, claimant):
    ollama.script = [reply("Why did the chicken cross the road? To get to the other side.")]
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/claims.db", "ENRICH": "off",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": ollama.url, "OLLAMA_MODEL": "fake",
                      "MAX_CONCURRENT_TURNS": 1}, encoder=factory.encoder)
    # the row a worker leaves when it is killed mid-turn: its claim, and no stored turn
    owner, claimed_at = ((f"{socket.gethostname()}/{dead_pid()}/0badc0de", time.time())
                         if claimant == "dead process here" else
                         ("another-host/4242/0badc0de", time.time() - CLAIM_LEASE_S - 5))
    key = _key_hash("alice", None, None, "retry-1")
    with app.extensions["funes"].db.transaction() as conn:
        conn.execute(insert(turn_claims).values(key=key, claimed_at=claimed_at, owner=owner))
    server, url = serve(app)
    try:
        t0 = time.monotonic()
        res = httpx.post(url + "/chat", json={"message": "tell me a joke", "user_id": "alice"},
                         headers={"Idempotency-Key": "retry-1"}, timeout=CLAIM_LEASE_S - 5)
        assert res.status_code == 200, res.text
        assert time.monotonic() - t0 < CLAIM_LEASE_S - 5
        assert res.json()["reply"].startswith("Why did the chicken") and "replayed" not in res.json()
        again = httpx.post(url + "/chat", json={"message": "tell me a joke", "user_id": "alice"},
                           headers={"Idempotency-Key": "retry-1"}, timeout=10)
        assert again.json()["decision_id"] == res.json()["decision_id"] and again.json()["replayed"] is True
    finally:
        server.shutdown()
