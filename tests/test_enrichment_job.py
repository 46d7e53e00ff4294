"""Enrichment as jobs in the database: claimed once across workers, retried, visible, yielding to chat turns,
stopped with the process. The LLM is a fake OpenAI-compatible server on the wire; the database is real."""
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from funes import create_app
from funes.cards.auto import AutoEnrichment
from funes.cards.cache import EnrichmentCache
from funes.cli import cli
from funes.llm.gate import TurnGate
from funes.llm.openai_backend import OpenAIBackend
from funes.selection.factory import text_encoder_from_settings
from funes.store.db import Database
from funes.store.enrichment import EnrichmentStore
from funes.tools.loaders import load_cards
from tests.test_cards import ANSWERS, CURRENCY, WEATHER

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FakeLLM:
    """An OpenAI-compatible server with one slot, like the embedded llama.cpp: a request waits for the one before.

    Enrichment requests (they carry a response_format) answer after `enrich_s` seconds, or stop at once when
    the client closes the connection (as llama.cpp cancels a task); chat requests answer at once."""

    def __init__(self, answers=ANSWERS, enrich_s: float = 0.0, host: str = "127.0.0.1"):
        self.answers, self.enrich_s = answers, enrich_s
        self.enrichments: list[str] = []  # card names asked for, in order
        self.cancelled: list[str] = []
        self.chats = 0
        self.slot = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._send(200, {"data": [{"id": "fake"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.slot:
                    if "response_format" in body:
                        fake._enrich(self, body)
                    else:
                        fake.chats += 1
                        self._send(200, {"choices": [{"message": {"role": "assistant", "content": "hello"}}]})

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer((host, 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = f"http://{host}:{self.port}"
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()

    def _enrich(self, handler, body) -> None:
        name = next(n for n in self.answers if f"name: {n} " in body["messages"][-1]["content"])
        self.enrichments.append(name)
        deadline = time.monotonic() + self.enrich_s
        while time.monotonic() < deadline:
            if _closed(handler.connection):
                self.cancelled.append(name)
                return
            time.sleep(0.02)
        answer = self.answers[name]
        handler._send(200, {"choices": [{"message": {"role": "assistant", "content": answer if isinstance(
            answer, str) else json.dumps(answer)}}]})

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _closed(sock: socket.socket) -> bool:
    """Whether the peer closed the connection (readable, and nothing to read)."""
    if not select.select([sock], [], [], 0)[0]:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


@pytest.fixture
def llm_server():
    server = FakeLLM()
    yield server
    server.close()


def _settings(factory, tmp_path, database_url, **extra):
    return {**factory.settings, "DATA_DIR": str(tmp_path), "DATABASE_URL": database_url, "ENRICH_RETRY_S": 0.2,
            "ENRICH_RETRY_MAX_S": 0.4, **extra}


def _auto(settings, factory, url, database_url):
    llm = OpenAIBackend(url + "/v1", "fake-model", None, 30.0)
    return AutoEnrichment(settings, text_encoder_from_settings(factory.settings), llm,
                          store=EnrichmentStore(Database(database_url)))


def _wait(condition, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_two_workers_on_one_database_enrich_each_card_once(factory, tmp_path, database_url):
    server = FakeLLM(enrich_s=0.3)
    cards = [{**WEATHER, "name": f"weather_{i}", "description": f"Weather, variant {i}"} for i in range(3)]
    answers = {c["name"]: ANSWERS["get_weather"] for c in cards}
    server.answers = answers
    registry = load_cards(cards)
    settings = _settings(factory, tmp_path, database_url, ENRICH="on")
    try:
        one, two = (_auto(settings, factory, server.url, database_url) for _ in range(2))
        for auto in (one, two):
            auto.start_background(TurnGate())
            auto.ready(registry)  # both queue every card
        _wait(lambda: one.ready(registry) and two.ready(registry), what="both workers to see every card done")
    finally:
        server.close()
    assert sorted(server.enrichments) == sorted(answers)  # each card asked for once, across both
    assert all(t.generated for t in two.apply(registry))
    assert [s for s, _ in one.card_states(list(registry))] == ["enriched"] * 3


def test_a_failing_answer_is_retried_with_backoff_then_shown_failed_and_never_routed(factory, tmp_path,
                                                                                     database_url, caplog):
    server = FakeLLM({"get_weather": "not json at all", "convert_currency": ANSWERS["convert_currency"]})
    registry = load_cards([WEATHER, CURRENCY])
    auto = _auto(_settings(factory, tmp_path, database_url, ENRICH="on"), factory, server.url, database_url)
    try:
        with caplog.at_level("INFO", logger="funes.cards"):
            auto.start_background(TurnGate())
            auto.ready(registry)
            _wait(lambda: server.enrichments.count("get_weather") >= 3, what="the failed card to be retried")
    finally:
        server.close()
        auto.stop()
    state, reason = auto.card_state(registry["get_weather"])
    assert state == "failed" and "not the expected JSON" in reason and "attempt" in reason
    routed = {t.name: t for t in auto.apply(registry)}
    assert routed["get_weather"].generated is None and routed["convert_currency"].generated is not None
    logged = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("enriching 2 bare cards with fake-model") for m in logged)
    assert any(m.startswith("enrichment of get_weather failed (attempt 2, retry in 0 s)") for m in logged)
    assert any(m.startswith("enriched convert_currency (1/2) in") for m in logged)
    old = EnrichmentCache(tmp_path, "fake-model")
    (tmp_path / "enriched").mkdir(exist_ok=True)  # a failure the old file cache kept is no result either
    other = load_cards([{**WEATHER, "description": "Old weather"}])["get_weather"]
    (tmp_path / "enriched" / f"{old.key(other)}.json").write_text(json.dumps({"texts": {"error": "bad", "examples": []}}))
    assert auto.cache.get(other) is None and auto.card_state(other)[0] == "queued"


def test_old_result_files_are_read_as_done(factory, tmp_path, database_url, llm_server):
    registry = load_cards([WEATHER])
    auto = _auto(_settings(factory, tmp_path, database_url, ENRICH="on"), factory, llm_server.url, database_url)
    texts = {"examples": ["What's the weather in Oslo today?", "Forecast for Madrid tomorrow", "rain in Hanoi?"],
             "negatives": ["Why is the sky blue?"], "keywords": ["forecast"], "seconds": 3.0}
    (tmp_path / "enriched").mkdir()
    (tmp_path / "enriched" / f"{auto.cache.key(registry['get_weather'])}.json").write_text(json.dumps({"texts": texts}))
    assert auto.ready(registry) and auto.card_state(registry["get_weather"]) == ("enriched", "by fake-model in 3 s")
    assert llm_server.enrichments == []


def test_a_remote_llm_under_auto_does_not_enrich_but_on_does(factory, tmp_path, database_url):
    address = _outbound_address()
    server = FakeLLM(host="0.0.0.0")
    url = f"http://{address}:{server.port}"
    registry = load_cards([WEATHER])
    try:
        auto = _auto(_settings(factory, tmp_path, database_url, ENRICH="auto"), factory, url, database_url)
        auto.start_background(TurnGate())
        assert not auto.local and not auto.ready(registry)
        time.sleep(1.5)
        assert server.enrichments == [] and auto.apply(registry) is registry
        state, reason = auto.card_state(registry["get_weather"])
        assert state == "waiting" and "the LLM is remote; set FUNES_ENRICH=on" in reason
        on = _auto(_settings(factory, tmp_path, database_url, ENRICH="on"), factory, url, database_url)
        on.start_background(TurnGate())
        on.ready(registry)
        _wait(lambda: on.ready(registry), what="ENRICH=on to enrich with the remote LLM")
    finally:
        server.close()
    assert server.enrichments == ["get_weather"] and auto.card_state(registry["get_weather"])[0] == "enriched"


def _outbound_address() -> str:
    """This machine's non-loopback address (a server reached through it counts as remote)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            address = s.getsockname()[0]
        except OSError:
            address = "127.0.0.1"
    if address.startswith("127."):
        pytest.skip("no non-loopback address on this machine")
    return address


def _service(factory, tmp_path, database_url, server, **extra):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER, CURRENCY]))
    return create_app({"DATA_DIR": str(tmp_path), "DATABASE_URL": database_url, "PACKS": [],
                       "TOOLS_FILES": [str(tools)], "LLM_BACKEND": "openai", "OPENAI_BASE_URL": server.url + "/v1",
                       "OPENAI_MODEL": "fake-model", "SAMPLE_DATA": False, **extra}, encoder=factory.encoder)


def test_get_tools_counts_the_cards_callers_brought_until_they_are_enriched(factory, tmp_path, database_url):
    lock = {"name": "lock_door", "description": "Lock or unlock a door of the house"}
    server = FakeLLM({**ANSWERS, "lock_door": ANSWERS["get_weather"]}, enrich_s=1.0)
    try:
        client = _service(factory, tmp_path, database_url, server).test_client()
        assert client.get("/tools").get_json()["enrichment"]["callers_queued"] == 0
        route = client.post("/route", json={"messages": "lock the garage", "tools": [lock]})
        assert route.status_code == 200 and route.get_json()["cards"] == "bare"
        assert client.get("/tools").get_json()["enrichment"]["callers_queued"] == 1
        _wait(lambda: client.get("/tools").get_json()["enrichment"]["callers_queued"] == 0,
              what="the caller's card enriched")
        assert "lock_door" in server.enrichments
    finally:
        server.close()


def test_get_tools_shows_cards_go_from_queued_to_enriched(factory, tmp_path, database_url):
    server = FakeLLM(enrich_s=1.0)
    try:
        client = _service(factory, tmp_path, database_url, server).test_client()
        first = client.get("/tools").get_json()
        assert {t["card"] for t in first["tools"]} <= {"queued", "enriching"}
        assert first["enrichment"]["done"] == 0 and first["enrichment"]["total"] == 2
        assert {t["name"]: (t["runnable"], t["source"]) for t in first["tools"]}["get_weather"][0] is False
        _wait(lambda: client.get("/tools").get_json()["enrichment"]["done"] == 2, what="both cards enriched")
    finally:
        server.close()
    _wait(lambda: client.post("/route", json={"messages": "will it rain in Quito tomorrow?"}).get_json()["cards"]
          == "enriched", what="the router to switch to the enriched cards")
    latest = client.get("/tools").get_json()
    assert [(t["card"], t["reason"].startswith("by fake-model in")) for t in latest["tools"]] == [("enriched", True)] * 2


def test_funes_tools_prints_each_cards_state(runner, tmp_path, monkeypatch):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{**WEATHER, "name": "city_weather"}]))
    for name, value in {"TOOLS_FILES": json.dumps([str(tools)]), "PACKS": json.dumps(["assistant"]),
                        "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db", "LLM_BACKEND": "openai",
                        "OPENAI_BASE_URL": "http://203.0.113.9/v1"}.items():
        monkeypatch.setenv(f"FUNES_{name}", value)
    result = runner.invoke(cli, ["tools"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["name", "source", "runnable", "card"]
    weather = next(line for line in lines if line.startswith("city_weather "))
    assert " no " in weather and "waiting (the LLM is remote; set FUNES_ENRICH=on" in weather
    written = [line for line in lines[1:] if " yes " in line and line.rstrip().endswith("written")]
    assert written, result.output  # the assistant pack's cards: written, runnable here
    assert "0 of 1 bare cards enriched (FUNES_ENRICH=auto" in result.output


def test_a_chat_turn_is_not_held_behind_enrichment(factory, tmp_path, database_url):
    server = FakeLLM(enrich_s=20.0)  # one slot, held 20 s by each enrichment unless the request is closed
    try:
        app = _service(factory, tmp_path, database_url, server, ENRICH="on")
        client = app.test_client()
        _wait(lambda: server.enrichments, what="enrichment to start")
        started = time.monotonic()
        reply = client.post("/chat", json={"message": "hello there, how are you?"})
        took = time.monotonic() - started
        assert reply.status_code == 200 and reply.get_json()["reply"] == "hello"
        assert took < 5.0, f"the turn waited {took:.1f} s behind enrichment"
        assert server.cancelled == server.enrichments[:1]  # the enrichment request was closed, not waited for
        store = app.extensions["funes"].enrichment.cache.store
        jobs = store.jobs(app.extensions["funes"].enrichment.cache.key(t) for t in app.extensions["funes"].registry)
        assert all(j.attempts == 0 and j.state in ("queued", "running") for j in jobs.values())  # no attempt counted
        server.enrich_s = 0.0
        _wait(lambda: client.get("/tools").get_json()["enrichment"]["done"] == 2, what="enrichment to resume")
    finally:
        server.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sigterm_stops_the_server_within_5_s_during_enrichment(data_dir, tmp_path):
    server = FakeLLM(enrich_s=120.0)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([WEATHER, CURRENCY]))
    port = _free_port()
    env = {**os.environ, "FUNES_DATA_DIR": data_dir, "FUNES_DATABASE_URL": f"sqlite:///{tmp_path}/funes.db",
           "FUNES_PACKS": "[]", "FUNES_TOOLS_FILES": json.dumps([str(tools)]), "FUNES_LLM_BACKEND": "openai",
           "FUNES_OPENAI_BASE_URL": server.url + "/v1", "FUNES_OPENAI_MODEL": "fake-model", "FUNES_ENRICH": "on",
           "FUNES_SAMPLE_DATA": "false", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "funes", "serve", "--port", str(port), "--threads", "2"], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait(lambda: server.enrichments or proc.poll() is not None, timeout=180, what="the service to enrich")
        assert proc.poll() is None, proc.stdout.read()
        assert httpx.get(f"http://127.0.0.1:{port}/tools").json()["enrichment"]["enriching"] == 1
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        took = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
        server.close()
    output = proc.stdout.read()
    assert took < 5.0, f"SIGTERM took {took:.1f} s\n{output[-3000:]}"
    assert "enriching 2 bare cards with fake-model" in output  # logged at INFO without -v
    jobs = EnrichmentStore(Database(f"sqlite:///{tmp_path}/funes.db")).jobs(
        EnrichmentCache(data_dir, "fake-model").key(t) for t in load_cards([WEATHER, CURRENCY]))
    assert [j.state for j in jobs.values()] == ["queued", "queued"]  # given back for the next start
