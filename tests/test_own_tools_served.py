"""A user's own tools as a user serves them: a real `funes serve` process with Python tools and a tools file
beside the packs, its LLM a fake OpenAI-compatible server on the wire (on loopback, so it enriches)."""
import json
import os
import socket
import subprocess
import sys
import textwrap
import time

import httpx
import pytest

from tests.wire import JsonServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE = '''
from funes import tool


@tool
def set_lights(room: str, on: bool) -> str:
    """Turn the lights of a room on or off.

    Args:
        room: the room, e.g. kitchen
        on: true to switch them on, false to switch them off
    """
    return f"{room} lights are now {'on' if on else 'off'}"


@tool
def get_indoor_temperature(room: str) -> dict:
    """Read a room's temperature sensor.

    Args:
        room: the room whose sensor to read
    """
    return {"room": room, "celsius": 21.5}
'''
FILE_TOOLS = [{"type": "function", "function": {
    "name": "lock_door", "description": "Lock or unlock a door of the house",
    "parameters": {"type": "object", "properties": {"door": {"type": "string"}, "locked": {"type": "boolean"}},
                   "required": ["door"]}}}]
TEXTS = {  # what the fake model writes when asked to enrich each card
    "set_lights": ["turn off the kitchen lights", "switch on the bedroom light", "lights off in the hall",
                   "can you dim the living room lights", "make it brighter in here"],
    "get_indoor_temperature": ["how warm is the living room?", "what's the temperature in the nursery",
                               "is it cold in the basement right now", "read the bedroom thermometer"],
    "lock_door": ["lock the front door", "is the back door locked?", "unlock the garage door for the plumber"],
}


def enrichment(name: str) -> dict:
    examples = TEXTS[name]
    return {"direct": examples[:2], "indirect": examples[2:], "terse": examples[:1], "long": examples[:1],
            "spanish": [], "vietnamese": [], "hinglish": [], "followup": [],
            "no_tool": ["What is a smart home?", "Who invented the light bulb?", "How do locks work?"],
            "keywords": [name.split("_")[-1]]}


def respond(request: dict) -> tuple[int, object]:
    """OpenAI's wire protocol: enrichment prompts get card texts; a turn with tools calls the first offered once."""
    if request["method"] == "GET":
        return 200, {"data": [{"id": "fake"}]}
    body = request["json"]
    if "response_format" in body:
        name = next(n for n in TEXTS if f"name: {n} " in body["messages"][-1]["content"])
        return 200, _message(json.dumps(enrichment(name)))
    done = [m for m in body["messages"] if m["role"] == "tool"]
    if body.get("tools") and not done:
        tool = body["tools"][0]["function"]["name"]
        args = {"room": "kitchen", "on": False} if tool == "set_lights" else {"room": "kitchen"}
        return 200, _message("", [{"id": "call_1", "type": "function",
                                   "function": {"name": tool, "arguments": json.dumps(args)}}])
    return 200, _message(f"Done: {done[-1]['content']}" if done else "Hello!")


def _message(content: str, tool_calls: list | None = None) -> dict:
    message = {"role": "assistant", "content": content, **({"tool_calls": tool_calls} if tool_calls else {})}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except httpx.HTTPError:
            value = None
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def served(data_dir, tmp_path_factory):
    """`python -m funes serve` with FUNES_TOOL_MODULES and FUNES_TOOLS_FILES beside the five packs."""
    tmp = tmp_path_factory.mktemp("own-tools")
    (tmp / "home_tools.py").write_text(textwrap.dedent(MODULE))
    (tmp / "tools.json").write_text(json.dumps(FILE_TOOLS))
    llm, port = JsonServer(respond), _free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("FUNES_")}, "FUNES_DATA_DIR": data_dir, "FUNES_DATABASE_URL": f"sqlite:///{tmp}/funes.db",
           "FUNES_TOOL_MODULES": json.dumps([str(tmp / "home_tools.py")]),
           "FUNES_TOOLS_FILES": json.dumps([str(tmp / "tools.json")]), "FUNES_SAMPLE_DATA": "false",
           "FUNES_LLM_BACKEND": "openai", "FUNES_OPENAI_BASE_URL": llm.url + "/v1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "funes", "serve", "--port", str(port), "--threads", "2"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: proc.poll() is not None or httpx.get(url + "/healthz").status_code == 200, 240, "serve")
        assert proc.poll() is None, proc.stdout.read()
        yield url, llm
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        llm.close()


def _tools(url: str) -> dict:
    return {t["name"]: t for t in httpx.get(url + "/tools").json()["tools"]}


def test_every_source_is_listed_with_how_it_runs(served):
    url, _ = served
    tools = _tools(url)
    assert tools["set_lights"]["source"].startswith("module:") and tools["set_lights"]["runnable"] is True
    assert tools["lock_door"]["source"].startswith("file:") and tools["lock_door"]["runnable"] is False
    assert "has no handler in this server" in tools["lock_door"]["not_runnable"]
    assert tools["analyze_by_category"]["source"] == "pack:finance" and tools["analyze_by_category"]["card"] == "written"


def test_a_users_tool_is_routed_and_run_beside_the_packs(served):
    url, _ = served
    routed = httpx.post(url + "/route", json={"messages": "turn off the kitchen lights"}).json()
    assert routed["selected"] == ["set_lights"] and routed["cards"] == "mixed"
    turn = httpx.post(url + "/chat", json={"message": "turn off the kitchen lights"}, timeout=60).json()
    assert turn["tools_offered"][0] == "set_lights"
    assert turn["tool_calls"][0]["name"] == "set_lights" and turn["tool_calls"][0]["result"] == "kitchen lights are now off"
    assert "kitchen lights are now off" in turn["reply"]
    packs = httpx.post(url + "/route", json={"messages": "How much did I spend on groceries last month?"}).json()
    assert packs["selected"] == ["analyze_by_category"]


def test_the_users_bare_cards_are_enriched_in_the_background_and_shown(served):
    url, llm = served
    enriched = _wait(lambda: all(_tools(url)[n]["card"] == "enriched" for n in TEXTS) and _tools(url), 120,
                     "the three bare cards to be enriched")
    asked = [r for r in llm.requests if r["json"] and "response_format" in r["json"]]
    assert len(asked) == 3  # each card once
    assert httpx.get(url + "/tools").json()["enrichment"]["done"] == 3
    assert enriched["set_lights"]["runnable"] is True
    def route():  # each worker swaps in the enriched router within a few seconds, without a restart
        decision = httpx.post(url + "/route", json={"messages": "lights off in the hallway please"}).json()
        return decision if "the user's enriched cards" in decision["reason"] else None
    assert _wait(route, 60, "the enriched router")["selected"] == ["set_lights"]
