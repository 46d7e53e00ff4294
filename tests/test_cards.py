"""Card enrichment: the CLI and library over a fake OpenAI-compatible server, fitting, caching, automatic use."""
import hashlib
import json
import random
import time

import pytest

from funes import create_app
from funes.cards import EnrichmentCache, enrich, fit
from funes.cards.auto import AutoEnrichment
from funes.cards.prompt import PROMPT_VERSION, card_hash
from funes.cards.variants import misspell
from funes.cli import cli
from funes.llm.openai_backend import OpenAIBackend
from funes.tools.loaders import load_cards
from tests.wire import JsonServer

WEATHER = {"name": "get_weather", "description": "Current weather and forecast for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "pack": "mine"}
CURRENCY = {"name": "convert_currency", "description": "Convert an amount between two currencies at today's rate",
            "parameters": {"type": "object", "properties": {"amount": {"type": "number"}}}, "pack": "mine"}
WRITTEN = {**CURRENCY, "name": "written_tool", "examples": ["SECRET WRITTEN EXAMPLE"], "pack": "other"}

# What a model might write for each card: mostly on topic, stray examples (another card's, the prompt's worked
# tool's), one negative that is really a request.
ANSWERS = {
    "get_weather": {
        "direct": ["What's the weather in Oslo today?", "Forecast for Madrid tomorrow", "Is it raining in Hanoi now?"],
        "indirect": ["Should I take an umbrella in Paris?", "Do I need a coat in Berlin this evening?",
                     "Convert 50 dollars to euros", "Where is my DHL parcel right now?"],
        "terse": ["weather Lisbon", "forecast Rome", "rain today?"],
        "long": ["I am flying to Chicago tonight. What will the weather be like when I land?"],
        "spanish": ["¿Qué tiempo hace en Bogotá?", "¿Va a llover mañana en Lima?"],
        "vietnamese": ["Thời tiết Hà Nội hôm nay thế nào?", "Ngày mai Sài Gòn có mưa không?"],
        "hinglish": ["aaj Delhi ka mausam kaisa hai?", "kal Mumbai mein baarish hogi kya?"],
        "followup": ["and tomorrow?", "what about Porto?"],
        "no_tool": ["Why is the sky blue?", "How do hurricanes form?", "What is the weather in Oslo today?",
                    "Who invented the thermometer?", "What is a cold front?", "How many people live in Moscow?"],
        "keywords": ["weather", "forecast", "rain", "umbrella", "x"],
    },
    "convert_currency": {
        "direct": ["Convert 100 USD to EUR", "How many yen is 20 pounds?", "50 euros in dollars"],
        "indirect": ["How much is my 300 dollars worth in Mexico?", "What would 10k rupees be in USD?",
                     "Is 40 francs a lot in dollars?"],
        "terse": ["usd to eur", "gbp in jpy", "convert 10 aud"],
        "long": ["I am paid in pounds but I rent in euros. How many euros is 2000 pounds today?"],
        "spanish": ["¿Cuántos euros son 100 dólares?", "Convierte 50 libras a pesos"],
        "vietnamese": ["100 đô la bằng bao nhiêu đồng?", "Đổi 50 euro sang đô la"],
        "hinglish": ["100 dollar kitne rupaye hote hain?", "50 euro ko rupees mein badlo"],
        "followup": ["and in yen?", "what about 200?"],
        "no_tool": ["Why did the euro fall in 2022?", "What is inflation?", "Who prints the dollar?",
                    "What currency does Japan use?", "Is bitcoin a currency?", "How do exchange rates work?"],
        "keywords": ["convert", "exchange", "currency", "rate", "weather"],
    },
}


class FakeModel(JsonServer):
    """An OpenAI-compatible server answering enrichment prompts with ANSWERS for the card it is asked about."""

    def __init__(self, answers=ANSWERS):
        self.answers = answers
        super().__init__(self._respond)

    def _respond(self, request):
        card = request["json"]["messages"][-1]["content"]
        name = next(n for n in self.answers if f"name: {n} " in card)
        content = self.answers[name] if isinstance(self.answers[name], str) else json.dumps(self.answers[name])
        return 200, {"choices": [{"message": {"role": "assistant", "content": content}}]}


@pytest.fixture
def model():
    server = FakeModel()
    yield server
    server.close()


def _llm(model):
    return OpenAIBackend(model.url + "/v1", "fake-model", None, 30.0)


def test_misspell_changes_long_words_only_and_repeats_for_a_seed():
    text = "What is the weather in Lisbon tomorrow?"
    first, again = misspell(text, random.Random(3)), misspell(text, random.Random(3))
    assert first == again and first != text
    assert first.split()[:2] == ["What", "is"]  # short words are left alone
    assert misspell("ok hi", random.Random(1)) == "ok hi"


def test_enrich_writes_generated_texts_filtered_against_the_other_cards(model, factory, text_encoder, tmp_path):
    registry = load_cards([WEATHER, CURRENCY])
    enriched = enrich(registry, _llm(model), text_encoder, str(tmp_path))
    weather = enriched["get_weather"].generated
    assert weather is not None and weather.model == "fake-model"
    assert "Convert 50 dollars to euros" not in weather.examples  # closer to the currency card
    assert "Where is my DHL parcel right now?" not in weather.examples  # a copy of the prompt's worked tool
    assert "What's the weather in Oslo today?" in weather.examples
    assert any(t not in sum(ANSWERS["get_weather"].values(), []) for t in weather.examples)  # misspelt variants
    assert len(weather.examples) >= 20
    assert "What is the weather in Oslo today?" not in weather.negatives  # a request, not a negative
    assert "How many people live in Moscow?" in weather.negatives
    assert "What is forecast?" in weather.negatives  # made by code from the card's own keywords
    assert not any("weather" in n.split() for n in weather.negatives if n.startswith("What is"))  # a shared word
    assert "x" not in weather.keywords and "rain" in weather.keywords
    assert "weather" not in weather.keywords + enriched["convert_currency"].generated.keywords  # both cards' word
    assert enriched["get_weather"].examples == ()  # written examples stay apart from generated ones
    request = model.requests[0]["json"]
    assert request["seed"] == 7 and request["response_format"]["type"] == "json_schema"


def test_enrichment_is_cached_by_card_model_and_prompt(model, factory, text_encoder, tmp_path):
    registry = load_cards([WEATHER])
    enrich(registry, _llm(model), text_encoder, str(tmp_path))
    enrich(registry, _llm(model), text_encoder, str(tmp_path))
    assert len(model.requests) == 1
    changed = load_cards([{**WEATHER, "description": "Weather for a city, now and for the next days"}])
    enrich(changed, _llm(model), text_encoder, str(tmp_path))
    assert len(model.requests) == 2


def test_cli_enriches_a_file_without_reading_written_examples(model, runner, tmp_path, monkeypatch):
    tools = tmp_path / "tools.jsonl"
    tools.write_text("".join(json.dumps(c) + "\n" for c in (WEATHER, CURRENCY, WRITTEN)))
    monkeypatch.setenv("FUNES_LLM_BACKEND", "openai")
    monkeypatch.setenv("FUNES_OPENAI_BASE_URL", model.url + "/v1")
    model.answers = {**ANSWERS, "written_tool": ANSWERS["convert_currency"]}
    out = tmp_path / "out.jsonl"
    result = runner.invoke(cli, ["cards", "enrich", str(tools), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "3 of 3 cards enriched; 3 written now, median" in result.output
    cards = [json.loads(line) for line in out.read_text().splitlines()]
    assert [c["name"] for c in cards] == ["get_weather", "convert_currency", "written_tool"]
    assert cards[2]["examples"] == ["SECRET WRITTEN EXAMPLE"]  # the card as written, plus `generated`
    assert all(len(c["generated"]["examples"]) >= 15 for c in cards)
    assert not any("SECRET" in json.dumps(r["json"]) for r in model.requests)
    assert load_cards(cards)["get_weather"].generated.negatives  # the output loads back as cards

    only = runner.invoke(cli, ["cards", "enrich", str(tools), "--pack", "other", "--out", str(out)])
    assert only.exit_code == 0 and len(out.read_text().splitlines()) == 1


def test_another_seed_or_temperature_is_sampled_and_cached_apart(model, runner, tmp_path, monkeypatch):
    data_dir = tmp_path / "data"
    monkeypatch.setenv("FUNES_DATA_DIR", str(data_dir))
    tools = tmp_path / "tools.jsonl"
    tools.write_text(json.dumps(WEATHER) + "\n")
    monkeypatch.setenv("FUNES_LLM_BACKEND", "openai")
    monkeypatch.setenv("FUNES_OPENAI_BASE_URL", model.url + "/v1")
    out = str(tmp_path / "out.jsonl")
    for seed, temperature in (("7", "0.8"), ("8", "0.8"), ("8", "0.8"), ("7", "0.4")):
        monkeypatch.setenv("FUNES_ENRICH_SEED", seed)
        monkeypatch.setenv("FUNES_ENRICH_TEMPERATURE", temperature)
        assert runner.invoke(cli, ["cards", "enrich", str(tools), "--out", out]).exit_code == 0
    sent = [(r["json"]["seed"], r["json"]["temperature"]) for r in model.requests]
    assert sent == [(7, 0.8), (8, 0.8), (7, 0.4)]  # the second seed-8 run came from the cache
    tool = load_cards([WEATHER])["get_weather"]
    default = EnrichmentCache(data_dir, "fake-model")
    assert default.key(tool) == hashlib.sha256(  # the default sampling keeps the keys cached before it was a setting
        f"{card_hash(tool)}\0fake-model\0{PROMPT_VERSION}".encode()).hexdigest()[:32]
    jobs = default.store.jobs([EnrichmentCache(data_dir, "local", *s).key(tool) for s in ((7, 0.8), (8, 0.8), (7, 0.4))])
    assert [j.state for j in jobs.values()] == ["done"] * 3  # three rows, one per sampling


def test_cli_skips_a_card_the_model_answers_badly_and_tries_it_again_next_run(runner, tmp_path, monkeypatch):
    server = FakeModel({"get_weather": "not json at all", "convert_currency": ANSWERS["convert_currency"]})
    try:
        tools = tmp_path / "tools.json"
        # described apart from the other tests' cards: their cached answers must not be reused here
        tools.write_text(json.dumps([{**WEATHER, "description": "Weather now"}, CURRENCY]))
        monkeypatch.setenv("FUNES_LLM_BACKEND", "openai")
        monkeypatch.setenv("FUNES_OPENAI_BASE_URL", server.url + "/v1")
        out = tmp_path / "out.json"
        result = runner.invoke(cli, ["cards", "enrich", str(tools), "--out", str(out)])
        assert result.exit_code == 1  # written, but a card was skipped
        assert "skipped: get_weather: the model's answer is not the expected JSON" in result.output
        cards = json.loads(out.read_text())
        assert "generated" not in cards[0] and cards[1]["generated"]["examples"]
        again = runner.invoke(cli, ["cards", "enrich", str(tools), "--out", str(out)])  # a failure is no result
        assert "skipped: get_weather" in again.output and "written now" not in again.output
        asked = [r["json"]["messages"][-1]["content"] for r in server.requests]
        assert sum("name: get_weather " in a for a in asked) == 2  # asked again; the currency card was kept
        assert sum("name: convert_currency " in a for a in asked) <= 1
    finally:
        server.close()
    missing = runner.invoke(cli, ["cards", "enrich", str(tmp_path / "nope.json"), "--out", str(out)])
    assert missing.exit_code == 1 and "tools file not found" in missing.output


def test_enriched_registry_gets_a_classifier_and_says_so(model, factory, text_encoder, tmp_path):
    settings = {**factory.settings, "DATA_DIR": str(tmp_path)}
    registry = load_cards([WEATHER, CURRENCY])
    auto = AutoEnrichment(settings, text_encoder, _llm(model))
    assert auto.apply(registry) is registry  # nothing cached yet: routed bare
    assert factory.router(registry).select("weather in Oslo?").cards == "bare"
    enrich(registry, _llm(model), text_encoder, str(tmp_path))
    router = factory.router(auto.apply(registry))
    assert router.classifier is not None
    decision = router.select("will it rain in Quito tomorrow?")
    assert decision.cards == "enriched" and decision.selected == ("get_weather",)
    assert router.select("How do hurricanes form?").selected == ()
    off = AutoEnrichment({**settings, "ENRICH": "off"}, text_encoder, _llm(model))
    assert off.apply(registry) is registry
    with pytest.raises(ValueError, match="ENRICH must be one of"):
        AutoEnrichment({**settings, "ENRICH": "sometimes"}, text_encoder, _llm(model))


def test_service_enriches_a_callers_cards_in_the_background(model, factory, tmp_path):
    app = create_app({"DATA_DIR": str(tmp_path), "PACKS": ["assistant"]}, encoder=factory.encoder, llm=_llm(model))
    client = app.test_client()
    body = {"messages": [{"role": "user", "content": "will it rain in Quito tomorrow?"}], "tools": [WEATHER, CURRENCY]}
    first = client.post("/route", json=body).get_json()
    assert first["cards"] == "bare"
    deadline = time.monotonic() + 60
    while (latest := client.post("/route", json=body).get_json())["cards"] != "enriched":
        assert time.monotonic() < deadline, "the caller's cards were not enriched in the background"
        time.sleep(0.5)
    assert latest["selected"] == ["get_weather"]
    assert client.get(f"/decisions/{latest['decision_id']}").get_json()["cards"] == "enriched"
    assert client.get(f"/decisions/{first['decision_id']}").get_json()["cards"] == "bare"
    assert {r["json"]["messages"][-1]["content"].split("\n")[1] for r in model.requests} == {
        "name: get_weather (get weather)", "name: convert_currency (convert currency)"}


def test_claims_keep_two_workers_off_one_card_until_the_lease_ends(tmp_path):
    tool = load_cards([WEATHER])["get_weather"]
    one, two = EnrichmentCache(tmp_path, "m"), EnrichmentCache(tmp_path, "m")
    one.enqueue([tool])
    key = one.key(tool)
    assert one.store.claim(key, "host/1/a", 60) and not two.store.claim(key, "host/2/b", 60)
    one.store.release(key, "host/1/a")
    assert two.store.claim(key, "host/2/b", 0.01)
    time.sleep(0.05)
    assert one.store.claim(key, "host/1/a", 60)  # the first holder's lease lapsed: taken again
    (tmp_path / "enriched").mkdir()
    other = load_cards([CURRENCY])["convert_currency"]
    (tmp_path / "enriched" / f"{one.key(other)}.json").write_text('{"no texts": 1}')
    assert one.get(other) is None  # a foreign or torn file is a cache miss, not an error
    assert EnrichmentCache(tmp_path, "other-model").key(tool) != one.key(tool)


def test_a_card_the_model_failed_on_stays_bare_beside_enriched_ones(factory, text_encoder, tmp_path):
    server = FakeModel({"get_weather": "not json at all", "convert_currency": ANSWERS["convert_currency"]})
    registry = load_cards([{**WEATHER, "description": "Weather right now"}, CURRENCY])
    try:
        enrich(registry, _llm(server), text_encoder, str(tmp_path))
        auto = AutoEnrichment({**factory.settings, "DATA_DIR": str(tmp_path)}, text_encoder, _llm(server))
    finally:
        server.close()
    assert auto.ready(registry)  # the failure is an outcome: nothing left to wait for
    applied = {t.name: t for t in auto.apply(registry)}
    assert applied["get_weather"].bare and applied["convert_currency"].generated.examples
    state, reason = auto.card_state(registry["get_weather"])
    assert state == "failed" and "not the expected JSON" in reason and "attempt 1, retry in" in reason


def test_fit_leaves_cards_without_texts_alone(factory, text_encoder):
    registry = load_cards([WEATHER, WRITTEN])
    fitted = fit(registry, {}, text_encoder, "m")
    assert [t.generated for t in fitted] == [None, None]

