"""Identity: API keys name users; with any key in force, each user sees only their own conversations,
decisions and memories, and only operators read everyone's, label and scrape /metrics."""
import base64

import pytest

from funes import create_app
from funes.store.keys import configured_keys
from funes.web.auth import presented_key
from tests.ollama_wire import reply

ALICE_KEY = "alice-key-0123456789"
BOB_KEY = "bob-key-0123456789ab"
OPS_KEY = "ops-key-0123456789ab"
KEYS = {ALICE_KEY: "alice", BOB_KEY: "bob", OPS_KEY: {"user": "ops", "operator": True}}


@pytest.fixture
def keyed(factory, data_dir, database_url, ollama):
    from funes import create_app
    return create_app({"DATA_DIR": data_dir, "DATABASE_URL": database_url, "LLM_BACKEND": "ollama",
                       "OLLAMA_HOST": ollama.url, "OLLAMA_MODEL": "fake", "API_KEYS": KEYS},
                      encoder=factory.encoder).test_client()


def as_(key):
    return {"Authorization": f"Bearer {key}"}


def test_with_keys_in_force_a_request_without_a_known_key_is_a_401_but_health_stays_open(keyed):
    for res in (keyed.post("/route", json={"messages": [{"role": "user", "content": "hi"}]}),
                keyed.get("/decisions", headers=as_("not-a-key-at-all-000")), keyed.get("/inspector/")):
        assert res.status_code == 401 and "API key" in res.json["error"]
        assert res.headers["WWW-Authenticate"].startswith("Basic")
    assert keyed.get("/healthz").status_code == 200
    assert keyed.get("/openapi.json").status_code == 200
    assert keyed.get("/no-such-page").status_code == 404


def test_the_key_names_the_user_and_another_users_conversation_and_memory_stay_out_of_reach(keyed, ollama):
    ollama.script = [reply("Noted: your PIN is 4417.")]
    mine = keyed.post("/chat", json={"message": "remember my PIN is 4417"}, headers=as_(ALICE_KEY)).json
    assert keyed.get(f"/decisions/{mine['decision_id']}", headers=as_(ALICE_KEY)).json["user_id"] == "alice"
    claimed = keyed.post("/chat", json={"message": "what is my PIN?", "user_id": "alice"}, headers=as_(BOB_KEY))
    assert claimed.status_code == 403 and "user_id" in claimed.json["error"]
    other = keyed.post("/chat", json={"message": "what is my PIN?", "conversation_id": mine["conversation_id"]},
                       headers=as_(BOB_KEY))
    assert other.status_code == 404
    ollama.script = [reply("I don't know your PIN.")]
    bob = keyed.post("/chat", json={"message": "what is my PIN number?"}, headers=as_(BOB_KEY)).json
    assert all("4417" not in m["text"] for m in bob["memories_used"])


def test_users_read_only_their_own_decisions_and_operators_read_all(keyed, ollama):
    ollama.script = [reply("Hello Alice."), reply("Hello Bob.")]
    a = keyed.post("/chat", json={"message": "hello there"}, headers=as_(ALICE_KEY)).json["decision_id"]
    b = keyed.post("/chat", json={"message": "hello there"}, headers=as_(BOB_KEY)).json["decision_id"]
    seen_by_bob = {d["id"] for d in keyed.get("/decisions?limit=500", headers=as_(BOB_KEY)).json["decisions"]}
    assert b in seen_by_bob and a not in seen_by_bob
    assert {d["user_id"] for d in keyed.get("/decisions?limit=500", headers=as_(BOB_KEY)).json["decisions"]} == {"bob"}
    assert keyed.get(f"/decisions/{a}", headers=as_(BOB_KEY)).status_code == 404
    assert keyed.get(f"/inspector/{a}", headers=as_(BOB_KEY)).status_code == 404
    page = keyed.get("/inspector/", headers=as_(BOB_KEY)).get_data(as_text=True)
    assert f"/inspector/{b}" in page and f"/inspector/{a}\"" not in page
    seen_by_ops = {d["id"] for d in keyed.get("/decisions?limit=500", headers=as_(OPS_KEY)).json["decisions"]}
    assert {a, b} <= seen_by_ops


def test_labelling_and_metrics_are_operator_actions(keyed):
    routed = keyed.post("/route", json={"messages": [{"role": "user", "content": "weather in Oslo?"}]},
                        headers=as_(BOB_KEY)).json
    assert keyed.get(f"/decisions/{routed['decision_id']}", headers=as_(BOB_KEY)).json["user_id"] == "bob"
    refused = keyed.post(f"/decisions/{routed['decision_id']}/label", json={"tools": []}, headers=as_(BOB_KEY))
    assert refused.status_code == 403 and "operator" in refused.json["error"]
    assert keyed.get("/metrics", headers=as_(BOB_KEY)).status_code == 403
    label = keyed.post(f"/decisions/{routed['decision_id']}/label", json={"tools": [], "by": "someone else"},
                       headers=as_(OPS_KEY))
    assert label.status_code == 201 and label.json["labelled_by"] == "ops"
    assert keyed.get("/metrics", headers=as_(OPS_KEY)).status_code == 200


def test_the_inspector_takes_the_key_as_a_basic_auth_password(keyed):
    basic = base64.b64encode(f"anyone:{OPS_KEY}".encode()).decode()
    assert keyed.get("/inspector/", headers={"Authorization": f"Basic {basic}"}).status_code == 200
    assert keyed.get("/inspector/", headers={"X-API-Key": ALICE_KEY}).status_code == 200


def test_keys_from_the_table_work_until_revoked(app, client):
    keys = app.extensions["funes"].keys
    assert client.get("/decisions").status_code == 200  # no key in force: open for local use
    key, row = keys.add("carol")
    assert client.get("/decisions").status_code == 401
    assert client.get("/decisions", headers=as_(key)).status_code == 200
    assert "key_hash" not in row and key.startswith(row["prefix"])
    keys.revoke(row["id"])
    assert client.get("/decisions").status_code == 200  # the last key revoked: open again
    keys.add("dave")
    assert client.get("/decisions", headers=as_(key)).json["error"] == "unknown or revoked API key"


def test_without_keys_an_anonymous_caller_cannot_take_over_a_named_users_conversation(client, ollama):
    ollama.script = [reply("Hi Alice."), reply("Hi again.")]
    alice = client.post("/chat", json={"message": "hello", "user_id": "alice"}).json
    taken = client.post("/chat", json={"message": "what did I say?", "conversation_id": alice["conversation_id"]})
    assert taken.status_code == 404
    anon = client.post("/chat", json={"message": "hello"}).json
    again = client.post("/chat", json={"message": "and again", "conversation_id": anon["conversation_id"]})
    assert again.status_code == 200, again.json


def test_presented_key_reads_each_header_form():
    assert presented_key({"X-API-Key": " k1 ", "Authorization": "Bearer up"}) == ("k1", "X-API-Key")
    assert presented_key({"Authorization": "Bearer k2"}) == ("k2", "Authorization")
    assert presented_key({"Authorization": "Basic " + base64.b64encode(b"u:k3").decode()}) == ("k3", "Authorization")
    assert presented_key({"Authorization": "Basic !!!"}) == (None, None)
    assert presented_key({}) == (None, None)


def test_an_app_with_a_short_key_does_not_start(data_dir):
    with pytest.raises(ValueError, match="16 characters"):
        create_app({"DATA_DIR": data_dir, "API_KEYS": {"short": "alice"}})


def test_configured_keys_must_be_long_enough():
    with pytest.raises(ValueError, match="16 characters"):
        configured_keys({"short": "alice"})
    with pytest.raises(Exception, match="user"):
        configured_keys({"a-long-enough-key-000": {"operator": True}})
