"""Streamed /chat turns (server-sent events): the decision first, then tool calls and the reply's words as they
come, then the whole turn. The LLM backends stream from small real servers speaking each wire format."""
import json

import pytest

from funes.llm.ollama_backend import OllamaBackend
from funes.llm.openai_backend import OpenAIBackend
from funes.llm.parsing import ProseFilter
from tests.ollama_wire import reply
from tests.proxy_wire import ollama_stream, openai_stream, whole


def events(response) -> list[tuple[str, dict]]:
    """The (event, data) pairs of an SSE body."""
    out = []
    for block in response.get_data(as_text=True).split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        if "event" in lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


def stream_chat(client, message, **extra):
    res = client.post("/chat", json={"message": message, "stream": True, **extra})
    assert res.status_code == 200 and res.mimetype == "text/event-stream"
    return events(res)


def test_a_streamed_tool_turn_sends_the_decision_then_the_call_then_words_then_the_turn(app, client, ollama):
    app.extensions["funes"].router.registry.bind("get_weather", lambda location: {"location": location, "temp_c": 21})
    ollama.script = [reply(tool_calls=[("get_weather", {"location": "Oslo"})]),
                     reply("It is 21 °C in Oslo right now, with a light breeze from the sea.")]
    got = stream_chat(client, "What's the weather like in Oslo right now?")
    kinds = [k for k, _ in got]
    assert kinds[0] == "decision" and kinds[1] == "tool_call" and kinds[-1] == "done" and "token" in kinds
    assert got[0][1]["selected"] == ["get_weather"] and got[0][1]["path"] == "tools"
    assert got[1][1]["name"] == "get_weather" and got[1][1]["result"]["temp_c"] == 21
    done = got[-1][1]
    assert done["reply"] == "It is 21 °C in Oslo right now, with a light breeze from the sea."
    assert "".join(d["text"] for k, d in got if k == "token") == done["reply"]  # the held-back tail too
    assert client.get(f"/decisions/{done['decision_id']}").json["reply"] == done["reply"]
    assert ollama.requests[-1]["stream"] is True


def test_a_reply_written_as_json_never_streams_and_the_turn_settles_it(app, client, ollama):
    app.extensions["funes"].router.registry.bind("get_weather", lambda location: f"sunny in {location}")
    ollama.script = [reply('```json\n{"name": "get_weather", "arguments": {"location": "Lima"}}\n```'),
                     reply("Sunny in Lima today, a good day for a walk by the sea.")]
    got = stream_chat(client, "weather in Lima today?")
    tokens = "".join(d["text"] for k, d in got if k == "token")
    assert "{" not in tokens and "`" not in tokens
    assert got[-1][1]["reply"] == "Sunny in Lima today, a good day for a walk by the sea."


def test_an_unreachable_llm_ends_the_stream_with_an_error_event(client, ollama):
    ollama.script = [500]
    got = stream_chat(client, "tell me a joke")
    assert got[0][0] == "decision" and got[-1][0] == "error" and got[-1][1]["status"] == 503


def test_bad_stream_flag_is_a_400(client):
    res = client.post("/chat", json={"message": "hi", "stream": "yes"})
    assert res.status_code == 400 and "'stream'" in res.json["error"]


def test_openai_backend_streams_text_and_joins_tool_call_pieces(upstream):
    base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    upstream.replies["/v1/chat/completions"] = [openai_stream(
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let me "}}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "check."}}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": '{"loc'}}]}}]},
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": 'ation": "Oslo"}'}}]}}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 9}})]
    pieces = []
    out = OpenAIBackend(upstream.url + "/v1", "m", None, 10.0).chat([{"role": "user", "content": "hi"}], None,
                                                                     pieces.append)
    assert pieces == ["Let me ", "check."] and out.content == "Let me check."
    assert out.tool_calls[0].name == "get_weather" and out.tool_calls[0].arguments == {"location": "Oslo"}
    assert out.tool_calls[0].id == "call_1" and (out.prompt_tokens, out.completion_tokens) == (30, 9)
    sent = upstream.received[-1]["json"]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


def test_ollama_backend_streams_text(upstream):
    def chunk(content, done=False):
        return {"model": "m", "created_at": "2026-11-25T00:00:00Z", "message": {"role": "assistant", "content": content},
                "done": done, **({"prompt_eval_count": 12, "eval_count": 4} if done else {})}
    upstream.replies["/api/chat"] = [ollama_stream(chunk("Hel"), chunk("lo!"), chunk("", done=True))]
    pieces = []
    out = OllamaBackend(upstream.url, "m", 10.0).chat([{"role": "user", "content": "hi"}], None, pieces.append)
    assert pieces == ["Hel", "lo!"] and out.content == "Hello!" and out.prompt_tokens == 12


def test_a_streamed_upstream_error_is_llm_unavailable(upstream):
    from funes.errors import LLMUnavailable
    upstream.replies["/v1/chat/completions"] = [whole({"error": {"message": "overloaded"}}, 503)]
    with pytest.raises(LLMUnavailable, match="HTTP 503"):
        OpenAIBackend(upstream.url + "/v1", "m", None, 10.0).chat([{"role": "user", "content": "hi"}], None,
                                                                   lambda text: None)


def test_prose_filter_sends_the_held_tail_when_the_reply_ends():
    sent = []
    prose = ProseFilter(sent.append)
    for piece in ["\n  Octopuses have ", "three hearts and ", "blue blood.\n"]:
        prose(piece)
    assert "".join(sent) == "Octopuses have three hearts and "[:len("".join(sent))]  # the tail still held
    prose.end()
    assert "".join(sent) == "Octopuses have three hearts and blue blood."
    muted = ProseFilter(sent.append)
    sent.clear()
    muted('{"name": "get_weather"}')
    muted.end()
    assert sent == []


def test_prose_filter_holds_back_the_start_of_a_block():
    sent = []
    prose = ProseFilter(sent.append)
    for piece in ["Here is what I found about the trip. ", "Day one: the fort.", " ```", "json {"]:
        prose(piece)
    assert "`" not in "".join(sent) and "".join(sent).startswith("Here is what I found")
    muted = ProseFilter(sent.append)
    sent.clear()
    for piece in ['{"name": ', '"build_itinerary", "arguments": {"days": 2}}']:
        muted(piece)
    assert sent == []


def test_the_judge_checks_tools_words_refusals_repeats_failures_and_answers():
    from funes.eval.turns import judge
    ok = {"reply": "It is 21 °C in Oslo.", "tool_calls": [{"name": "get_weather", "arguments": {"location": "Oslo"},
                                                            "result": {"temp_c": 21}}]}
    assert judge({"get_weather"}, ok)["right"]
    assert not judge(set(), ok)["tools"]
    assert not judge({"get_weather"}, {**ok, "reply": "I'm sorry, but I can't assist with that."})["no_refusal"]
    assert not judge({"get_weather"}, {**ok, "reply": '```json\n{"name": "get_weather"'})["plain"]
    assert not judge({"get_weather"}, {**ok, "tool_calls": ok["tool_calls"] * 2})["no_repeat"]
    offline = {"name": "get_weather", "arguments": {"location": "Oslo"}, "error": "weather service unreachable"}
    assert not judge({"get_weather"}, {"reply": "It is sunny.", "tool_calls": [offline]})["failure_said"]
    assert judge({"get_weather"}, {"reply": "The weather service could not be reached.", "tool_calls": [offline]})[
        "right"]
    typed = {**offline, "error": "location: 42 is not of type 'string'"}
    assert not judge({"get_weather"}, {"reply": "It could not be reached.", "tool_calls": [typed]})["arguments"]
    gave_up = "I could not complete that: the model answered with a tool call instead of words. Please rephrase."
    assert not judge({"get_weather"}, {**ok, "reply": gave_up})["answered"]
    assert judge({"get_weather"}, {"reply": gave_up, "tool_calls": [offline]})["answered"]
    pointed = {**ok, "reply": "Use the `get_weather` function for Oslo.", "tools_offered": ["get_weather"]}
    assert not judge({"get_weather"}, pointed)["no_tool_talk"]
    assert judge({"get_weather"}, {"reply": gave_up.replace("the model answered", "get_weather failed"),
                                   "tool_calls": [offline], "tools_offered": ["get_weather"]})["no_tool_talk"]
    assert not judge({"get_weather"}, {**ok, "reply": "The user is in Oslo, where it is 21 °C."})["to_the_user"]


def test_bench_chat_streams_and_judges_each_turn(runner, ollama, tmp_path, monkeypatch):
    from funes.cli import cli
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "a", "messages": [{"role": "user", "content": "tell me a joke"}],
                                 "expected_tools": []}) + "\n")
    for name, value in {"LLM_BACKEND": "ollama", "OLLAMA_HOST": ollama.url, "OLLAMA_MODEL": "fake",
                        "ENRICH": "off"}.items():
        monkeypatch.setenv(f"FUNES_{name}", value)
    ollama.script = [reply("Why did the chicken cross the road? To get to the other side.")]
    out = tmp_path / "report.json"
    result = runner.invoke(cli, ["bench-chat", "--cases", str(cases), "-n", "1", "--modes", "routed",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "right and useful 1/1 (1/1 on the six core checks; failing: none)" in result.output
    report = json.loads(out.read_text())
    turn = report["cases"][0]["routed"]
    assert turn["checks"]["right"] and turn["seconds"]["decision"] <= turn["seconds"]["total"]
    assert set(report["summary"]) == {"routed"}


def test_require_first_call_asks_the_server_for_a_call_on_the_first_step_only(factory, data_dir, tmp_path, upstream):
    from funes import create_app
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                      "LLM_BACKEND": "openai", "OPENAI_BASE_URL": f"{upstream.url}/v1", "REQUIRE_FIRST_CALL": True},
                     encoder=factory.encoder)
    app.extensions["funes"].router.registry.bind("get_weather", lambda location: f"sunny in {location}")
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"location": "Oslo"}'}}
    answer = {"role": "assistant", "content": "Sunny in Oslo."}
    upstream.replies["/v1/chat/completions"] = [
        whole({"choices": [{"index": 0, "message": {"role": "assistant", "content": "", "tool_calls": [call]}}]}),
        whole({"choices": [{"index": 0, "message": answer}]})]
    body = app.test_client().post("/chat", json={"message": "What's the weather like in Oslo right now?"}).json
    assert body["reply"] == "Sunny in Oslo." and body["tool_calls"][0]["result"] == "sunny in Oslo"
    first, second = [r["json"] for r in upstream.received if r["path"] == "/v1/chat/completions"]
    assert first["tool_choice"] == "required" and "tool_choice" not in second
    upstream.received.clear()
    app.test_client().post("/chat", json={"message": "tell me a joke"})
    assert all("tool_choice" not in r["json"] for r in upstream.received if r["json"])
    # a plan and the search it needs: the held first step offers only what can run now
    upstream.received.clear()
    upstream.replies["/v1/chat/completions"] = [whole({"choices": [{"index": 0, "message": answer}]})] * 3
    body = app.test_client().post("/chat", json={"message": "Plan 2 relaxed days in Jaipur, I love forts"}).json
    assert set(body["tools_offered"]) == {"search_pois", "build_itinerary"}
    held = upstream.received[0]["json"]
    assert [t["function"]["name"] for t in held["tools"]] == ["search_pois"] and held["tool_choice"] == "required"
