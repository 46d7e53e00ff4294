"""The chat service end to end: real Flask app, SQLite, MiniLM, FAISS, and the real ollama client
talking to a small HTTP server that speaks Ollama's wire format."""

import pytest

from funes import create_app
from funes.tool_loop import Turn
from tests.ollama_wire import reply


def chat(client, message, **extra):
    return client.post("/chat", json={"message": message, **extra})


def test_tool_turn_offers_only_the_selected_tool_and_runs_the_call(app, client, ollama):
    app.extensions["funes"].router.registry.bind("get_weather", lambda location: {"location": location, "temp_c": 21})
    ollama.script = [reply(tool_calls=[("get_weather", {"location": "Oslo"})]), reply("It is 21 °C in Oslo.")]
    res = chat(client, "What's the weather like in Oslo right now?")
    assert res.status_code == 200, res.json
    body = res.json
    assert body["reply"] == "It is 21 °C in Oslo."
    assert body["tools_offered"] == ["get_weather"]
    assert body["tool_calls"][0]["name"] == "get_weather"
    assert body["tool_calls"][0]["result"] == {"location": "Oslo", "temp_c": 21}
    first, second = ollama.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and "21" in tool_message["content"]
    logged = client.get(f"/decisions/{body['decision_id']}").json
    assert logged["path"] == "tools" and logged["selected"] == ["get_weather"]
    assert logged["tool_calls"][0]["result"]["temp_c"] == 21 and logged["tool_calls"][0]["ms"] >= 0
    assert logged["timings"]["llm"] > 0 and logged["reply"] == body["reply"]


def test_bad_arguments_and_missing_handlers_go_back_to_the_llm(app, client, ollama):
    app.extensions["funes"].router.registry.bind("get_weather", None)  # a routable card with no handler here
    ollama.script = [reply(tool_calls=[("get_weather", {"location": 42})]),
                     reply(tool_calls=[("get_weather", {"location": "Oslo"})]), reply("Sorry, no weather today.")]
    body = chat(client, "Is it going to rain in Oslo tomorrow?").json
    assert "location: 42 is not of type 'string'" in body["tool_calls"][0]["error"]
    assert "has no handler" in body["tool_calls"][1]["error"]
    # every call failed, and the model's words did not say so: the reply names the failure instead
    assert body["reply"].startswith("I could not complete that: get_weather failed (") and "no handler" in body["reply"]
    assert "FUNES_TOOL_MODULES" in body["tool_calls"][1]["error"] and "FUNES_TOOL_MODULES" not in body["reply"]
    assert "is not of type" in ollama.requests[1]["messages"][-1]["content"]


def test_calls_written_as_text_are_parsed_and_unoffered_tools_refused(app, client, ollama):
    app.extensions["funes"].router.registry.bind("get_weather", lambda location: f"sunny in {location}")
    text_call = '```json\n{"name": "get_weather", "arguments": {"location": "Lima"}}\n```'
    ollama.script = [reply(text_call), reply(tool_calls=[("delete_account", {})]), reply("Sunny in Lima.")]
    body = chat(client, "weather in Lima today?").json
    assert body["tool_calls"][0]["result"] == "sunny in Lima"
    assert "not available" in body["tool_calls"][1]["error"]
    assert body["reply"] == "Sunny in Lima."
    assert app.extensions["funes"].log.get(body["decision_id"])["outcome"] == "ok"  # one call of two ran


def test_a_half_written_call_is_never_the_reply_the_model_gets_one_correction(app, client, ollama):
    app.extensions["funes"].router.registry.bind("get_weather", lambda location: f"sunny in {location}")
    half = '```json\n{"name": "build_itinerary", "arguments": {"days": 2, "places": ["Amber Fort", "Hawa'
    ollama.script = [reply(half), reply("Sorry: I can only check the weather here.")]
    body = chat(client, "weather in Lima today?").json
    assert body["reply"] == "Sorry: I can only check the weather here."
    first, second = ollama.requests
    assert half not in str(second["messages"])  # the half call is not shown to the model again either
    assert "answer the user's message itself" in second["messages"][-1]["content"]
    assert not second.get("tools")  # the correction asks for words: no tool to write another call to


def test_a_model_that_keeps_writing_json_gets_a_plain_answer_naming_the_failed_tool(app, client, ollama):
    def offline(location):
        raise ConnectionError("weather service unreachable")

    app.extensions["funes"].router.registry.bind("get_weather", offline)
    ollama.script = [reply(tool_calls=[("get_weather", {"location": "Bogotá"})]),
                     reply('<tool_call>{"name": "get_weather"'), reply('{"error": "unreachable"}')]
    body = chat(client, "¿Qué tiempo hace hoy en Bogotá?").json
    assert body["reply"].startswith("I could not complete that: get_weather failed (")
    assert "unreachable" in body["reply"] and "{" not in body["reply"] and len(ollama.requests) == 3


def test_a_bare_refusal_after_a_failed_tool_becomes_what_failed(app, client, ollama):
    def offline(location):
        raise ConnectionError("weather service unreachable")

    app.extensions["funes"].router.registry.bind("get_weather", offline)
    ollama.script = [reply(tool_calls=[("get_weather", {"location": "Oslo"})]),
                     reply("I'm sorry, but I can't assist with that request.")]
    body = chat(client, "run get weather for Oslo").json
    assert body["reply"].startswith("I could not complete that: get_weather failed (")
    assert "unreachable" in body["reply"] and len(ollama.requests) == 2
    # the turn's only call failed: the log shows it as such, not as a success
    assert app.extensions["funes"].log.get(body["decision_id"])["outcome"] == "tool_error"


def test_a_refusal_or_silence_after_a_result_gets_one_plain_retry(app, client, ollama):
    app.extensions["funes"].router.registry.bind("get_weather", lambda location: {"temp_c": 21})
    ollama.script = [reply(tool_calls=[("get_weather", {"location": "Oslo"})]),
                     reply("I'm sorry, but I can't assist with that."), reply("It is 21 °C in Oslo.")]
    body = chat(client, "What's the weather like in Oslo right now?").json
    assert body["reply"] == "It is 21 °C in Oslo."
    retry = ollama.requests[-1]
    assert "tools" not in retry or not retry["tools"]
    assert "from the tool results above" in retry["messages"][-1]["content"]
    ollama.script = [reply(tool_calls=[("get_weather", {"location": "Oslo"})]), reply(""), reply("")]
    body = chat(client, "What's the weather like in Oslo right now?").json
    assert body["reply"] == "I could not complete that: the model gave no answer in words. Please rephrase."


def test_a_reply_that_tells_the_user_to_call_the_tool_gets_one_plain_retry(app, client, ollama):
    app.extensions["funes"].router.registry.bind("get_weather", lambda location: {"temp_c": 21})
    ollama.script = [reply(tool_calls=[("get_weather", {"location": "Oslo"})]),
                     reply("You can use the `get_weather` function to check Oslo."), reply("It is 21 °C in Oslo.")]
    body = chat(client, "What's the weather like in Oslo right now?").json
    assert body["reply"] == "It is 21 °C in Oslo." and not ollama.requests[-1].get("tools")


def test_the_same_call_asked_again_runs_once_and_the_model_must_answer(app, client, ollama):
    ran = []
    app.extensions["funes"].router.registry.bind("get_weather", lambda location: ran.append(location) or "sunny")
    again = reply(tool_calls=[("get_weather", {"location": "Oslo"})])
    ollama.script = [again, again, reply("Sunny in Oslo.")]
    body = chat(client, "What's the weather like in Oslo right now?").json
    assert ran == ["Oslo"] and len(body["tool_calls"]) == 1 and body["reply"] == "Sunny in Oslo."
    assert len(ollama.requests) == 3 and not ollama.requests[-1].get("tools")


def test_a_message_of_several_parts_gets_one_reminder_of_the_tool_not_called(app, client, ollama):
    registry = app.extensions["funes"].router.registry
    registry.bind("get_weather", lambda location: "sunny")
    registry.bind("get_datetime", lambda **_: "10:00")
    ollama.script = [reply(tool_calls=[("get_weather", {"location": "Lisbon"})]), reply("It is sunny in Lisbon."),
                     reply(tool_calls=[("get_datetime", {"location": "Lisbon"})]), reply("Sunny, and it is 10:00.")]
    body = chat(client, "What's the weather in Lisbon and what time is it there?").json
    assert set(body["tools_offered"]) == {"get_weather", "get_datetime"}
    assert [c["name"] for c in body["tool_calls"]] == ["get_weather", "get_datetime"]
    assert body["reply"] == "Sunny, and it is 10:00."
    assert "get_datetime has not been called" in ollama.requests[2]["messages"][-1]["content"]
    assert [t["function"]["name"] for t in ollama.requests[2]["tools"]] == ["get_datetime"]  # held to that one
    # the first call asked for again is not run again: the part not yet called for is
    again = reply(tool_calls=[("get_weather", {"location": "Lisbon"})])
    ollama.script = [again, again, reply(tool_calls=[("get_datetime", {"location": "Lisbon"})]), reply("Both.")]
    body = chat(client, "What's the weather in Lisbon and what time is it there?").json
    assert [c["name"] for c in body["tool_calls"]] == ["get_weather", "get_datetime"] and body["reply"] == "Both."
    # one reminder only: a model that still answers in words keeps its answer
    ollama.script = [reply(tool_calls=[("get_weather", {"location": "Lisbon"})]), reply("It is sunny in Lisbon.")]
    body = chat(client, "What's the weather in Lisbon and what time is it there?").json
    assert body["reply"] == "It is sunny in Lisbon." and len(body["tool_calls"]) == 1


def test_a_tool_that_requires_another_waits_for_it_in_the_turn_or_the_conversation(app, client, ollama):
    registry = app.extensions["funes"].router.registry
    registry.bind("search_pois", lambda interests, **_: [{"name": "Amber Fort"}, {"name": "Masala Chowk"}])
    registry.bind("build_itinerary", lambda candidate_pois, duration_days, pace, **_: {"days": duration_days})
    plan = ("build_itinerary", {"candidate_pois": [{"name": "Made-up Palace"}], "duration_days": 2, "pace": "relaxed"})
    ollama.script = [reply(tool_calls=[plan]), reply(tool_calls=[("search_pois", {"interests": ["forts"]})]),
                     reply(tool_calls=[plan]), reply("Day 1: Amber Fort. Day 2: Masala Chowk.")]
    body = chat(client, "Plan 2 relaxed days in Jaipur, I love forts and street food").json
    assert set(body["tools_offered"]) == {"build_itinerary", "search_pois"}
    first, pois, built = body["tool_calls"]
    assert first["error"] == "build_itinerary works on the results of search_pois: call that first"
    assert pois["name"] == "search_pois" and "error" not in pois and built["result"] == {"days": 2}
    # a later turn of the same conversation need not search again; another conversation must
    service, both = app.extensions["funes"].service, ["build_itinerary", "search_pois"]
    later = Turn(conversation_id=body["conversation_id"], tools_offered=both)
    assert service.loop.first(registry["build_itinerary"], later) == []
    elsewhere = Turn(conversation_id=chat(client, "hello").json["conversation_id"], tools_offered=both)
    assert service.loop.first(registry["build_itinerary"], elsewhere) == ["search_pois"]


def test_a_call_written_beside_the_tool_it_requires_is_asked_again_with_the_results(app, client, ollama):
    registry = app.extensions["funes"].router.registry
    registry.bind("search_pois", lambda interests, **_: [{"name": "Amber Fort"}])
    built = []
    registry.bind("build_itinerary", lambda candidate_pois, **_: built.append(candidate_pois) or {"days": 1})
    search = ("search_pois", {"interests": ["forts"]})
    days = {"duration_days": 1, "pace": "relaxed"}
    invented = ("build_itinerary", {"candidate_pois": [{"name": "Made-up Palace"}], **days})
    real = ("build_itinerary", {"candidate_pois": [{"name": "Amber Fort"}], **days})
    ollama.script = [reply(tool_calls=[search, invented]), reply(tool_calls=[real]), reply("Day 1: Amber Fort.")]
    body = chat(client, "Find forts in Jaipur and build me a 1-day itinerary").json
    assert [c["name"] for c in body["tool_calls"]] == ["search_pois", "build_itinerary", "build_itinerary"]
    assert body["tool_calls"][1]["error"] == ("build_itinerary works on the results of search_pois: call it again "
                                              "now, with those results")
    assert built == [[{"name": "Amber Fort"}]] and body["reply"] == "Day 1: Amber Fort."
    # a model that answers instead is held once to the call it was refused (it never ran)
    ollama.script = [reply(tool_calls=[search, invented]), reply("Amber Fort is a fort."), reply(tool_calls=[real]),
                     reply("Day 1: Amber Fort.")]
    body = chat(client, "Find forts in Jaipur and build me a 1-day itinerary").json
    assert [t["function"]["name"] for t in ollama.requests[-2]["tools"]] == ["build_itinerary"]
    assert body["tool_calls"][-1]["name"] == "build_itinerary" and body["reply"] == "Day 1: Amber Fort."


def test_respond_ends_the_loop_with_its_answer(client, ollama):
    ollama.script = [reply(tool_calls=[("respond", {"answer": "Budgeting means planning your spending."})]),
                     reply("should never be asked")]
    body = chat(client, "Wrap up now and give me the final formatted answer about budgeting").json
    assert body["tools_offered"][0] == "respond"
    assert body["reply"] == "Budgeting means planning your spending."
    assert len(ollama.requests) == 1


def test_no_tool_answers_from_memory_without_tools(client, ollama):
    ollama.script = [reply("Nice name!")]
    first = chat(client, "My dog is called Biscuit and he loves the beach", user_id="ana").json
    assert first["tools_offered"] == [] and not ollama.requests[0].get("tools")
    ollama.script = [reply("Your dog is Biscuit.")]
    second = chat(client, "What is my dog called?", user_id="ana").json
    assert any("Biscuit" in m["text"] for m in second["memories_used"])
    assert "Biscuit" in ollama.requests[-1]["messages"][0]["content"]
    other = chat(client, "What is my dog called?", user_id="ben").json
    assert not any("Biscuit" in m["text"] for m in other["memories_used"])


def test_conversation_history_is_kept_server_side(client, ollama):
    ollama.script = [reply("Hello Ana.")]
    first = chat(client, "Hi, I'm Ana").json
    ollama.script = [reply("You are Ana.")]
    second = chat(client, "What's my name?", conversation_id=first["conversation_id"]).json
    assert second["conversation_id"] == first["conversation_id"]
    sent = [m["content"] for m in ollama.requests[-1]["messages"]]
    assert "Hi, I'm Ana" in sent and "Hello Ana." in sent
    res = chat(client, "hello", conversation_id="no-such-conversation")
    assert res.status_code == 404 and "no-such-conversation" in res.json["error"]
    res = chat(client, "hello", conversation_id=first["conversation_id"], user_id="mallory")
    assert res.status_code == 404


def test_llm_down_is_503_with_the_decision_logged_and_no_turn_stored(client, ollama):
    ollama.script = [500]
    res = chat(client, "Tell me a joke about owls")
    assert res.status_code == 503 and "the LLM (ollama) is unavailable" in res.json["error"]
    assert "127.0.0.1" not in res.json["error"] and "HTTP 500" not in res.json["error"]
    logged = client.get("/decisions?limit=1").json["decisions"][0]
    assert f"decision {logged['id']}" in res.json["error"] and "HTTP 500" in logged["error"]
    assert logged["outcome"] == "llm_unavailable" and logged["message"] == "Tell me a joke about owls"
    assert "error" in logged and logged["reply"] is None
    # The attempted conversation is named in the log, but nothing of the turn was stored under it.
    assert chat(client, "again", conversation_id=logged["conversation_id"]).status_code == 404


def test_a_memory_write_failure_after_the_commit_still_returns_the_reply(app, client, ollama, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(app.extensions["funes"].service.memory, "add", broken)
    ollama.script = [reply("Hello there.")]
    body = chat(client, "Hi!").json
    assert body["reply"] == "Hello there."
    ollama.script = [reply("You said hi.")]
    assert chat(client, "What did I say?", conversation_id=body["conversation_id"]).status_code == 200


def test_first_turn_decision_names_its_conversation(client, ollama):
    ollama.script = [reply("Hello!")]
    body = chat(client, "Good morning").json
    logged = client.get(f"/decisions/{body['decision_id']}").json
    assert logged["conversation_id"] == body["conversation_id"] and logged["outcome"] == "ok"


def test_anonymous_callers_do_not_share_memories(client, ollama):
    ollama.script = [reply("Noted.")]
    first = chat(client, "My locker code is 7391 and my cat is called Miso").json
    ollama.script = [reply("I don't know.")]
    stranger = chat(client, "What is my locker code?").json
    assert not any("7391" in m["text"] for m in stranger["memories_used"])
    same = chat(client, "What is my locker code?", conversation_id=first["conversation_id"]).json
    assert any("7391" in m["text"] for m in same["memories_used"])


def test_an_unexpected_failure_is_500_with_the_decision_logged(app, client, ollama, monkeypatch):
    def broken(*_args, **_kwargs):
        raise RuntimeError("memory index corrupted")

    monkeypatch.setattr(app.extensions["funes"].service.memory, "search", broken)
    res = chat(client, "Tell me something nice")
    assert res.status_code == 500 and res.json["error"] == "internal error: RuntimeError"
    logged = client.get("/decisions?limit=1").json["decisions"][0]
    assert logged["outcome"] == "error" and "memory index corrupted" in logged["error"]


@pytest.mark.parametrize("body, message", [
    ("not json", "malformed JSON body"),
    ([1, 2], "JSON object"),
    ({}, "'message' must be a non-empty string"),
    ({"message": "   "}, "'message' must be a non-empty string"),
    ({"message": 5}, "'message' must be a non-empty string"),
    ({"message": "x" * 4001}, "longer than 4000"),
    ({"message": "hi", "user_id": 7}, "'user_id'"),
    ({"message": "hi", "conversation_id": ""}, "'conversation_id'"),
    ({"message": "bad \ud800 surrogate"}, "invalid text"),
    ({"message": "nul \u0000 byte"}, "invalid text"),
    ({"message": "hi", "user_id": "a\u0000b"}, "invalid text"),
])
def test_bad_chat_input_is_400_naming_the_problem(client, ollama, body, message):
    if isinstance(body, str):
        res = client.post("/chat", data=body, content_type="application/json")
    else:
        res = client.post("/chat", json=body)
    assert res.status_code == 400
    assert message in res.json["error"] and res.json["status"] == 400
    assert ollama.requests == []


def test_route_endpoint(client):
    res = client.post("/route", json={"messages": [{"role": "user", "content": "what time is it in Tokyo?"}]})
    assert res.status_code == 200
    assert res.json["selected"] == ["get_datetime"] and res.json["decision_id"] > 0
    tools = [{"name": "lookup_stock", "description": "Latest share price of a listed company."},
             {"name": "send_email", "description": "Send an email to a contact."}]
    res = client.post("/route", json={"messages": [{"role": "user", "content": "How much is one Apple share now?"}],
                                      "tools": tools})
    assert res.json["selected"] == ["lookup_stock"]
    assert client.get(f"/decisions/{res.json['decision_id']}").json["path"] == "route"


@pytest.mark.parametrize("body, message", [
    ({}, "'messages'"),
    ({"messages": [{"role": "user", "content": "hi"}], "tools": {"a": 1}}, "'tools' must be a list"),
    ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "x"}]}, "tools[0]"),
    ({"messages": [{"role": "user", "content": "hi"}] * 51}, "more than 50"),
    ({"messages": "x" * 4001}, "longer than 4000"),
    ({"messages": 5}, "or one string"),
    ({"messages": [{"role": "user", "content": "\ud83d alone"}]}, "invalid text"),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": 7}]}, "messages[1] needs a 'role'"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0] needs a 'role'"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}, "messages[0] needs a 'role'"),
    ({"messages": "hi", "tools": [{"name": "b", "description": "B.", "requires": ["a"]}]},
     "card 'b': 'requires' names 'a', which is not a tool here"),
    ({"messages": "hi", "mode": "all"}, "'mode' must be one of decide, shortlist"),
    ({"messages": "hi", "mode": "shortlist", "top_k": 0}, "'top_k' must be an integer from 1 to 10"),
    ({"messages": "hi", "mode": "shortlist", "top_k": "3"}, "'top_k' must be an integer from 1 to 10"),
    ({"messages": "hi", "mode": "shortlist", "top_k": True}, "'top_k' must be an integer from 1 to 10"),
])
def test_bad_route_input(client, body, message):
    res = client.post("/route", json=body)
    assert res.status_code == 400 and message in res.json["error"]


SIBLINGS = [{"name": n, "description": d} for n, d in [
    ("start_firing", "Start a firing schedule on the kiln."), ("stop_firing", "Abort the running firing."),
    ("get_kiln_temperature", "Read the kiln's current temperature."),
    ("list_schedules", "List saved firing schedules."), ("thread_machine", "Set the sewing machine's thread tension."),
    ("get_bobbin_level", "Report how much thread is left on the bobbin.")]]


def test_route_in_shortlist_mode_offers_the_picks_first_and_logs_what_it_offered(client):
    body = {"messages": "fire the kiln to cone 6 tonight", "tools": SIBLINGS, "mode": "shortlist", "top_k": 3}
    res = client.post("/route", json=body).json
    listed = res["shortlist"]["tools"]
    assert res["mode"] == "shortlist" and 1 <= len(listed) <= 3
    assert listed[0]["name"] == res["selected"][0] and listed[0]["picked"] and 0 < listed[0]["probability"] <= 1
    assert [t["probability"] for t in listed] == sorted((t["probability"] for t in listed), reverse=True)
    assert client.get(f"/decisions/{res['decision_id']}").json["tools_offered"] == [t["name"] for t in listed]
    decided = client.post("/route", json={**body, "mode": "decide"}).json
    assert "shortlist" not in decided and decided["selected"] == res["selected"]  # the decision is the same
    bye = client.post("/route", json={**body, "messages": "thanks, that's all for today"}).json
    assert bye["shortlist"] == {"tools": [], "reason": bye["reason"],
                                "closest": [c["name"] for c in bye["candidates"][:3]]}


def test_route_takes_one_string_as_the_user_message(client):
    text = "what time is it in Lisbon?"
    as_string = client.post("/route", json={"messages": text}).json
    as_list = client.post("/route", json={"messages": [{"role": "user", "content": text}]}).json
    assert as_string["message"] == text and as_string["selected"] == as_list["selected"] == ["get_datetime"]


def test_route_reads_an_openai_conversation_as_a_caller_running_its_tools_sends_it(client):
    weather = {"type": "function", "function": {"name": "get_forecast", "description": "Weather forecast for a city.",
                                                "parameters": {"type": "object", "properties": {
                                                    "city": {"type": "string"}}}}}
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "You are terse."}]},
        {"role": "user", "content": [{"type": "text", "text": "will it rain in Leeds tomorrow?"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get_forecast", "arguments": "{\"city\": \"Leeds\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"rain\": 0.8}"},
        {"role": "assistant", "content": "Likely, 80%."},
        {"role": "user", "content": [{"type": "text", "text": "and in York"}, {"type": "image_url", "image_url": {}}]},
    ]
    res = client.post("/route", json={"messages": messages, "tools": [weather]})
    assert res.status_code == 200, res.json
    plain = [{"role": "user", "content": "will it rain in Leeds tomorrow?"},
             {"role": "assistant", "content": "Likely, 80%."}, {"role": "user", "content": "and in York"}]
    same = client.post("/route", json={"messages": plain, "tools": [weather]}).json
    assert res.json["message"] == "and in York"
    assert (res.json["selected"], res.json["history_used"]) == (same["selected"], same["history_used"])


def test_tools_health_and_metrics(client, ollama):
    assert len(client.get("/tools").json["tools"]) == 18
    health = client.get("/healthz").json
    assert health == {"status": "ok", "tools": 18, "llm": "ollama", "classifier": True}
    ollama.script = [reply("hi!")]
    chat(client, "Good evening!")
    client.post("/route", json={"messages": [{"role": "user", "content": "weather in Rome"}]})
    metrics = client.get("/metrics")
    text = metrics.get_data(as_text=True)
    assert metrics.headers["Content-Type"].count("charset") == 1  # Prometheus' own type, not one more charset
    rule = client.get("/decisions?path=memory").json["decisions"][0]["decided_by"]
    assert rule in ("none", "veto", "closing")  # the no-tool rule that fired is what the metric counts
    assert f'funes_decisions_total{{decided_by="{rule}",endpoint="chat",outcome="ok",path="memory"}} 1.0' in text
    assert 'funes_route_seconds_count{endpoint="route"} 1.0' in text


def test_decision_filters(client, ollama):
    ollama.script = [reply("ok")]
    chat(client, "Thanks a lot!")
    client.post("/route", json={"messages": [{"role": "user", "content": "weather in Rome"}]})
    assert [d["path"] for d in client.get("/decisions").json["decisions"]] == ["route", "memory"]
    assert len(client.get("/decisions?path=memory").json["decisions"]) == 1
    assert len(client.get("/decisions?tool=get_weather").json["decisions"]) == 1
    assert client.get("/decisions?since=2999-01-01").json["decisions"] == []
    for query, message in (("path=nope", "'path'"), ("limit=0", "'limit'"), ("since=yesterday", "'since'")):
        res = client.get(f"/decisions?{query}")
        assert res.status_code == 400 and message in res.json["error"]
    assert client.get("/decisions/999999").status_code == 404
    assert client.get(f"/decisions/{2**70}").status_code == 404
    assert client.get("/decisions?limit=\u00b2").status_code == 400  # a superscript two is a digit to str.isdigit
    assert client.get("/no-such-page").json["status"] == 404


def test_clarifying_question_goes_back_to_the_user(client, ollama):
    ollama.script = [reply(tool_calls=[("ask_clarifying_question", {"question": "How many days will you stay?"})]),
                     reply("should never be asked")]
    body = chat(client, "Can you sort out my Jaipur holiday for me?").json
    assert body["tools_offered"] == ["ask_clarifying_question"]
    assert body["reply"] == "How many days will you stay?"
    assert len(ollama.requests) == 1


def test_a_retried_turn_with_an_idempotency_key_is_answered_from_the_stored_one(client, ollama):
    ollama.script = [reply("Hello Ana!"), reply("a second answer that must never be asked for")]
    key = {"Idempotency-Key": "retry-7f3a"}
    first = client.post("/chat", json={"message": "Hi there", "user_id": "ana"}, headers=key).json
    again = client.post("/chat", json={"message": "Hi there", "user_id": "ana"}, headers=key).json
    assert again["replayed"] is True and "replayed" not in first
    assert {k: again[k] for k in first} == first and len(ollama.requests) == 1
    assert len(client.get(f"/decisions?conversation_id={first['conversation_id']}").json["decisions"]) == 1
    other = client.post("/chat", json={"message": "Hi there", "user_id": "ben"}, headers=key).json
    assert other["decision_id"] != first["decision_id"]  # keys belong to their user
    clash = client.post("/chat", json={"message": "Something else", "user_id": "ana"}, headers=key)
    assert clash.status_code == 409 and "different message" in clash.json["error"]
    bad = client.post("/chat", json={"message": "Hi"}, headers={"Idempotency-Key": "x" * 129})
    assert bad.status_code == 400 and "Idempotency-Key" in bad.json["error"]


def test_two_racing_retries_store_one_turn(app, ollama, monkeypatch):
    service = app.extensions["funes"].service
    ollama.script = [reply("One.")]
    first = service.chat("Count to one", None, "ana", "race-1")
    stored = service.log.by_idempotency_key
    looks = []

    def looked_before_the_first_committed(key):
        looks.append(key)
        return None if len(looks) == 1 else stored(key)

    monkeypatch.setattr(service.log, "by_idempotency_key", looked_before_the_first_committed)
    again = service.chat("Count to one", None, "ana", "race-1")  # its own turn hits the unique key, then replays
    assert again["replayed"] is True and again["decision_id"] == first["decision_id"] and len(looks) == 2


def test_a_turn_past_its_deadline_starts_no_further_step(factory, data_dir, tmp_path, ollama):
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/f.db", "LLM_BACKEND": "ollama",
                      "OLLAMA_HOST": ollama.url, "TURN_TIMEOUT": 0.0}, encoder=factory.encoder)
    body = app.test_client().post("/chat", json={"message": "What's the weather like in Oslo right now?"}).json
    assert body["reply"] == "I could not complete that: it took longer than 0 s." and ollama.requests == []


SHARE_TOOLS = [{"name": "lookup_stock", "description": "Latest share price of a listed company."},
               {"name": "send_email", "description": "Send an email to a contact."}]


@pytest.mark.parametrize("shape", ["openai", "mcp"])
def test_route_takes_openai_and_mcp_shaped_tools(client, shape):
    if shape == "openai":
        tools = [{"type": "function", "function": {**t, "parameters": {"type": "object", "properties": {}}}}
                 for t in SHARE_TOOLS]
    else:
        tools = [{**t, "title": t["name"], "inputSchema": {"type": "object", "properties": {}}} for t in SHARE_TOOLS]
    res = client.post("/route", json={"messages": [{"role": "user", "content": "How much is one Apple share now?"}],
                                      "tools": tools})
    assert res.status_code == 200, res.json
    assert res.json["selected"] == ["lookup_stock"] and res.json["candidates"][0]["name"] == "lookup_stock"


HOUSE_TOOLS = '''
from funes import tool


@tool(examples=["switch the kitchen lights off", "turn off the lights in the hall"])
def set_lights(room: str, on: bool = False) -> str:
    """Switch the lights of a room on or off.

    Args:
        room: The room, e.g. kitchen.
        on: True to switch them on.
    """
    return f"{room} lights {'on' if on else 'off'}"


@tool(examples=["set the heating to 20 degrees", "make it warmer, 22 degrees"])
def set_thermostat(celsius: float) -> str:
    """Set the thermostat of the house to a temperature.

    Args:
        celsius: The temperature in degrees Celsius.
    """
    return f"thermostat at {celsius:g} C"
'''


def _house_app(factory, data_dir, tmp_path, ollama, **settings):
    return create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/house.db", "PACKS": [],
                       "ENRICH": "off", "LLM_BACKEND": "ollama", "OLLAMA_HOST": ollama.url, "OLLAMA_MODEL": "fake",
                       **settings}, encoder=factory.encoder)


def test_functions_of_a_tool_module_are_tools_chat_runs(factory, data_dir, tmp_path, ollama):
    module = tmp_path / "house.py"
    module.write_text(HOUSE_TOOLS)
    client = _house_app(factory, data_dir, tmp_path, ollama, TOOL_MODULES=[str(module)]).test_client()
    listed = {t["name"]: t for t in client.get("/tools").json["tools"]}
    assert {n: (t["source"], t["runnable"]) for n, t in listed.items()} == {
        "set_lights": (f"module:{module}", True), "set_thermostat": (f"module:{module}", True)}
    ollama.script = [reply(tool_calls=[("set_lights", {"room": "kitchen"})]), reply("The kitchen lights are off.")]
    lights = chat(client, "Turn off the lights in the kitchen please").json
    assert lights["tools_offered"] == ["set_lights"] and lights["reply"] == "The kitchen lights are off."
    assert lights["tool_calls"][0]["result"] == "kitchen lights off"
    ollama.script = [reply(tool_calls=[("set_thermostat", {"celsius": "21"})]), reply("It is set to 21 °C.")]
    heat = chat(client, "Set the heating to 21 degrees").json
    assert heat["tools_offered"] == ["set_thermostat"] and heat["tool_calls"][0]["result"] == "thermostat at 21 C"


@pytest.mark.parametrize("words", ["Done! The front door is locked.", "The front door could not be locked."])
def test_a_tool_from_a_file_is_routed_but_chat_says_plainly_it_has_no_runner(factory, data_dir, tmp_path, ollama,
                                                                              words):
    tools = tmp_path / "tools.json"
    tools.write_text('[{"type": "function", "function": {"name": "lock_door", "description": "Lock a door of the '
                     'house.", "parameters": {"type": "object", "properties": {"door": {"type": "string"}}}}}]')
    client = _house_app(factory, data_dir, tmp_path, ollama, TOOLS_FILES=[str(tools)]).test_client()
    listed = client.get("/tools").json["tools"][0]
    assert (listed["source"], listed["runnable"]) == (f"file:{tools}", False)
    ollama.script = [reply(tool_calls=[("lock_door", {"door": "front"})]), reply(words)]
    res = chat(client, "Lock the front door")
    assert res.status_code == 200, res.json
    body = res.json
    plain = (f"lock_door is routable but has no handler in this server: it came from file:{tools}; serve it from "
             "Python with FUNES_TOOL_MODULES, or call it from your client through /route or the proxy")
    assert body["tools_offered"] == ["lock_door"] and body["tool_calls"][0]["error"] == plain
    # the user reads that it cannot run; the operator's remedy stays in the call's error and the log
    said = "lock_door cannot run on this server: it has no handler here"
    assert said in body["reply"] and "is locked" not in body["reply"]  # never the model's claim that it ran
    assert "FUNES_TOOL_MODULES" not in body["reply"]
    if "could not" in words:  # the model's own words stand, with the reason after them
        assert body["reply"] == f"{words} ({said}.)"
    assert not ollama.requests[1].get("tools")  # the tool is not offered again once it could not run


def test_the_decision_log_keeps_the_rule_and_its_reason(client):
    routed = client.post("/route", json={"messages": "weather in Rome tomorrow?"}).json
    logged = client.get(f"/decisions/{routed['decision_id']}").json
    assert logged["decided_by"] == routed["decided_by"] == "classifier"
    assert logged["reason"] == routed["reason"] and routed["reason"].startswith("get_weather: P ")
