"""LLM backends against tiny real HTTP servers speaking Ollama's and OpenAI's wire formats, text tool-call
parsing, and (opt-in, `-m embedded`) the real embedded model end to end."""
import hashlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import config
from funes.errors import LLMUnavailable
from funes.llm import backend_from_settings, parse_text_tool_calls
from funes.llm.constrained import MAX_STRING
from funes.llm.embedded import EmbeddedBackend, ensure_model
from funes.llm.ollama_backend import OllamaBackend
from funes.llm.openai_backend import OpenAIBackend
from funes.llm.parsing import is_machinery
from funes.tools.names import NameResolver
from tests.wire import JsonServer, closed_port

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
STOCK = {"type": "function", "function": {
    "name": "get_stock_price", "description": "Latest price of a stock ticker",
    "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}}}}}
ASK = [{"role": "system", "content": "You route tools."}, {"role": "user", "content": "Weather in Paris?"}]
ROOT = Path(__file__).resolve().parent.parent
JSON_BLOCK = 'Sure.\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'


class ScriptedServer(JsonServer):
    """Answers with scripted (status, body) replies in order; records each request."""

    def __init__(self):
        self.replies: list[tuple[int, object]] = []
        super().__init__(lambda request: self.replies.pop(0))


@pytest.fixture
def server():
    s = ScriptedServer()
    yield s
    s.close()


@pytest.fixture(name="closed_port")
def closed_port_fixture():
    return closed_port()


def ollama_reply(content="", tool_calls=None):
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"function": {"name": n, "arguments": a}} for n, a in tool_calls]
    return {"model": "qwen2.5:1.5b", "created_at": "2025-01-01T00:00:00Z", "message": message,
            "done": True, "done_reason": "stop", "prompt_eval_count": 42, "eval_count": 7}


def openai_reply(content=None, tool_calls=None):
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"id": f"call_{i}", "type": "function",
                                  "function": {"name": n, "arguments": json.dumps(a)}}
                                 for i, (n, a) in enumerate(tool_calls)]
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "qwen",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}}


def calls_of(reply):
    return [(c.name, c.arguments) for c in reply.tool_calls]


# --- Ollama -------------------------------------------------------------------------------------------

def ollama(server, **kwargs):
    return OllamaBackend(host=server.url, model="qwen2.5:1.5b", timeout=5, **kwargs)


def test_ollama_structured_tool_call_comes_back_parsed(server):
    server.replies.append((200, ollama_reply(tool_calls=[("get_weather", {"city": "Paris"})])))
    reply = ollama(server, options={"temperature": 0}).chat(ASK, [WEATHER])
    assert calls_of(reply) == [("get_weather", {"city": "Paris"})]
    assert reply.tool_calls[0].id
    assert (reply.prompt_tokens, reply.completion_tokens) == (42, 7)
    assert reply.ms > 0
    sent = server.requests[0]
    assert sent["path"] == "/api/chat"
    assert sent["json"]["model"] == "qwen2.5:1.5b"
    assert sent["json"]["messages"] == ASK
    assert [t["function"]["name"] for t in sent["json"]["tools"]] == ["get_weather"]
    assert sent["json"]["options"]["temperature"] == 0
    assert sent["json"]["stream"] is False


def test_ollama_json_block_becomes_a_call_only_when_that_tool_was_offered(server):
    server.replies += [(200, ollama_reply(JSON_BLOCK)), (200, ollama_reply(JSON_BLOCK))]
    offered = ollama(server).chat(ASK, [WEATHER, STOCK])
    assert calls_of(offered) == [("get_weather", {"city": "Paris"})]
    assert offered.content == "Sure."
    not_offered = ollama(server).chat(ASK, [STOCK])
    assert not_offered.tool_calls == ()
    assert not_offered.content == JSON_BLOCK


def test_ollama_without_tools_leaves_json_text_alone(server):
    server.replies.append((200, ollama_reply(JSON_BLOCK)))
    reply = ollama(server).chat(ASK, None)
    assert reply.tool_calls == () and reply.content == JSON_BLOCK
    assert not server.requests[0]["json"].get("tools")  # the client sends [] for none


def test_ollama_history_is_sent_in_ollama_shape(server):
    server.replies.append((200, ollama_reply("It is 14 °C and cloudy in Paris.")))
    history = ASK + [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_7", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_7", "content": '{"temp_c": 14}'}]
    reply = ollama(server).chat(history, [WEATHER])
    assert reply.content == "It is 14 °C and cloudy in Paris."
    sent = server.requests[0]["json"]["messages"]
    assert sent[2]["tool_calls"] == [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]
    assert sent[3] == {"role": "tool", "content": '{"temp_c": 14}', "tool_name": "get_weather"}


def test_ollama_server_error_raises_llm_unavailable(server):
    server.replies.append((500, {"error": "model 'qwen2.5:1.5b' not found"}))
    with pytest.raises(LLMUnavailable, match="500.*not found"):
        ollama(server).chat(ASK, [WEATHER])


def test_ollama_closed_port_raises_llm_unavailable(closed_port):
    backend = OllamaBackend(host=f"http://127.0.0.1:{closed_port}", model="m", timeout=2)
    with pytest.raises(LLMUnavailable) as error:
        backend.chat(ASK, None)
    assert error.value.status == 503


# --- OpenAI-compatible ----------------------------------------------------------------------------------

def openai(server, api_key=None):
    return OpenAIBackend(base_url=server.url + "/v1", model="qwen", api_key=api_key, timeout=5)


def test_openai_structured_tool_call_arguments_are_decoded(server):
    server.replies.append((200, openai_reply(tool_calls=[("get_weather", {"city": "Paris"})])))
    reply = openai(server, api_key="sk-local").chat(ASK, [WEATHER])
    assert calls_of(reply) == [("get_weather", {"city": "Paris"})]
    assert reply.tool_calls[0].id == "call_0"
    assert reply.content == ""
    assert (reply.prompt_tokens, reply.completion_tokens) == (40, 9)
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["Authorization"] == "Bearer sk-local"
    assert sent["json"]["messages"] == ASK
    assert sent["json"]["tools"] == [WEATHER]


def test_openai_tool_call_tags_in_text_are_parsed(server):
    text = ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n'
            '<tool_call>{"name": "get_stock_price", "arguments": {"ticker": "NVDA"}}</tool_call>')
    server.replies.append((200, openai_reply(text)))
    reply = openai(server).chat(ASK, [WEATHER, STOCK])
    assert calls_of(reply) == [("get_weather", {"city": "Oslo"}), ("get_stock_price", {"ticker": "NVDA"})]
    assert reply.content == ""


def test_openai_text_call_to_a_tool_not_offered_is_dropped(server):
    server.replies.append((200, openai_reply(JSON_BLOCK)))
    reply = openai(server).chat(ASK, [STOCK])
    assert reply.tool_calls == () and reply.content == JSON_BLOCK


def test_openai_history_ties_tool_results_to_call_ids(server):
    server.replies.append((200, openai_reply("14 °C in Paris.")))
    history = ASK + [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_9", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_name": "get_weather", "content": '{"temp_c": 14}'}]
    openai(server).chat(history, [WEATHER])
    sent = server.requests[0]["json"]["messages"]
    assert sent[2]["tool_calls"] == [{"id": "call_9", "type": "function",
                                      "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    assert sent[3] == {"role": "tool", "content": '{"temp_c": 14}', "tool_call_id": "call_9"}


@pytest.mark.parametrize("status, body", [
    (500, {"error": {"code": 500, "message": "failed to decode"}}),
    (200, b"<html>not json</html>"),
    (200, {"object": "error"}),
], ids=["http-500", "not-json", "no-choices"])
def test_openai_failures_raise_llm_unavailable(server, status, body):
    server.replies.append((status, body))
    with pytest.raises(LLMUnavailable):
        openai(server).chat(ASK, [WEATHER])


def test_openai_closed_port_raises_llm_unavailable(closed_port):
    backend = OpenAIBackend(f"http://127.0.0.1:{closed_port}/v1", "m", None, timeout=2)
    with pytest.raises(LLMUnavailable, match="Connect"):
        backend.chat(ASK, None)


# --- parsing --------------------------------------------------------------------------------------------

OFFERED = ["get_weather", "get_stock_price"]


@pytest.mark.parametrize("content, calls, rest", [
    (JSON_BLOCK, [("get_weather", {"city": "Paris"})], "Sure."),
    ('```tool_call\n{"name": "get_stock_price", "arguments": {"ticker": "AAPL"}}\n```',
     [("get_stock_price", {"ticker": "AAPL"})], ""),
    ('{"name": "get_weather", "arguments": {"city": "Rome"}}', [("get_weather", {"city": "Rome"})], ""),
    ('[{"name": "get_weather", "arguments": {"city": "Rome"}}, '
     '{"name": "get_stock_price", "arguments": {"ticker": "IBM"}}]',
     [("get_weather", {"city": "Rome"}), ("get_stock_price", {"ticker": "IBM"})], ""),
    ('Checking.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>\nOne moment.',
     [("get_weather", {"city": "Lima"})], "Checking.\n\nOne moment."),
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Kyiv"}}', [("get_weather", {"city": "Kyiv"})], ""),
    ('{"name": "get_weather", "parameters": {"city": "Oslo"}}', [("get_weather", {"city": "Oslo"})], ""),
    ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Cairo\\"}"}', [("get_weather", {"city": "Cairo"})], ""),
    ('{"name": "getWeather", "arguments": {"city": "Bern"}}', [("get_weather", {"city": "Bern"})], ""),
    ('{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Nice"}}}',
     [("get_weather", {"city": "Nice"})], ""),
    ('{"name": "get_weather"}', [("get_weather", {})], ""),
    ('{"name": "send_email", "arguments": {"to": "bob"}}', [], '{"name": "send_email", "arguments": {"to": "bob"}}'),
    ("It is sunny in Paris today.", [], "It is sunny in Paris today."),
    ('```python\nprint({"name": "get_weather"})\n```', [], '```python\nprint({"name": "get_weather"})\n```'),
    ('```json\n{"name": "get_weather", "arguments": {"city": \n```', [],
     '```json\n{"name": "get_weather", "arguments": {"city": \n```'),
    ('{"city": "Paris", "temp_c": 14}', [], '{"city": "Paris", "temp_c": 14}'),
    ('{"name": "get_weather", "arguments": [1, 2]}', [], '{"name": "get_weather", "arguments": [1, 2]}'),
], ids=["json-fence", "tool_call-fence", "bare-object", "bare-list", "tags-in-prose", "unclosed-tag",
        "parameters-alias", "string-arguments", "loose-name", "openai-shape", "no-arguments", "not-offered",
        "prose", "python-fence", "broken-json", "plain-data", "list-arguments"])
def test_parse_text_tool_calls(content, calls, rest):
    text, found = parse_text_tool_calls(content, OFFERED, NameResolver(OFFERED, 86).resolve)
    assert [(c.name, c.arguments) for c in found] == calls
    assert text == rest
    assert len({c.id for c in found}) == len(found)


def test_a_list_with_one_unoffered_call_keeps_its_text_and_the_offered_call():
    content = ('[{"name": "get_weather", "arguments": {"city": "Rome"}}, '
               '{"name": "delete_files", "arguments": {}}]')
    text, found = parse_text_tool_calls(content, OFFERED, NameResolver(OFFERED, 86).resolve)
    assert [c.name for c in found] == ["get_weather"]
    assert text == content


# --- factory and embedded model file ------------------------------------------------------------------

def test_backend_from_settings_builds_each_kind(tmp_path):
    def backend(kind, **more):
        return backend_from_settings(config.load({"LLM_BACKEND": kind, "DATA_DIR": str(tmp_path), **more}))

    ollama_backend = backend("ollama", OLLAMA_HOST="http://127.0.0.1:1", LLM_MAX_TOKENS=77)
    assert isinstance(ollama_backend, OllamaBackend) and ollama_backend.options["num_predict"] == 77
    openai_backend = backend("openai", OPENAI_BASE_URL="http://127.0.0.1:1/v1", LLM_MAX_TOKENS=77)
    assert isinstance(openai_backend, OpenAIBackend) and openai_backend.options["max_tokens"] == 77
    embedded = backend("embedded")
    assert isinstance(embedded, EmbeddedBackend)
    assert embedded.load_ms is None and not (tmp_path / "models").exists()  # nothing starts before a chat


def test_backend_from_settings_rejects_unknown_kind():
    with pytest.raises(ValueError, match="ollama, openai, embedded"):
        backend_from_settings(config.load({"LLM_BACKEND": "gpt4all"}))


def test_model_is_assembled_from_parts_and_verified(tmp_path):
    parts = []
    for i, chunk in enumerate([b"GGUF", b"-part-two", b"-three"]):
        parts.append(tmp_path / f"part{i:02d}.bin")
        parts[-1].write_bytes(chunk)
    good = hashlib.sha256(b"GGUF-part-two-three").hexdigest()
    with pytest.raises(LLMUnavailable, match="part01.bin"):
        ensure_model(str(tmp_path / "bad"), parts, sha256="0" * 64)
    assert list((tmp_path / "bad" / "models").iterdir()) == []  # no half-written or unverified file
    path = ensure_model(str(tmp_path / "good"), parts, sha256=good)
    assert path.read_bytes() == b"GGUF-part-two-three"
    assert ensure_model(str(tmp_path / "good"), [], sha256="x") == path  # assembled once


def test_embedded_model_that_llama_cpp_cannot_load_raises_llm_unavailable(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf").write_bytes(b"not a gguf file" * 100)
    backend = EmbeddedBackend(str(tmp_path))
    with pytest.raises(LLMUnavailable, match="llama.cpp could not start"):
        backend.chat(ASK, None)
    assert backend.load_ms is None


def test_the_workers_threads_run_while_llama_cpp_loads_the_model(data_dir):
    """xllamacpp loads holding the GIL: in this process, it stopped every thread (/healthz too) for seconds."""
    backend, gaps = EmbeddedBackend(data_dir), []
    loading = threading.Thread(target=backend.start)
    try:
        loading.start()
        last = time.monotonic()
        while loading.is_alive():
            time.sleep(0.01)
            gaps.append(time.monotonic() - last)
            last = time.monotonic()
        assert backend.load_ms is not None and backend.probe() is None  # it did load, and answers
        assert max(gaps) < 1.0, f"this thread stood still {max(gaps):.1f} s while the model loaded"
    finally:
        backend.close()
    assert not backend._server  # stopped with close


def test_llama_cpp_stops_with_its_parent(data_dir, tmp_path):
    """A worker killed outright leaves no llama.cpp behind: it exits when the pipe from its parent closes."""
    script = tmp_path / "parent.py"
    script.write_text("import sys, time\nfrom funes.llm.embedded import EmbeddedBackend\n"
                      f"b = EmbeddedBackend({data_dir!r}); b.start(); print(b._server._proc.pid, flush=True)\n"
                      "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 20
        while _running(child):
            assert time.monotonic() < deadline, "llama.cpp outlived its parent"
            time.sleep(0.2)
    finally:
        parent.kill()


def _running(pid: int) -> bool:
    """True while `pid` runs (a zombie, reaped by init later, has stopped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# --- the real embedded model (opt in: -m embedded) -----------------------------------------------------

@pytest.mark.embedded
def test_embedded_model_calls_get_weather(tmp_path_factory):
    backend = EmbeddedBackend(str(tmp_path_factory.mktemp("embedded")), options={"temperature": 0})
    try:
        reply = backend.chat([{"role": "user", "content": "What's the weather like in Paris right now?"}],
                             [WEATHER])
    finally:
        backend.close()
    assert [c.name for c in reply.tool_calls] == ["get_weather"]
    assert "paris" in json.dumps(reply.tool_calls[0].arguments).lower()
    assert reply.prompt_tokens and reply.completion_tokens


@pytest.mark.embedded
def test_embedded_model_held_to_a_call_calls_the_offered_tool(tmp_path_factory):
    backend = EmbeddedBackend(str(tmp_path_factory.mktemp("embedded")), options={"temperature": 0,
                                                                                 "max_tokens": 200})
    try:  # a message no tool fits: left free, the model writes prose or invents a tool
        reply = backend.chat([{"role": "user", "content": "Tell me a joke about cats in Oslo"}], [WEATHER],
                             require_call=True)
    finally:
        backend.close()
    assert [c.name for c in reply.tool_calls] == ["get_weather"]
    assert isinstance(reply.tool_calls[0].arguments.get("city"), str)


def test_doubled_braces_from_prompt_templates_still_parse():
    from funes.llm.parsing import parse_text_tool_calls

    text, calls = parse_text_tool_calls('{{"name": "get_weather", "arguments": {"location": "Oslo"}}}}',
                                        ["get_weather"], lambda n: n if n == "get_weather" else None)
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", {"location": "Oslo"})]


# --- required calls held to a JSON Schema (llama.cpp) -------------------------------------------------

def test_a_required_call_on_llama_cpp_is_held_to_the_offered_tools_schemas(server):
    server.replies.append((200, openai_reply(
        '{"calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}, '
        '{"name": "get_stock_price", "arguments": {"ticker": "NVDA"}}]}')))
    llama = OpenAIBackend(server.url + "/v1", "m", None, 5, grammars=True)
    reply = llama.chat(ASK, [WEATHER, STOCK], on_text=lambda text: pytest.fail(f"streamed {text!r}"),
                       require_call=True)
    assert calls_of(reply) == [("get_weather", {"city": "Oslo"}), ("get_stock_price", {"ticker": "NVDA"})]
    assert reply.content == ""
    sent = server.requests[0]["json"]
    assert "tool_choice" not in sent and sent["stream"] is False
    schema = sent["response_format"]["json_schema"]["schema"]["properties"]["calls"]
    assert (schema["minItems"], schema["maxItems"]) == (1, 2)
    assert [o["properties"]["name"]["const"] for o in schema["items"]["anyOf"]] == ["get_weather", "get_stock_price"]
    city = schema["items"]["anyOf"][0]["properties"]["arguments"]["properties"]["city"]
    assert city == {"type": "string", "maxLength": MAX_STRING}  # greedy decoding cannot loop in it for ever


def test_other_openai_servers_get_tool_choice_required(server):
    server.replies.append((200, openai_reply(tool_calls=[("get_weather", {"city": "Oslo"})])))
    openai(server).chat(ASK, [WEATHER], require_call=True)
    sent = server.requests[0]["json"]
    assert sent["tool_choice"] == "required" and "response_format" not in sent


def test_a_schema_llama_cpp_refuses_is_asked_again_freely(server):
    server.replies += [(400, {"error": {"message": "failed to parse grammar"}}),
                       (200, openai_reply("It is sunny in Paris."))]
    reply = OpenAIBackend(server.url + "/v1", "m", None, 5, grammars=True).chat(ASK, [WEATHER], require_call=True)
    assert reply.content == "It is sunny in Paris." and reply.tool_calls == ()
    constrained, free = (r["json"] for r in server.requests)
    assert "response_format" in constrained and "response_format" not in free and "tool_choice" not in free


def test_a_server_that_does_not_know_tool_choice_required_is_asked_freely(server):
    server.replies += [(400, {"error": {"message": "tool_choice 'required' is not supported"}}),
                       (200, openai_reply(tool_calls=[("get_weather", {"city": "Oslo"})]))]
    reply = openai(server).chat(ASK, [WEATHER], require_call=True)
    assert calls_of(reply) == [("get_weather", {"city": "Oslo"})]
    held, free = (r["json"] for r in server.requests)
    assert held["tool_choice"] == "required" and "tool_choice" not in free


def test_a_required_call_cut_off_by_the_token_limit_is_text_not_a_call(server):
    server.replies.append((200, openai_reply('{"calls": [{"name": "get_weather", "argu')))
    reply = OpenAIBackend(server.url + "/v1", "m", None, 5, grammars=True).chat(ASK, [WEATHER], require_call=True)
    assert reply.tool_calls == () and is_machinery(reply.content)


# --- constrained JSON (card enrichment) ----------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"direct": {"type": "array", "items": {"type": "string"}}}}


def test_ollama_complete_json_sends_the_schema_as_format(server):
    server.replies.append((200, ollama_reply(content='{"direct": ["weather in Oslo"]}')))
    answer = ollama(server, options={"temperature": 0}).complete_json(ASK, SCHEMA, "root ::= x", seed=7,
                                                                       max_tokens=50)
    sent = server.requests[0]["json"]
    assert answer == '{"direct": ["weather in Oslo"]}'
    assert sent["format"] == SCHEMA and "grammar" not in json.dumps(sent)
    assert sent["options"] == {"temperature": 0, "seed": 7, "num_predict": 50}


def test_openai_complete_json_uses_a_grammar_only_where_the_server_is_llama_cpp(server):
    server.replies += [(200, openai_reply(content='{"direct": []}'))] * 2
    OpenAIBackend(server.url + "/v1", "m", None, 5).complete_json(ASK, SCHEMA, "root ::= x", seed=7)
    OpenAIBackend(server.url + "/v1", "m", None, 5, grammars=True).complete_json(ASK, SCHEMA, "root ::= x")
    plain, llama = (r["json"] for r in server.requests)
    assert plain["response_format"]["json_schema"]["schema"] == SCHEMA and "grammar" not in plain
    assert plain["seed"] == 7
    assert llama["grammar"] == "root ::= x" and "response_format" not in llama


def test_complete_json_failures_are_llm_unavailable(server):
    server.replies.append((500, {"error": "boom"}))
    with pytest.raises(LLMUnavailable, match="HTTP 500"):
        OpenAIBackend(server.url + "/v1", "m", None, 5).complete_json(ASK, SCHEMA)


@pytest.mark.parametrize("text, machinery", [
    ('```json\n{"name": "search_pois", "arguments": {"interests": ["forts"', True),
    ('<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>', True),
    ('Sure! {"name": "get_weather", "arguments": {"location": "Oslo"}}', True),
    ('[{"day": 1, "morning": "Amber Fort"}]', True),
    ('{"error": "unreachable"}', True),
    ('<tool_response>\n{"result": {"candidate_pois": [{"id": "place/rawat', True),
    ("It is 21 °C and sunny in Oslo.", False),
    ("Day 1: Amber Fort in the morning, Hawa Mahal after lunch. Day 2: the bazaars.", False),
    ("In Python, a dict looks like {'a': 1} and a set like {1, 2}.", False),
])
def test_replies_holding_calls_or_json_are_machinery(text, machinery):
    assert is_machinery(text) is machinery


@pytest.mark.parametrize("text, refusal", [
    ("I'm sorry, but I can't assist with that.", True),
    ("I apologize, but I'm not able to provide a response based on the information provided. Please provide "
     "more details or clarify your request.", True),
    ("I'm sorry, I can't find Lisbon's weather: the weather service could not be reached. It was 21 °C "
     "yesterday according to your saved notes, and the forecast for the rest of the week looks dry and mild, "
     "so a light jacket should be enough if you go out this evening.", False),
    ("Sorry for the wait! It is 21 °C in Oslo.", False),
])
def test_a_bare_refusal_is_one_that_only_declines(text, refusal):
    from funes.llm.parsing import is_refusal
    assert is_refusal(text) is refusal
