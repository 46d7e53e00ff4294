"""Funes in front of Ollama and OpenAI clients: the real `ollama` and `openai` clients talk to Funes over HTTP,
and Funes forwards to a small real server speaking the upstream's wire format (tests/proxy_wire.py)."""
import json
import threading

import httpx
import ollama
import openai
import pytest
from werkzeug.serving import make_server

from funes import create_app
from tests.proxy_wire import Reply, ollama_stream, openai_stream, whole
from tests.wire import closed_port


def function(name: str, description: str, **params) -> dict:
    properties = {k: {"type": "string", "description": v} for k, v in params.items()}
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": properties,
                                                            "required": list(params)}}}


TOOLS = [
    function("get_weather", "Current weather and forecast for a city.", city="the city"),
    function("get_time", "The current local time in a city or time zone.", place="city or time zone"),
    function("send_email", "Send an email to a contact with a subject and body.", to="recipient", body="text"),
    function("stock_price", "Latest share price of a listed company.", ticker="stock ticker"),
    function("create_event", "Add an event to the user's calendar.", title="what", when="date and time"),
    function("convert_currency", "Convert an amount between two currencies.", amount="amount", to="currency"),
]
WEATHER = [{"role": "user", "content": "What's the weather like in Oslo right now?"}]


def serve(app):
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


@pytest.fixture
def funes(factory, data_dir, tmp_path, upstream):
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": upstream.url,
                      "OPENAI_BASE_URL": f"{upstream.url}/v1"}, encoder=factory.encoder)
    server, url = serve(app)
    yield url
    server.shutdown()


def tool_names(received: dict) -> list[str] | None:
    tools = received["json"].get("tools")
    return None if tools is None else [t["function"]["name"] for t in tools]


def ollama_chunk(content: str = "", done: bool = False, tool_calls=None) -> dict:
    message = {"role": "assistant", "content": content, **({"tool_calls": tool_calls} if tool_calls else {})}
    return {"model": "qwen", "created_at": "2026-11-24T00:00:00Z", "message": message, "done": done,
            **({"done_reason": "stop", "prompt_eval_count": 40, "eval_count": 3} if done else {})}


def test_ollama_stream_forwards_only_the_selected_tool_and_relays_chunks_in_order(funes, upstream):
    call = [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]
    upstream.replies["/api/chat"] = [ollama_stream(ollama_chunk("Checking"), ollama_chunk(" now", tool_calls=call),
                                                   ollama_chunk(done=True))]
    chunks = list(ollama.Client(host=funes).chat(model="qwen", messages=WEATHER, tools=TOOLS, stream=True,
                                                 options={"temperature": 0.1, "num_ctx": 4096}, keep_alive="5m"))
    assert [c.message.content for c in chunks] == ["Checking", " now", ""] and chunks[-1].done
    assert chunks[1].message.tool_calls[0].function.name == "get_weather"
    assert chunks[1].message.tool_calls[0].function.arguments == {"city": "Oslo"}
    sent = upstream.received[-1]["json"]
    assert sent["tools"] == [TOOLS[0]]  # the client's own object, untouched
    assert sent["options"] == {"temperature": 0.1, "num_ctx": 4096} and sent["keep_alive"] == "5m"
    assert sent["model"] == "qwen" and sent["stream"] is True and sent["messages"] == WEATHER
    logged = httpx.get(f"{funes}/decisions?path=proxy").json()["decisions"]
    assert logged[0]["endpoint"] == "ollama" and logged[0]["selected"] == ["get_weather"]
    assert logged[0]["tools_offered"] == ["get_weather"] and logged[0]["registry"]


def test_headers_name_the_decision_and_the_cut(funes, upstream):
    upstream.replies["/api/chat"] = [whole(ollama_chunk("Sunny.", done=True))]
    res = httpx.post(f"{funes}/api/chat", json={"model": "qwen", "messages": WEATHER, "tools": TOOLS,
                                                "stream": False, "x_unknown": {"kept": [1, 2]}})
    assert res.status_code == 200 and res.json()["message"]["content"] == "Sunny."
    assert res.headers["X-Funes-Tools"] == "6->1"
    decision = httpx.get(f"{funes}/decisions/{res.headers['X-Funes-Decision-Id']}").json()
    assert decision["path"] == "proxy" and decision["message"] == WEATHER[0]["content"]
    assert upstream.received[-1]["json"]["x_unknown"] == {"kept": [1, 2]}


def test_no_tool_needed_sends_no_tools_key(funes, upstream):
    answer = {"role": "assistant", "content": "About 13 million."}
    upstream.replies["/v1/chat/completions"] = [whole({"id": "c1", "object": "chat.completion", "created": 1,
                                                        "model": "m", "choices": [
                                                            {"index": 0, "finish_reason": "stop", "message": answer}]})]
    client = openai.OpenAI(base_url=f"{funes}/v1", api_key="sk-test", max_retries=0)
    out = client.chat.completions.create(model="m", tools=TOOLS, tool_choice="auto", messages=[
        {"role": "user", "content": "How many people live in Moscow?"}])
    assert out.choices[0].message.content == "About 13 million."
    sent = upstream.received[-1]
    assert "tools" not in sent["json"] and "tool_choice" not in sent["json"]
    assert sent["headers"]["Authorization"] == "Bearer sk-test"


def test_a_loop_in_progress_keeps_the_tools_it_called_and_the_one_tool_choice_names(funes, upstream):
    upstream.replies["/v1/chat/completions"] = [whole({"choices": []})]
    messages = [{"role": "user", "content": "What time is it in Tokyo?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "21:04"},
                {"role": "user", "content": "Thanks! Email that to bob@example.com please"}]
    choice = {"type": "function", "function": {"name": "stock_price"}}
    httpx.post(f"{funes}/v1/chat/completions", json={"model": "m", "messages": messages, "tools": TOOLS,
                                                     "tool_choice": choice})
    sent = upstream.received[-1]["json"]
    assert tool_names(upstream.received[-1]) == ["get_time", "send_email", "stock_price"]  # the client's order
    assert sent["tool_choice"] == choice and sent["messages"] == messages


def test_required_tool_choice_never_gets_an_empty_list(funes, upstream):
    upstream.replies["/v1/chat/completions"] = [whole({"choices": []})]
    httpx.post(f"{funes}/v1/chat/completions", json={"model": "m", "tools": TOOLS, "tool_choice": "required",
                                                     "messages": [{"role": "user", "content": "Hello there!"}]})
    sent = upstream.received[-1]["json"]
    assert len(sent["tools"]) >= 1 and sent["tool_choice"] == "required"


def test_openai_stream_and_errors_pass_through(funes, upstream):
    delta = {"id": "c2", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    upstream.replies["/v1/chat/completions"] = [openai_stream(
        {**delta, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "It is"}}]},
        {**delta, "choices": [{"index": 0, "delta": {"content": " 21:04."}, "finish_reason": "stop"}]})]
    client = openai.OpenAI(base_url=f"{funes}/v1", api_key="sk-test", max_retries=0)
    stream = client.chat.completions.create(model="m", tools=TOOLS, stream=True, messages=[
        {"role": "user", "content": "what time is it in Lisbon?"}])
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "It is 21:04."
    assert tool_names(upstream.received[-1]) == ["get_time"]
    upstream.replies["/v1/chat/completions"] = [whole({"error": {"message": "bad key", "type": "auth"}}, 401)]
    with pytest.raises(openai.AuthenticationError) as error:
        client.chat.completions.create(model="m", messages=WEATHER, tools=TOOLS)
    assert error.value.status_code == 401 and error.value.body["message"] == "bad key"


def test_ollama_errors_keep_their_status_and_body(funes, upstream):
    upstream.replies["/api/chat"] = [whole({"error": "model 'nope' not found"}, 404)]
    with pytest.raises(ollama.ResponseError) as error:
        ollama.Client(host=funes).chat(model="nope", messages=WEATHER, tools=TOOLS)
    assert error.value.status_code == 404 and error.value.error == "model 'nope' not found"


def test_upstream_down_is_502_in_each_clients_shape(factory, data_dir, tmp_path):
    dead = f"http://127.0.0.1:{closed_port()}"
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": dead, "OPENAI_BASE_URL": f"{dead}/v1"},
                      encoder=factory.encoder)
    server, url = serve(app)
    try:
        with pytest.raises(ollama.ResponseError) as error:
            ollama.Client(host=url).chat(model="m", messages=WEATHER, tools=TOOLS)
        assert error.value.status_code == 502 and "Ollama server behind Funes is unreachable" in error.value.error
        with pytest.raises(openai.APIStatusError) as oerror:
            openai.OpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0).models.list()
        assert oerror.value.status_code == 502 and oerror.value.body["type"] == "upstream_unavailable"
        assert dead.split(":")[-1] not in oerror.value.body["message"]
    finally:
        server.shutdown()


def test_requests_without_tools_and_other_routes_pass_through_byte_for_byte(funes, upstream):
    upstream.replies["/api/chat"] = [whole(ollama_chunk("hi", done=True))]
    upstream.replies["/api/tags"] = [whole({"models": [{"name": "qwen:latest", "model": "qwen:latest"}]})]
    upstream.replies["/v1/models"] = [whole({"object": "list", "data": [{"id": "m", "object": "model"}]})]
    raw = b'{"model":  "qwen", "messages": [{"role": "user", "content": "hi"}],  "stream": false, "format": "json"}'
    res = httpx.post(f"{funes}/api/chat", content=raw, headers={"Content-Type": "application/json"})
    assert res.json()["message"]["content"] == "hi" and upstream.received[-1]["raw"] == raw
    assert "X-Funes-Tools" not in res.headers
    assert [m.model for m in ollama.Client(host=funes).list().models] == ["qwen:latest"]
    client = openai.OpenAI(base_url=f"{funes}/v1", api_key="k", max_retries=0)
    assert [m.id for m in client.models.list()] == ["m"]


@pytest.mark.parametrize("path, body, message, shape", [
    ("/api/chat", b"{not json", "malformed JSON body", "ollama"),
    ("/api/chat", b'{"messages": [{"role": "user", "content": "hi"}], "tools": {"a": 1}}', "'tools' must be a list",
     "ollama"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}',
     "tools[0] must be", "openai"),
    ("/v1/chat/completions", b'{"messages": "hi", "tools": [1]}', "'messages' must be a list", "openai"),
])
def test_bad_requests_are_400_in_the_clients_shape(funes, upstream, path, body, message, shape):
    res = httpx.post(f"{funes}{path}", content=body, headers={"Content-Type": "application/json"})
    error = res.json()["error"]
    assert res.status_code == 400 and upstream.received == []
    assert message in (error if shape == "ollama" else error["message"])
    assert json.dumps(res.json())  # a JSON body either way


def test_bench_proxy_reports_overhead_and_tokens_saved(runner, tmp_path):
    from funes.cli import cli

    tools = tmp_path / "tools.jsonl"
    tools.write_text("".join(json.dumps(t["function"]) + "\n" for t in TOOLS), encoding="utf-8")
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": f"c{i}", "messages": [{"role": "user", "content": m}],
                                         "expected_tools": e}) + "\n"
                             for i, (m, e) in enumerate([("weather in Oslo today?", ["get_weather"]),
                                                         ("What is the capital of Peru?", [])])), encoding="utf-8")
    result = runner.invoke(cli, ["bench-proxy", "--cases", str(cases), "--tools", str(tools), "--repeat", "2",
                                 "--tokenizer", "chars", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["requests"] == 4 and report["proxy_ms"]["p50"] > 0 and report["route_ms"]["p50"] > 0
    assert report["tokens"]["tools"] == 6 and report["tokens"]["tools_forwarded_median"] <= 1
    assert 0.5 < report["tokens"]["saved_share"] < 1


@pytest.fixture
def keyed_funes(factory, data_dir, tmp_path, upstream):
    keys = {"alice-key-0123456789": "alice"}
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                      "OLLAMA_HOST": upstream.url, "OPENAI_BASE_URL": f"{upstream.url}/v1",
                      "OPENAI_API_KEY": "sk-upstream", "API_KEYS": keys}, encoder=factory.encoder)
    server, url = serve(app)
    yield url
    server.shutdown()


def test_with_keys_in_force_the_clients_key_is_funes_and_the_upstream_gets_its_own(keyed_funes, upstream):
    done = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Sunny."}}]}
    upstream.replies["/v1/chat/completions"] = [whole(done)]
    client = openai.OpenAI(base_url=f"{keyed_funes}/v1", api_key="alice-key-0123456789", max_retries=0)
    client.chat.completions.create(model="m", messages=WEATHER, tools=TOOLS)
    assert upstream.received[-1]["headers"]["Authorization"] == "Bearer sk-upstream"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{keyed_funes}/v1", api_key="sk-not-funes", max_retries=0).models.list()
    upstream.replies["/api/chat"] = [whole(ollama_chunk("Sunny.", done=True))]
    headers = {"X-API-Key": "alice-key-0123456789", "Authorization": "Bearer for-ollama"}
    ollama.Client(host=keyed_funes, headers=headers).chat(model="qwen", messages=WEATHER, tools=TOOLS)
    sent = upstream.received[-1]["headers"]
    assert sent["Authorization"] == "Bearer for-ollama" and "X-API-Key" not in sent and "x-api-key" not in sent
    with pytest.raises(ollama.ResponseError) as error:
        ollama.Client(host=keyed_funes).chat(model="qwen", messages=WEATHER, tools=TOOLS)
    assert error.value.status_code == 401 and "API key" in error.value.error
    mine = httpx.get(f"{keyed_funes}/decisions?path=proxy", headers={"X-API-Key": "alice-key-0123456789"}).json()
    assert {d["user_id"] for d in mine["decisions"]} == {"alice"} and len(mine["decisions"]) == 2


def chat_answer(content: str = "", calls: tuple[str, ...] = ()) -> Reply:
    tool_calls = [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}
                  for i, n in enumerate(calls)]
    message = {"role": "assistant", "content": content, **({"tool_calls": tool_calls} if tool_calls else {})}
    return whole({"choices": [{"index": 0, "finish_reason": "stop", "message": message}]})


def test_end_to_end_runs_the_clients_loop_and_scores_the_first_answer_apart(funes, upstream):
    from funes.eval.proxy_bench import RESULT, end_to_end
    from funes.eval.scoring import _case

    written_call = '```json\n{"name": "get_time", "arguments": {"place": "Oslo"}}\n```'
    # straight to the LLM: a call, a second tool written as text, that one again (the loop ends: nothing new);
    # through Funes: a call, then words
    upstream.replies["/v1/chat/completions"] = [
        chat_answer(calls=("get_weather",)), chat_answer(written_call), chat_answer(written_call),
        chat_answer(calls=("get_weather",)), chat_answer("Sunny."), chat_answer("unused")]
    case = {"id": "two", "messages": [{"role": "user", "content": "Weather and local time in Oslo?"}],
            "expected_tools": ["get_weather", "get_time"]}
    report = end_to_end(funes, upstream.url, [_case(case, "test")], TOOLS, 64, steps=4)
    direct, proxy = report["cases"][0]["direct"], report["cases"][0]["proxy"]
    assert (direct["first"], direct["called"], direct["steps"]) == (["get_weather"], ["get_time", "get_weather"], 3)
    assert (proxy["first"], proxy["called"], proxy["steps"], proxy["reply"]) == (["get_weather"], ["get_weather"], 2,
                                                                                "Sunny.")
    assert {k: v for k, v in report["summary"]["direct"].items() if k != "median_seconds"} == {
        "right": 1, "n": 1, "right_first_answer": 0}
    assert report["summary"]["proxy"]["right"] == 0
    second = upstream.received[1]["json"]["messages"]
    assert second[-2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0_0", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}
    assert second[-1] == {"role": "tool", "tool_call_id": "call_0_0", "content": RESULT}
    assert "get_weather" in tool_names(upstream.received[4])  # through Funes, the loop keeps the tool it called


@pytest.mark.parametrize("question,unsure", [("How are things in Tokyo at the moment?", True),
                                              ("tell me a joke", False)])
def test_with_proxy_shortlist_the_upstream_gets_the_shortlist_route_answers(factory, data_dir, tmp_path, upstream,
                                                                            question, unsure):
    """PROXY_SHORTLIST=3: the client's model is shown what /route's shortlist holds, in the client's order;
    none when routing chose none."""
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": upstream.url, "PROXY_SHORTLIST": 3},
                     encoder=factory.encoder)
    server, url = serve(app)
    try:
        cards = [t["function"] for t in TOOLS]
        routed = httpx.post(f"{url}/route", json={"messages": question, "tools": cards, "mode": "shortlist",
                                                  "top_k": 3}).json()
        offered = [t["name"] for t in routed["shortlist"]["tools"]]
        upstream.replies["/api/chat"] = [whole({"model": "qwen", "message": {"role": "assistant", "content": "ok"},
                                                "done": True})]
        ollama.Client(host=url).chat(model="qwen", messages=[{"role": "user", "content": question}], tools=TOOLS)
        sent = tool_names(upstream.received[-1])
        names = [c["name"] for c in cards]
        assert (sent or []) == [n for n in names if n in offered]
        assert len(offered) >= 2 if unsure else offered == []  # weather or time: more than its pick
    finally:
        server.shutdown()
