"""Corrections: labels through the API, the inspector and the CLI, and routing that learns from them live."""
import json
import time

import pytest

import funes.selection.factory as factory_module
from funes import create_app
from funes.cli import cli
from funes.errors import BadRequest
from funes.llm.openai_backend import OpenAIBackend
from funes.store.db import Database
from funes.store.labels import LabelLog
from tests.test_cards import CURRENCY, WEATHER, FakeModel

RECIPES = {"name": "find_recipe", "description": "Find cooking recipes by dish or ingredient",
           "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}
TOOLS = [WEATHER, CURRENCY]
SLANG = "brolly needed?"  # slang the generated texts do not cover: no tool before a label


@pytest.fixture
def model():
    server = FakeModel()
    yield server
    server.close()


def _client(factory, database_url, data_dir, model, enrich):
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": database_url, "PACKS": ["assistant"], "ENRICH": enrich},
                     encoder=factory.encoder, llm=OpenAIBackend(model.url + "/v1", "fake-model", None, 30.0))
    return app.test_client()


@pytest.fixture
def client(factory, database_url, tmp_path, monkeypatch, model):
    """A service whose caller cards get enriched (by a fake model) before the tests label their decisions."""
    monkeypatch.setattr(factory_module, "RECHECK_S", 0.0)  # look for new labels on every request
    client = _client(factory, database_url, str(tmp_path), model, "auto")
    deadline = time.monotonic() + 60
    while route(client, "hello")["cards"] != "enriched":
        assert time.monotonic() < deadline, "the cards were not enriched"
        time.sleep(0.3)
    return client


def route(client, message, tools=TOOLS):
    body = client.post("/route", json={"messages": [{"role": "user", "content": message}], "tools": tools})
    assert body.status_code == 200
    return body.get_json()


def route_learnt(client, message):
    """Route once so the registry notices its new labels, let its classifier retrain off the request, route again."""
    route(client, message)
    assert client.application.extensions["funes"].factory.wait_trained(120)
    return route(client, message)


def test_a_label_teaches_the_callers_registry_without_a_restart(client):
    first = route(client, SLANG)
    assert first["selected"] != ["get_weather"] and first["registry"]
    made = client.post(f"/decisions/{first['decision_id']}/label", json={"tools": ["get_weather"], "by": "ana"})
    assert made.status_code == 201 and made.get_json()["labelled_by"] == "ana"
    again = route_learnt(client, SLANG)
    assert again["selected"] == ["get_weather"] and again["registry"] == first["registry"]


def test_labels_on_bare_cards_take_effect_at_once(factory, database_url, tmp_path, monkeypatch, model):
    monkeypatch.setattr(factory_module, "RECHECK_S", 0.0)
    client = _client(factory, database_url, str(tmp_path), model, "off")
    first = route(client, SLANG)
    assert first["cards"] == "bare" and first["selected"] != ["get_weather"]
    assert client.post(f"/decisions/{first['decision_id']}/label", json={"tools": ["get_weather"]}).status_code == 201
    again = route_learnt(client, SLANG)
    assert again["selected"] == ["get_weather"] and again["registry"] == first["registry"]
    assert again["cards"] == "bare"  # one label is too few texts for a classifier: still routed as bare cards


def test_a_no_tool_label_becomes_a_negative_of_what_was_picked(client):
    message = "should I pack shorts for Lisbon"
    first = route(client, message)
    assert first["selected"] == ["get_weather"]
    assert client.post(f"/decisions/{first['decision_id']}/label", json={"tools": []}).status_code == 201
    assert route_learnt(client, message)["selected"] == []


@pytest.mark.parametrize("body, status, message", [
    ({"tools": ["no_such_tool"]}, 400, "not a tool of that decision's registry: no_such_tool"),
    ({"tools": ["get_wether"]}, 400, "not a tool of that decision's registry: get_wether; did you mean 'get_weather'?"),
    ({"tools": "get_weather"}, 400, "'tools' must be a list of tool names"),
    ({}, 400, "'tools' must be a list of tool names"),
    ({"tools": [], "by": "x" * 129}, 400, "'by' must be a non-empty string of at most 128 characters"),
])
def test_bad_labels_are_400_naming_the_problem(client, body, status, message):
    decision = route(client, "weather in Oslo?")
    response = client.post(f"/decisions/{decision['decision_id']}/label", json=body)
    assert response.status_code == status and message in response.get_json()["error"]
    assert client.post("/decisions/999999/label", json={"tools": []}).status_code == 404


@pytest.mark.parametrize("tools, message", [
    (["set_ligth"], "not a tool of that decision's registry: set_ligth; did you mean 'set_light'?"),
    (["frobnicate"], "not a tool of that decision's registry: frobnicate"),
    (["set_light", "zzz", "get_wether"], "not a tool of that decision's registry: get_wether; did you mean "
                                          "'get_weather'? (also unknown: zzz)"),
])
def test_a_label_naming_no_tool_of_the_registry_names_the_closest_one(tmp_path, tools, message):
    labels = LabelLog(Database(f"sqlite:///{tmp_path}/labels.db"))
    with pytest.raises(BadRequest) as raised:
        labels.add({"id": 1, "registry": "r1"}, tools, "ana", names={"set_light", "get_weather", "convert_currency"})
    assert str(raised.value) == message and raised.value.status == 400


def test_the_inspector_labels_a_decision_with_its_form(client):
    decision = route(client, "convert 20 francs please")
    page = client.get(f"/inspector/{decision['decision_id']}").get_data(as_text=True)
    assert 'id="label"' in page and 'value="convert_currency"' in page
    saved = client.post(f"/inspector/{decision['decision_id']}/label", data={"tools": ["convert_currency"]})
    assert saved.status_code == 303
    page = client.get(f"/inspector/{decision['decision_id']}").get_data(as_text=True)
    assert '<b id="label-tools">convert_currency</b> by inspector' in page


def test_cli_labels_a_logged_decision(runner, factory, data_dir, monkeypatch):
    monkeypatch.setenv("FUNES_PACKS", '["assistant"]')  # the command knows the service's registry: names checked
    app = create_app({"DATA_DIR": data_dir, "PACKS": ["assistant"]}, encoder=factory.encoder)
    decision = app.test_client().post("/route", json={"messages": [{"role": "user", "content": "hi"}]}).get_json()
    result = runner.invoke(cli, ["decisions", "label", str(decision["decision_id"]), "get_weather", "--by", "bo"])
    assert result.exit_code == 0, result.output
    assert f"decision {decision['decision_id']} labelled get_weather" in result.output
    label = LabelLog(app.extensions["funes"].db).latest(decision["decision_id"])
    assert label["tools"] == ["get_weather"] and label["labelled_by"] == "bo"
    unknown = runner.invoke(cli, ["decisions", "label", str(decision["decision_id"]), "get_wether"])
    assert unknown.exit_code == 1 and unknown.output.splitlines() == [
        "Error: not a tool of that decision's registry: get_wether; did you mean 'get_weather'?"]
    missing = runner.invoke(cli, ["decisions", "label", "987654", "get_weather"])
    assert missing.exit_code == 1 and "no decision 987654" in missing.output


def test_calibrate_from_log_fits_on_labelled_decisions(runner, factory, tmp_path, monkeypatch):
    tools = tmp_path / "tools.jsonl"
    tools.write_text("".join(json.dumps(t) + "\n" for t in [*TOOLS, RECIPES]))
    env = {"TOOLS_FILES": json.dumps([str(tools)]), "PACKS": "[]", "ENRICH": "off",
           "DATABASE_URL": f"sqlite:///{tmp_path}/labels.db"}
    for name, value in env.items():  # the service and the command share one configuration
        monkeypatch.setenv(f"FUNES_{name}", value)
    app = create_app(encoder=factory.encoder)
    client = app.test_client()
    none = runner.invoke(cli, ["calibrate", "--from-log", "--out", str(tmp_path / "cal.json")])
    assert none.exit_code == 1 and "label decisions first" in none.output
    labels = {"weather in Oslo?": ["get_weather"], "20 USD in yen": ["convert_currency"],
              "a pancake recipe": ["find_recipe"], "tell me a joke": [], "rain in Lima tomorrow?": ["get_weather"],
              "who wrote Hamlet?": [], "lasagne with spinach": ["find_recipe"], "euros to pounds": ["convert_currency"]}
    for message, expected in labels.items():
        decision = client.post("/route", json={"messages": [{"role": "user", "content": message}]}).get_json()
        assert client.post(f"/decisions/{decision['decision_id']}/label", json={"tools": expected}).status_code == 201
    result = runner.invoke(cli, ["calibrate", "--from-log", "--out", str(tmp_path / "cal.json")])
    assert result.exit_code == 0, result.output
    assert "TOOL_THRESHOLD" in (tmp_path / "cal.json").read_text()
    assert "fit" in result.output and "held-out" in result.output
    neither = runner.invoke(cli, ["calibrate", "--out", str(tmp_path / "cal.json")])
    assert neither.exit_code == 1 and "give --cases FILE or --from-log" in neither.output


def test_bench_labels_measures_enriched_cards_only_once_they_are_ready(runner, model, tmp_path, monkeypatch):
    tools, cases = tmp_path / "tools.jsonl", tmp_path / "cases.jsonl"
    tools.write_text("".join(json.dumps({**t, "description": t["description"] + " (bench)"}) + "\n" for t in TOOLS))
    said = {"weather in Oslo?": "get_weather", "rain in Lima tomorrow?": "get_weather",
            "20 USD in yen": "convert_currency", "euros to pounds": "convert_currency",
            "who wrote Hamlet?": None, "tell me a joke": None}
    rows = [{"id": f"c{i}", "messages": [{"role": "user", "content": m}], "expected_tools": [t] if t else []}
            for i, (m, t) in enumerate(said.items())]
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("FUNES_LLM_BACKEND", "openai")
    monkeypatch.setenv("FUNES_OPENAI_BASE_URL", model.url + "/v1")
    monkeypatch.setenv("FUNES_OPENAI_MODEL", "fake-model")
    command = ["bench-labels", "--cases", str(cases), "--tools", str(tools), "--json"]
    early = runner.invoke(cli, command)
    assert early.exit_code == 1 and "not enriched yet" in early.output  # background work would land mid-run
    assert runner.invoke(cli, ["cards", "enrich", str(tools), "--out", str(tmp_path / "out.jsonl")]).exit_code == 0
    result = runner.invoke(cli, command)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["cards"] == "enriched" and report["labelled"] + report["scored"] == len(said)
    assert 0 <= report["after"]["lenient_accuracy"] <= 1
