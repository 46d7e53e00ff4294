"""Faults an outside tester found, each reproduced over the wire: a small real upstream answers wrongly, and the
client is Flask's test client or a real HTTP client against a real server."""
import json
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import sqlalchemy
from werkzeug.serving import BaseWSGIServer, make_server

from funes import create_app
from tests.proxy_wire import Reply, ollama_stream, openai_stream, whole
from tests.test_stream import events
from tests.wire import JsonServer, closed_port

JOKE = "tell me a joke"  # no tool fits: the memory path, one streamed LLM step
WEATHER = "What's the weather like in Oslo right now?"
CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def make_app(factory, data_dir, tmp_path, upstream, backend: str, **extra):
    llm = ({"LLM_BACKEND": "openai", "OPENAI_BASE_URL": f"{upstream.url}/v1", "OPENAI_MODEL": "m"}
           if backend == "openai" else {"LLM_BACKEND": "ollama", "OLLAMA_HOST": upstream.url, "OLLAMA_MODEL": "m"})
    return create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                       **llm, **extra}, encoder=factory.encoder)


def openai_delta(**delta) -> dict:
    return {**CHUNK, "choices": [{"index": 0, "delta": delta}]}


def ollama_chunk(content: object = "", done: bool = False) -> dict:
    return {"model": "m", "created_at": "2026-11-24T00:00:00Z", "message": {"role": "assistant", "content": content},
            "done": done, **({"done_reason": "stop", "prompt_eval_count": 4, "eval_count": 3} if done else {})}


def sse(*lines: str) -> Reply:
    return Reply(content_type="text/event-stream", chunks=[line.encode() for line in lines])


def assert_nothing_stored(app, conversation_id: str) -> dict:
    """The turn left its decision (not ok, no reply) and nothing in the conversation or long-term memory."""
    funes = app.extensions["funes"]
    row = funes.log.query(limit=1)[0]
    assert row["outcome"] == "llm_bad_reply" and row["reply"] is None
    assert funes.service.conversations.recent(conversation_id, 10) == []
    assert funes.memory.search(f"anon:{conversation_id}", JOKE, min_score=-1.0) == []
    return row


BROKEN_STREAMS = {
    "openai": {
        "plain JSON": whole({"choices": [{"message": {"role": "assistant", "content": "Why did the..."}}]}),
        "garbage": Reply(content_type="text/html", chunks=[b"<html>502 Bad Gateway</html>"]),
        "no [DONE]": sse(f"data: {json.dumps(openai_delta(content='Why did the'))}\n\n"),
        "not JSON": sse("data: {oops\n\n", "data: [DONE]\n\n"),
        "integer content": sse(f"data: {json.dumps(openai_delta(content=5))}\n\n", "data: [DONE]\n\n"),
        "string tool_calls": sse(f"data: {json.dumps(openai_delta(tool_calls='get_weather'))}\n\n",
                                 "data: [DONE]\n\n"),
        "nothing said": openai_stream(openai_delta(role="assistant")),
    },
    "ollama": {
        "no done": ollama_stream(ollama_chunk("Why did the")),
        "garbage": Reply(content_type="text/html", chunks=[b"<html>502 Bad Gateway</html>"]),
        "integer content": ollama_stream(ollama_chunk(5, done=True)),
        "nothing said": ollama_stream(ollama_chunk("", done=True)),
    },
}
CASES = [(backend, name) for backend, replies in BROKEN_STREAMS.items() for name in replies]
PATHS = {"openai": "/v1/chat/completions", "ollama": "/api/chat"}


@pytest.mark.parametrize("backend,case", CASES, ids=[f"{b}-{c}" for b, c in CASES])
def test_a_broken_upstream_stream_ends_in_an_error_event_and_stores_nothing(factory, data_dir, tmp_path, upstream,
                                                                            backend, case):
    app = make_app(factory, data_dir, tmp_path, upstream, backend)
    upstream.replies[PATHS[backend]] = [BROKEN_STREAMS[backend][case]]
    res = app.test_client().post("/chat", json={"message": JOKE, "stream": True})
    got = events(res)
    assert got[0][0] == "decision" and got[-1][0] == "error", got
    assert "done" not in [k for k, _ in got]
    assert got[-1][1]["status"] == 502 and f"the LLM ({backend})" in got[-1][1]["error"]
    assert_nothing_stored(app, got[0][1]["conversation_id"])


def test_a_whole_stream_is_stored_as_the_reply(factory, data_dir, tmp_path, upstream):
    app = make_app(factory, data_dir, tmp_path, upstream, "openai")
    upstream.replies["/v1/chat/completions"] = [openai_stream(openai_delta(content="A pun "),
                                                              openai_delta(content="walks into a bar."))]
    got = events(app.test_client().post("/chat", json={"message": JOKE, "stream": True}))
    assert got[-1][0] == "done" and got[-1][1]["reply"] == "A pun walks into a bar."
    assert app.extensions["funes"].log.get(got[-1][1]["decision_id"])["outcome"] == "ok"


WRONG_SHAPES = {
    "openai": [{"choices": [{"message": {"role": "assistant", "content": 5}}]},
               {"choices": [{"message": {"role": "assistant", "content": "", "tool_calls": "get_weather"}}]},
               {"choices": "none"}, ["not", "an", "object"]],
    "ollama": [{"model": "m", "message": {"role": "assistant", "content": 5}, "done": True},
               {"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": "get_weather"},
                "done": True},
               ["not", "an", "object"]],
}
SHAPES = [(backend, i) for backend, bodies in WRONG_SHAPES.items() for i in range(len(bodies))]


@pytest.mark.parametrize("backend,i", SHAPES, ids=[f"{b}-{i}" for b, i in SHAPES])
@pytest.mark.parametrize("message", [JOKE, WEATHER])
def test_an_upstream_answer_of_the_wrong_shape_is_a_502_naming_the_backend(factory, data_dir, tmp_path, upstream,
                                                                           backend, i, message):
    app = make_app(factory, data_dir, tmp_path, upstream, backend)
    upstream.replies[PATHS[backend]] = [whole(WRONG_SHAPES[backend][i])]
    res = app.test_client().post("/chat", json={"message": message})
    assert res.status_code == 502, res.json
    assert f"the LLM ({backend}) answered in a shape Funes cannot read" in res.json["error"]
    assert app.extensions["funes"].log.query(limit=1)[0]["outcome"] == "llm_bad_reply"


# --- the proxy: every decision keeps what became of the request upstream, and every answer names it ---

def serve(app):
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


def hung_port() -> tuple[socket.socket, int]:
    """A port that takes connections (the kernel's backlog) and never answers: a hung server."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock, sock.getsockname()[1]


TOOLS = [{"type": "function", "function": {"name": n, "description": d, "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}}}}}
         for n, d in [("get_weather", "Current weather and forecast for a city."),
                      ("get_time", "The current local time in a city or time zone."),
                      ("send_email", "Send an email to a contact with a subject and body.")]]
ASK = {"model": "m", "messages": [{"role": "user", "content": WEATHER}], "tools": TOOLS}


@pytest.fixture
def proxy(factory, data_dir, tmp_path, upstream):
    app = make_app(factory, data_dir, tmp_path, upstream, "ollama", LLM_TIMEOUT=1.0,
                   OPENAI_BASE_URL=f"{upstream.url}/v1")
    server, url = serve(app)
    yield app, url
    server.shutdown()


def outcome_of(app, res) -> dict:
    return app.extensions["funes"].log.get(int(res.headers["X-Funes-Decision-Id"]))


@pytest.mark.parametrize("path,reply,stream,outcome,error", [
    ("/api/chat", whole({"error": "out of memory"}, 500), False, "upstream_error", "HTTP 500"),
    ("/v1/chat/completions", whole({"error": {"message": "overloaded"}}, 503), False, "upstream_error", "HTTP 503"),
    ("/api/chat", ollama_stream(ollama_chunk("It is"), ollama_chunk(" sunny.")), True, "upstream_cut", "done: true"),
    ("/v1/chat/completions", sse(f"data: {json.dumps(openai_delta(content='It is'))}\n\n"), True, "upstream_cut",
     "[DONE]"),
    ("/api/chat", ollama_stream(ollama_chunk("It is sunny.", done=True)), True, "ok", None),
    ("/v1/chat/completions", openai_stream(openai_delta(content="It is sunny.")), True, "ok", None),
])
def test_the_proxy_logs_what_became_of_the_request_upstream(proxy, upstream, path, reply, stream, outcome, error):
    app, url = proxy
    upstream.replies[path] = [reply]
    res = httpx.post(url + path, json={**ASK, "stream": stream})
    assert res.status_code == reply.status and res.headers["X-Funes-Tools"] == "3->1"
    row = outcome_of(app, res)
    assert row["outcome"] == outcome and (error is None and row["error"] is None or error in row["error"])


@pytest.mark.parametrize("path", ["/api/chat", "/v1/chat/completions"])
@pytest.mark.parametrize("down", ["closed", "hung"])
def test_an_upstream_that_is_down_or_hung_is_a_502_naming_its_decision(factory, data_dir, tmp_path, path, down):
    sock, port = hung_port() if down == "hung" else (None, closed_port())
    dead = f"http://127.0.0.1:{port}"
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": dead, "OPENAI_BASE_URL": f"{dead}/v1",
                      "LLM_TIMEOUT": 1.0}, encoder=factory.encoder)
    server, url = serve(app)
    try:
        res = httpx.post(url + path, json=ASK)
        assert res.status_code == 502 and "X-Funes-Decision-Id" in res.headers
        row = outcome_of(app, res)
        assert row["outcome"] == ("upstream_timeout" if down == "hung" else "upstream_unreachable")
        assert row["selected"] == ["get_weather"]
    finally:
        server.shutdown()
        if sock:
            sock.close()


# --- a hung LLM: readiness answers from a bounded, cached probe; turns give up at fitting timeouts ---

def test_defaults_fit_an_interactive_service():
    import config
    assert config.DEFAULTS["LLM_TIMEOUT"] <= 120 and config.DEFAULTS["TURN_TIMEOUT"] <= 180


def test_readyz_answers_at_once_while_the_llm_hangs(factory, data_dir, tmp_path):
    sock, port = hung_port()
    try:
        app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                          "LLM_BACKEND": "ollama", "OLLAMA_HOST": f"http://127.0.0.1:{port}"},
                         encoder=factory.encoder)
        server, url = serve(app)
        t0 = time.monotonic()
        first = httpx.get(url + "/readyz", timeout=10)
        first_s = time.monotonic() - t0
        assert first.status_code == 503 and first.json()["checks"]["llm"].startswith("ollama unreachable")
        assert first_s < 3.5  # the probe's own short timeout, not LLM_TIMEOUT
        results: list[float] = []

        def ask() -> None:
            t = time.monotonic()
            assert httpx.get(url + "/readyz", timeout=10).status_code == 503
            results.append(time.monotonic() - t)
        threads = [threading.Thread(target=ask) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 10 and max(results) < 1.0  # cached: no check waits on the hung server
        assert httpx.get(url + "/healthz", timeout=10).status_code == 200
        server.shutdown()
    finally:
        sock.close()


def test_a_turn_on_a_hung_llm_gives_up_after_llm_timeout(factory, data_dir, tmp_path):
    sock, port = hung_port()
    try:
        app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                          "LLM_BACKEND": "ollama", "OLLAMA_HOST": f"http://127.0.0.1:{port}", "LLM_TIMEOUT": 1.0},
                         encoder=factory.encoder)
        t0 = time.monotonic()
        res = app.test_client().post("/chat", json={"message": JOKE})
        assert res.status_code == 503 and time.monotonic() - t0 < 5
        assert app.extensions["funes"].log.query(limit=1)[0]["outcome"] == "llm_unavailable"
    finally:
        sock.close()


# --- CSRF and the Host allow-list ---

@pytest.fixture
def labelled(factory, data_dir, tmp_path, upstream):
    """An app with one logged decision to label, and its test client."""
    app = make_app(factory, data_dir, tmp_path, upstream, "ollama")
    client = app.test_client()
    decision_id = client.post("/route", json={"messages": [{"role": "user", "content": WEATHER}]}).json["decision_id"]
    return app, client, decision_id


@pytest.mark.parametrize("headers", [{"Origin": "http://attacker.example"}, {"Origin": "null"},
                                     {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                                     {"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"},
                                     {"Origin": "null", "Sec-Fetch-Site": "cross-site"}])
def test_a_cross_site_form_post_is_refused_and_stores_no_label(labelled, headers):
    app, client, decision_id = labelled
    res = client.post(f"/inspector/{decision_id}/label", data={"tools": "send_email"}, headers=headers)
    assert res.status_code == 403 and res.is_json and "cross-site" in res.json["error"]
    assert app.extensions["funes"].labels.latest(decision_id) is None


@pytest.mark.parametrize("headers", [{}, {"Origin": "http://localhost"}, {"Sec-Fetch-Site": "same-origin"},
                                     {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"},
                                     {"Origin": "null", "Sec-Fetch-Site": "same-origin"}])  # no-referrer pages
def test_a_same_origin_form_post_stores_its_label(labelled, headers):
    app, client, decision_id = labelled
    res = client.post(f"/inspector/{decision_id}/label", data={"tools": "get_weather"}, headers=headers)
    assert res.status_code == 303
    assert app.extensions["funes"].labels.latest(decision_id) is not None


def test_a_page_of_an_allowed_origin_may_call_mcp_with_cors_and_still_needs_its_key(factory, data_dir, tmp_path,
                                                                                    upstream):
    """The MCP Inspector's direct mode is a browser page on another port: listed, it gets through with CORS."""
    inspector, key = "http://localhost:6274", "k" * 24
    app = make_app(factory, data_dir, tmp_path, upstream, "ollama", ALLOWED_ORIGINS=[inspector],
                   API_KEYS={key: "ana"})
    client = app.test_client()
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    site = {"Origin": inspector, "Sec-Fetch-Site": "same-site"}
    preflight = client.options("/mcp", headers={**site, "Access-Control-Request-Method": "POST",
                                                "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code in (200, 204)
    assert preflight.headers["Access-Control-Allow-Origin"] == inspector
    assert "authorization" in preflight.headers["Access-Control-Allow-Headers"].lower()
    called = client.post("/mcp", json=ping, headers={**site, "Authorization": f"Bearer {key}",
                                                     "Accept": "application/json, text/event-stream"})
    assert called.status_code == 200 and called.json["result"] == {}
    assert called.headers["Access-Control-Allow-Origin"] == inspector
    assert client.post("/mcp", json=ping, headers=site).status_code == 401  # the key still applies
    other = client.post("/mcp", json=ping, headers={"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site",
                                                     "Authorization": f"Bearer {key}"})
    assert other.status_code == 403 and "Access-Control-Allow-Origin" not in other.headers


@pytest.mark.parametrize("host,status", [("localhost:8000", 200), ("127.0.0.1", 200), ("[::1]:8000", 200),
                                         ("attacker.example", 400), ("attacker.example:8000", 400)])
def test_a_host_outside_allowed_hosts_is_a_400(labelled, host, status):
    _, client, _ = labelled
    res = client.get("/tools", headers={"Host": host})
    assert res.status_code == status
    if status == 400:
        assert res.is_json and "ALLOWED_HOSTS" in res.json["error"]
    assert client.get("/healthz", headers={"Host": host}).status_code == 200  # probes come by any address


def test_allowed_hosts_names_more_hosts_and_the_bound_address_passes(factory, data_dir, tmp_path, upstream):
    app = make_app(factory, data_dir, tmp_path, upstream, "ollama", ALLOWED_HOSTS=["funes.lan"])
    client = app.test_client()
    assert client.get("/tools", headers={"Host": "funes.lan:8000"}).status_code == 200
    assert client.get("/tools", headers={"Host": "127.0.0.1"}).status_code == 400
    bound = client.get("/tools", headers={"Host": "10.1.2.3:8000"}, environ_overrides={"SERVER_NAME": "10.1.2.3"})
    assert bound.status_code == 200


# --- a bound on turns in flight: a thread stays free for /healthz while the LLM hangs ---

class PooledServer(BaseWSGIServer):
    """werkzeug's server with a fixed pool of threads, as gunicorn's gthread worker: requests beyond it queue."""

    def __init__(self, app, threads: int):
        super().__init__("127.0.0.1", 0, app)
        self.pool = ThreadPoolExecutor(threads)
        self.url = f"http://127.0.0.1:{self.server_port}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def process_request(self, request, client_address):
        self.pool.submit(self._handle, request, client_address)

    def _handle(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001  (as socketserver's own threads do)
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)


def test_healthz_answers_at_once_while_every_turn_slot_waits_on_a_hung_llm(factory, data_dir, tmp_path):
    sock, port = hung_port()
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": f"http://127.0.0.1:{port}", "LLM_TIMEOUT": 2.0,
                      "MAX_CONCURRENT_TURNS": 3}, encoder=factory.encoder)
    server = PooledServer(app, threads=4)  # `funes serve --threads 4` sets MAX_CONCURRENT_TURNS to 3
    answers: list[tuple[float, httpx.Response]] = []

    def turn() -> None:
        t = time.monotonic()
        res = httpx.post(server.url + "/chat", json={"message": JOKE}, timeout=30)
        answers.append((time.monotonic() - t, res))
    try:
        turns = [threading.Thread(target=turn) for _ in range(10)]
        for t in turns:
            t.start()
        deadline = time.monotonic() + 10
        while len(answers) < 7 and time.monotonic() < deadline:  # the seven over the bound come back at once
            time.sleep(0.02)
        refused = [res for _, res in answers]
        assert len(refused) == 7 and all(r.status_code == 503 for r in refused)
        assert refused[0].headers["Retry-After"] == "5" and "MAX_CONCURRENT_TURNS" in refused[0].json()["error"]
        assert max(s for s, _ in answers) < 2.0  # refused, not queued behind the hung turns
        t0 = time.monotonic()
        assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200
        assert time.monotonic() - t0 < 1.0  # three turns hang on the LLM, the fourth thread answers
        stream = httpx.post(server.url + "/chat", json={"message": JOKE, "stream": True}, timeout=10)
        assert stream.status_code == 503 and stream.headers["Retry-After"] == "5"  # a JSON 503, no stream opened
        for t in turns:
            t.join()
        assert sorted(r.status_code for _, r in answers) == [503] * 10  # the hung three gave up after LLM_TIMEOUT
        assert httpx.post(server.url + "/chat", json={"message": JOKE}, timeout=30).status_code == 503
        assert app.extensions["funes"].log.query(limit=1)[0]["outcome"] == "llm_unavailable"  # slots were given back
    finally:
        server.shutdown()
        sock.close()


# --- /route: caller keyword patterns and card sizes are bounded before any work; patterns share one deadline ---

BACKTRACKING = ["(a|aa)+$", "(a+)+b"]  # each backtracks for hours on a long run of a's without its end
LONG_AS = "a" * 2999 + "!"


def evil_cards(n: int, **extra) -> list[dict]:
    return [{"name": f"t{i}", "description": f"Tool number {i} looks things up.", "keywords": BACKTRACKING, **extra}
            for i in range(n)]


@pytest.fixture
def route_app(factory, data_dir, tmp_path, upstream):
    return make_app(factory, data_dir, tmp_path, upstream, "ollama")


@pytest.mark.parametrize("cards,status,limit", [
    (evil_cards(1000), 400, "MAX_REQUEST_PATTERNS"),  # the tester's request: 104 s before, on every repeat
    (evil_cards(60, description="x" * 9000), 413, "MAX_REQUEST_CARDS_CHARS"),  # 540,000 characters of cards
    (evil_cards(100, examples=[f"look up thing {i}" for i in range(19)]), 400, "MAX_REQUEST_TEXTS"),  # 1,900 + 200
])
def test_a_costly_set_of_caller_cards_is_refused_at_once_naming_the_limit(route_app, cards, status, limit):
    t0 = time.monotonic()
    res = route_app.test_client().post("/route", json={"messages": LONG_AS, "tools": cards})
    assert res.status_code == status and limit in res.json["error"]
    assert time.monotonic() - t0 < 2.0
    assert route_app.extensions["funes"].log.query(limit=1) == []  # nothing was routed


def test_backtracking_patterns_share_one_deadline_per_message(route_app, caplog):
    client, cards = route_app.test_client(), evil_cards(250)  # 500 patterns, the most a request may carry
    for _ in range(2):  # the second routes over the cached router: the patterns run again
        caplog.clear()
        res = client.post("/route", json={"messages": LONG_AS, "tools": cards})
        assert res.status_code == 200  # and no pattern finished in time to match:
        assert not any(c["signals"]["keyword"] for c in res.json["candidates"])
        # unbounded, 500 patterns x 50 ms each were 25 s per request; all of them together get KEYWORD_BUDGET_S,
        # so the deadline stops them after a few (read from the log: a wall-clock bound flakes on a busy machine)
        tried = [500 - int(m) for m in re.findall(r"(\d+) of 500 patterns not tried", caplog.text)]
        assert tried and max(tried) < 50, tried


# --- a database outage or a full disk: 503 or 507 naming the database; /healthz stays 200 ---

@pytest.fixture
def db_app(factory, data_dir, tmp_path, upstream):
    (tmp_path / "db").mkdir()
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/db/funes.db", "ENRICH": "off",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": upstream.url, "OLLAMA_MODEL": "m"},
                     encoder=factory.encoder)
    upstream.replies["/api/chat"] = [whole({"model": "m", "message": {"role": "assistant", "content": "Ha."},
                                            "done": True})]
    client = app.test_client()
    assert client.post("/route", json={"messages": WEATHER}).status_code == 200
    return app, client


def test_a_database_outage_is_a_503_naming_the_database_and_healthz_stays_200(db_app, tmp_path):
    app, client = db_app
    import shutil
    shutil.rmtree(tmp_path / "db")
    app.extensions["funes"].db.engine.dispose()  # the server went away: pooled connections are gone with it
    for res in (client.post("/route", json={"messages": WEATHER}), client.get("/decisions"),
                client.post("/chat", json={"message": JOKE}), client.get("/decisions/1")):
        assert res.status_code == 503, res.json
        assert res.json["error"] == "database unavailable: unable to open database file"
    assert client.get("/healthz").status_code == 200  # alive: an orchestrator must not restart it for this
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json["checks"]["database"] == "database unavailable: unable to open database file"


def test_a_full_database_disk_is_a_507(db_app):
    app, client = db_app
    engine = app.extensions["funes"].db.engine
    # SQLite's own size cap gives the very error a full disk gives (SQLITE_FULL) without filling one
    sqlalchemy.event.listen(engine, "connect", lambda conn, _: conn.execute("PRAGMA max_page_count=1"))
    engine.dispose()
    statuses = [client.post("/route", json={"messages": WEATHER * 20}) for _ in range(30)]
    full = [r for r in statuses if r.status_code != 200]
    assert full and all(r.status_code == 507 for r in full), [r.json for r in full]
    assert full[0].json["error"] == "database unavailable: database or disk is full"
    assert client.get("/healthz").status_code == 200


# --- Idempotency-Key: concurrent requests with one key make one turn; keys are the caller's own ---

class SlowLLM:
    """An OpenAI-compatible server that answers every chat after `delay` seconds, counting the calls."""

    def __init__(self, delay: float):
        def respond(request: dict):
            time.sleep(delay)
            said = {"role": "assistant", "content": f"Joke {len(self.server.requests)}"}
            return 200, {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                         "choices": [{"index": 0, "finish_reason": "stop", "message": said}],
                         "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}
        self.server = JsonServer(respond)
        self.url = self.server.url

    @property
    def calls(self) -> int:
        return sum(r["path"].endswith("/chat/completions") for r in self.server.requests)


@pytest.fixture
def slow_app(factory, data_dir, tmp_path):
    llm = SlowLLM(delay=1.0)
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                      "LLM_BACKEND": "openai", "OPENAI_BASE_URL": f"{llm.url}/v1", "OPENAI_MODEL": "m"},
                     encoder=factory.encoder)
    yield app, llm
    llm.server.close()


def test_concurrent_requests_with_one_idempotency_key_make_one_turn(slow_app):
    app, llm = slow_app
    server, url = serve(app)
    replies: list[dict] = []

    def send() -> None:
        res = httpx.post(url + "/chat", json={"message": JOKE}, headers={"Idempotency-Key": "k1"}, timeout=30)
        assert res.status_code == 200, res.text
        replies.append(res.json())
    try:
        threads = [threading.Thread(target=send) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        server.shutdown()
    assert llm.calls == 1
    assert len(replies) == 5 and len({(r["reply"], r["decision_id"], r["conversation_id"]) for r in replies}) == 1
    assert sum("replayed" in r for r in replies) == 4


def test_anonymous_callers_sharing_a_key_get_their_own_turns(slow_app):
    app, llm = slow_app
    client = app.test_client()
    first = [client.post("/chat", json={"message": "hi"}).json["conversation_id"] for _ in range(2)]
    same_key = {"Idempotency-Key": "k1"}
    a, b = (client.post("/chat", json={"message": JOKE, "conversation_id": c}, headers=same_key).json for c in first)
    assert a["decision_id"] != b["decision_id"] and [a["conversation_id"], b["conversation_id"]] == first
    # no conversation yet: the caller's address tells them apart
    c, d = (client.post("/chat", json={"message": JOKE}, headers=same_key, environ_overrides={"REMOTE_ADDR": ip}).json
            for ip in ("10.0.0.1", "10.0.0.2"))
    assert c["decision_id"] != d["decision_id"] and "replayed" not in d
    again = client.post("/chat", json={"message": JOKE}, headers=same_key,
                        environ_overrides={"REMOTE_ADDR": "10.0.0.1"})
    assert again.json["decision_id"] == c["decision_id"] and again.json["replayed"] is True
    assert llm.calls == 6


def test_one_idempotency_key_makes_one_llm_call_across_processes(factory, data_dir, database_url):
    llm = SlowLLM(delay=1.0)
    # two apps on one database stand for two gunicorn workers: no lock in memory is shared between them
    workers = [create_app({"DATA_DIR": data_dir, "DATABASE_URL": database_url, "ENRICH": "off",
                           "LLM_BACKEND": "openai", "OPENAI_BASE_URL": f"{llm.url}/v1", "OPENAI_MODEL": "m"},
                          encoder=factory.encoder) for _ in range(2)]
    replies: list[dict] = []

    def send(app) -> None:
        res = app.test_client().post("/chat", json={"message": JOKE}, headers={"Idempotency-Key": "k1"})
        assert res.status_code == 200, res.json
        replies.append(res.json)
    try:
        threads = [threading.Thread(target=send, args=(app,)) for app in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        llm.server.close()
    assert llm.calls == 1
    assert len(replies) == 2 and len({(r["reply"], r["decision_id"], r["conversation_id"]) for r in replies}) == 1
    assert sum("replayed" in r for r in replies) == 1


def test_a_proxied_chat_on_a_hung_upstream_takes_a_turn_slot(factory, data_dir, tmp_path):
    sock, port = hung_port()
    dead = f"http://127.0.0.1:{port}"
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "ENRICH": "off",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": dead, "OPENAI_BASE_URL": f"{dead}/v1",
                      "LLM_TIMEOUT": 2.0, "MAX_CONCURRENT_TURNS": 1}, encoder=factory.encoder)
    server = PooledServer(app, threads=2)
    hung: list[httpx.Response] = []
    try:
        first = threading.Thread(target=lambda: hung.append(httpx.post(server.url + "/api/chat", json=ASK,
                                                                       timeout=30)))
        first.start()
        time.sleep(0.5)  # the first request now waits on the upstream, holding the only turn slot
        t0 = time.monotonic()
        for path in ("/v1/chat/completions", "/api/chat"):
            refused = httpx.post(server.url + path, json=ASK, timeout=10)
            assert refused.status_code == 503 and refused.headers["Retry-After"] == "5"
            assert "MAX_CONCURRENT_TURNS" in str(refused.json()["error"])  # each in its API's error shape
        assert httpx.post(server.url + "/chat", json={"message": JOKE}, timeout=10).status_code == 503
        assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200
        assert time.monotonic() - t0 < 1.0  # refused at once, and the second thread answers the probe
        first.join()
        assert hung[0].status_code == 502  # the upstream timed out after LLM_TIMEOUT
        again = httpx.post(server.url + "/api/chat", json=ASK, timeout=30)
        assert again.status_code == 502  # the slot was given back: forwarded again, not refused
    finally:
        server.shutdown()
        sock.close()
