"""Generated requests over every path of the OpenAPI document: whatever arrives, Funes answers below 500.

FUNES_FUZZ_EXAMPLES sets how many requests (default 300; the README's figure ran 2,000).
"""
import base64
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from funes.web.openapi import PATHS
from tests.ollama_wire import reply

EXAMPLES = int(os.environ.get("FUNES_FUZZ_EXAMPLES", "300"))
FIELDS = ["message", "messages", "tools", "conversation_id", "user_id", "role", "content", "name", "description",
          "parameters", "examples", "keywords", "threshold", "id", "model", "stream", "function", "type",
          "tool_choice", "by", "negatives", "generated", "requires", "ends_turn"]
SENT: list[tuple[str, str]] = []
ROUTES = [(method.upper(), path) for path, ops in PATHS.items() for method in ops]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.text(max_size=40), st.sampled_from(["user", "assistant", "function", "(a|a)+$", "(?V0)x",
                                                           "0001-01-01T00:00:00+14:00", "\ud800", "x" * 5000]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=8)), inner,
                                                 max_size=5)), max_leaves=20)
bodies = st.one_of(values.map(lambda v: json.dumps(v).encode()),
                   st.dictionaries(st.sampled_from(FIELDS), values, max_size=6).map(lambda v: json.dumps(v).encode()),
                   st.binary(max_size=64), st.sampled_from([b"NaN", b'{"messages": Infinity}', b"[" * 5000]))
queries = st.dictionaries(st.sampled_from(["limit", "path", "tool", "since", "conversation_id"]),
                          st.one_of(st.text(max_size=20), st.integers(-10, 10**20).map(str),
                                    st.sampled_from(["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00",
                                                     "proxy", "route"])), max_size=3)


KEY = {}  # the valid key of the keyed run, which some generated requests present
ascii_text = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30)
headers = st.one_of(
    st.none(), st.just("key"), ascii_text.map(lambda t: {"Authorization": f"Bearer {t}"}),
    st.binary(max_size=30).map(lambda b: {"Authorization": "Basic " + base64.b64encode(b).decode()}),
    ascii_text.map(lambda t: {"Authorization": t}), ascii_text.map(lambda t: {"X-API-Key": t}))


@pytest.fixture(params=["open", "keyed"])
def fuzz_client(request, app, ollama):
    ollama.script = [reply("ok")]  # the fake LLM answers every turn; /v1 and /api go to it as their upstream
    app.extensions["funes"].settings.update(OPENAI_BASE_URL=f"{ollama.url}/v1")
    KEY.clear()
    SENT.clear()
    if request.param == "keyed":  # a key in force: most requests are 401, the keyed ones reach the routes
        KEY["X-API-Key"] = app.extensions["funes"].keys.add("fuzzer", operator=True)[0]
    return app.test_client()


@settings(max_examples=max(1, EXAMPLES // len(ROUTES)), deadline=None, suppress_health_check=list(HealthCheck),
          database=None)
@given(body=bodies, query=queries, decision_id=st.integers(-5, 2**64), header=headers)
def run_one(client, route, body, query, decision_id, header):
    SENT.append(route)
    method, path = route
    url = path.replace("{decision_id}", str(decision_id))
    res = client.open(url, method=method, data=body if method == "POST" else None, query_string=query,
                      content_type="application/json", headers=KEY if header == "key" else header)
    assert res.status_code < 500, (method, url, body[:200], res.status_code, res.get_data(as_text=True)[:300])
    if res.status_code >= 400 and path != "/metrics":
        assert "error" in res.get_json(), res.get_data(as_text=True)[:200]


def test_no_generated_request_gets_a_5xx(fuzz_client, database_url):
    if database_url.startswith("postgresql"):
        pytest.skip("one database is enough for the fuzzing run; SQLite is the default")
    for route in ROUTES:  # every path gets its share of the examples
        run_one(fuzz_client, route)
    assert len(SENT) >= EXAMPLES - len(ROUTES) and set(SENT) == set(ROUTES)  # the requests were made, on every path
    print(f"{len(SENT)} generated requests over {len(ROUTES)} paths, none answered 5xx")
