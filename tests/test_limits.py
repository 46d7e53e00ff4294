"""Hostile or broken input gets a 4xx or a bounded time, never a 500; readiness tells the truth."""
import time

import pytest

from funes import create_app
from tests.ollama_wire import reply
from tests.wire import closed_port

HELLO = [{"role": "user", "content": "hello there"}]
CARD = {"name": "lookup", "description": "Look something up.", "parameters": {"type": "object", "properties": {}}}


@pytest.mark.parametrize("raw, message", [
    ('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 64"),
    ('{"messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "t", "description": "d", '
     '"threshold": NaN}]}', "NaN is not a JSON number"),
    ('{"messages": Infinity}', "Infinity is not a JSON number"),
    (b'{"messages": "\xff"}', "malformed JSON body"),
])
def test_malformed_bodies_are_400_naming_why(client, raw, message):
    res = client.post("/route", data=raw, content_type="application/json")
    assert res.status_code == 400 and message in res.json["error"], res.json


@pytest.mark.parametrize("card, message", [
    ({**CARD, "id": ["x"]}, "'id' must be a string or an integer"),
    ({**CARD, "threshold": True}, "'threshold' must be a finite number"),
    ({**CARD, "keywords": ["(?V0)look"]}, "bad keyword pattern"),
    ({**CARD, "description": "x" * 30_000}, "tool card 0 is longer than 20000 characters"),
])
def test_bad_caller_cards_are_400(client, card, message):
    res = client.post("/route", json={"messages": HELLO, "tools": [card]})
    assert res.status_code == 400 and message in res.json["error"], res.json


def test_too_many_cards_and_too_large_a_body(client):
    cards = [{**CARD, "name": f"t{i}"} for i in range(1001)]
    res = client.post("/route", json={"messages": HELLO, "tools": cards})
    assert res.status_code == 400 and "more than 1000 cards" in res.json["error"]
    cards = [{**CARD, "name": f"t{i}", "examples": [f"example {j}" for j in range(100)]} for i in range(21)]
    res = client.post("/route", json={"messages": HELLO, "tools": cards})
    assert res.status_code == 400 and "more than 2000 examples and negatives" in res.json["error"]
    res = client.post("/route", data=b'{"messages": "' + b"x" * 8_000_001 + b'"}', content_type="application/json")
    assert res.status_code == 413 and res.json["status"] == 413
    assert res.json["error"] == "the request body is over 8,000,000 bytes (FUNES_MAX_BODY_BYTES)"


def test_a_callers_classifier_trains_off_the_request_and_replaces_the_bare_router(app, client):
    # names and descriptions of their own: a card text another test embeds too would share its cached vector
    cards = [{**CARD, "name": "city_forecast", "description": "The weather forecast for one city.",
              "examples": ["weather in Oslo", "will it rain tomorrow", "is it cold in Paris", "forecast for Rome",
                           "do I need an umbrella", "temperature in Lima"]},
             {**CARD, "name": "mail_someone", "description": "Write and send an email message.",
              "examples": ["email Bob the report", "send a mail to Ana", "write to my boss", "mail the invoice",
                           "tell Sam by email", "send an email saying hi"]}]
    factory = app.extensions["funes"].factory
    first = client.post("/route", json={"messages": HELLO, "tools": cards}).json
    assert first["no_tool_probability"] is None  # answered at once, routed as bare cards
    assert factory.wait_trained(120)
    ask = [{"role": "user", "content": "will it snow in Oslo tomorrow?"}]
    later = client.post("/route", json={"messages": ask, "tools": cards}).json
    assert later["no_tool_probability"] is not None and later["selected"] == ["city_forecast"]


def test_a_backtracking_keyword_is_cut_short(client, caplog):
    started = time.perf_counter()
    res = client.post("/route", json={"messages": [{"role": "user", "content": "a" * 40 + "!"}],
                                      "tools": [{**CARD, "keywords": ["(a|a)+$"]}]})
    # unbounded, (a|a)+$ on 41 characters backtracks for hours; each search gives up after 50 ms
    assert res.status_code == 200 and time.perf_counter() - started < 30
    assert "keyword pattern '(a|a)+$' timed out on a 41-character message" in caplog.text


@pytest.mark.parametrize("message", ["a" * 4000, "what is " * 500, "jaipur history " * 266, "aB3xY9kLm2Q " * 333,
                                     "show me " + "transactions payments " * 180 + "?"])
def test_the_packs_patterns_run_unbounded_so_none_backtracks(message):
    """The packs' keyword patterns run without a timeout (funes.selection.keyword_patterns): each must finish on
    the longest message accepted (MAX_MESSAGE_CHARS) in far less than the 2 s allowed here; one that
    backtracks takes hours."""
    import regex

    from funes.tools.loaders import load_packs

    patterns = [(t.name, p) for t in load_packs(["finance", "trip", "watch_history", "assistant", "knowledge"])
                for p in t.keywords]
    assert len(patterns) > 50 and len(message) <= 4000
    for name, pattern in patterns:
        try:
            regex.compile(pattern, regex.IGNORECASE | regex.V1).search(message, timeout=2.0)
        except TimeoutError:
            pytest.fail(f"{name}: {pattern!r} backtracks on a {len(message)}-character message")


def test_a_since_before_year_one_in_utc_is_400(client):
    res = client.get("/decisions?since=0001-01-01T00:00:00%2B14:00")
    assert res.status_code == 400 and "'since' is out of range" in res.json["error"]


def test_inspector_pages_carry_security_headers(client):
    headers = client.get("/inspector/").headers
    assert "script-src" not in headers["Content-Security-Policy"] and "default-src 'none'" in headers[
        "Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"
    assert headers["Referrer-Policy"] == "no-referrer"


def test_readyz_reports_each_part(client):
    res = client.get("/readyz")
    assert res.status_code == 200, res.json
    assert res.json["checks"] == {"database": "ok", "disk": "ok", "encoder": "ok", "llm": "ok"}


def test_readyz_is_503_naming_the_llm_when_it_is_down_but_not_its_address(factory, data_dir):
    port = closed_port()
    app = create_app({"DATA_DIR": data_dir, "LLM_BACKEND": "openai", "ENRICH": "off",
                      "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}, encoder=factory.encoder)
    res = app.test_client().get("/readyz")
    assert res.status_code == 503 and res.json["ready"] is False
    assert res.json["checks"]["llm"].startswith("the OpenAI-compatible server is unreachable")
    assert str(port) not in res.get_data(as_text=True) and res.json["checks"]["database"] == "ok"
    assert app.test_client().get("/healthz").status_code == 200  # alive, just not ready


def test_invented_tool_names_are_counted_as_unknown(client, ollama):
    ollama.script = [reply(tool_calls=[("zz_invented_tool_9", {})]), reply("Sorry.")]
    body = client.post("/chat", json={"message": "What's the weather like in Oslo right now?"}).json
    assert body["tool_calls"][0]["name"] == "zz_invented_tool_9" and "not available" in body["tool_calls"][0]["error"]
    metrics = client.get("/metrics").get_data(as_text=True)
    assert 'funes_tool_calls_total{outcome="error",tool="unknown"} 1.0' in metrics
    assert "zz_invented_tool_9" not in metrics
