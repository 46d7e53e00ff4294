"""`funes cards enrich` as a batch: an unanswered request is asked again, a card that keeps failing is skipped
with its reason, and a run that was stopped (Ctrl-C, or killed) resumes without asking for the done cards again.
The LLM is an OpenAI-compatible server on the wire; the CLI and its database are real."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from funes.cli import cli
from tests.test_cards import ANSWERS, CURRENCY, WEATHER
from tests.wire import JsonServer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCK = {"name": "lock_door", "description": "Lock or unlock a door of the house",
        "parameters": {"type": "object", "properties": {"door": {"type": "string"}}}, "pack": "mine"}
CARDS = [WEATHER, CURRENCY, LOCK]
TIMEOUT_S = 1.0  # the LLM timeout the runs here use: a "slow" answer comes after it


class Upstream(JsonServer):
    """Answers each card's enrichment prompt; `script[name]` lists what its first requests get instead:
    "slow" (an answer after TIMEOUT_S), "hang" (none for a minute), or an HTTP error status."""

    def __init__(self):
        self.script: dict[str, list] = {}
        self.asked: list[str] = []  # card names, one per request, in order
        super().__init__(self._respond)

    def _respond(self, request):
        card = request["json"]["messages"][-1]["content"]
        name = next(c["name"] for c in CARDS if f"name: {c['name']} " in card)
        self.asked.append(name)
        step = self.script[name].pop(0) if self.script.get(name) else None
        if isinstance(step, int):
            return step, {"error": {"message": "the model is loading"}}
        if step in ("slow", "hang"):
            time.sleep(TIMEOUT_S * 2 if step == "slow" else 60)
        answer = ANSWERS.get(name, ANSWERS["get_weather"])
        return 200, {"choices": [{"message": {"role": "assistant", "content": json.dumps(answer)}}]}


@pytest.fixture
def upstream():
    server = Upstream()
    yield server
    server.close()


@pytest.fixture
def tools(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(CARDS))
    return path


def _env(upstream, tmp_path) -> dict[str, str]:
    """The run's settings: the fake LLM with a short timeout, and a database of this test's own."""
    return {"FUNES_LLM_BACKEND": "openai", "FUNES_OPENAI_BASE_URL": upstream.url + "/v1",
            "FUNES_LLM_TIMEOUT": str(TIMEOUT_S), "FUNES_DATA_DIR": str(tmp_path / "data")}


def _invoke(runner, monkeypatch, upstream, tmp_path, tools):
    for name, value in _env(upstream, tmp_path).items():
        monkeypatch.setenv(name, value)
    return runner.invoke(cli, ["cards", "enrich", str(tools), "--out", str(tmp_path / "out.json")])


def _enriched(tmp_path) -> list[str]:
    return [c["name"] for c in json.loads((tmp_path / "out.json").read_text()) if c.get("generated")]


def test_a_card_the_llm_times_out_on_twice_is_asked_again_and_enriched(runner, monkeypatch, upstream, tmp_path,
                                                                       tools, caplog):
    upstream.script = {"convert_currency": ["slow", "slow"]}
    result = _invoke(runner, monkeypatch, upstream, tmp_path, tools)
    assert result.exit_code == 0, result.output
    assert upstream.asked == ["get_weather"] + ["convert_currency"] * 3 + ["lock_door"]
    assert _enriched(tmp_path) == ["get_weather", "convert_currency", "lock_door"]
    assert "wrote" in result.output and "3 of 3 cards enriched; 3 written now" in result.output
    # this run's retries only: background enrichment threads of other tests' apps may still be logging
    said = [r.getMessage() for r in caplog.records if r.name == "funes.cards.enrich" and r.levelname == "WARNING"]
    assert len(said) == 2 and all("ReadTimeout" in m for m in said), said
    assert said[0].startswith("enrichment of convert_currency: the LLM did not answer (try 1 of 3), asking again")


def test_a_card_the_llm_always_fails_on_is_skipped_with_its_reason_and_the_rest_enriched(runner, monkeypatch,
                                                                                         upstream, tmp_path, tools):
    upstream.script = {"convert_currency": [503] * 20}
    result = _invoke(runner, monkeypatch, upstream, tmp_path, tools)
    assert result.exit_code == 1, result.output
    assert 2 <= upstream.asked.count("convert_currency") <= 5  # asked again a few times, then given up
    assert upstream.asked[-1] == "lock_door"  # the run went on to the next card
    assert _enriched(tmp_path) == ["get_weather", "lock_door"]
    lines = result.output.splitlines()
    skipped = [line for line in lines if line.startswith("skipped: ")]
    assert len(skipped) == 1 and skipped[0].startswith("skipped: convert_currency: ") and "HTTP 503" in skipped[0]
    assert "2 of 3 cards enriched; 2 written now" in result.output
    assert lines[-1] == "Error: 1 of 3 cards skipped (reasons above); run the same command again to retry them"
    assert "Traceback" not in result.output

    upstream.script = {}
    again = _invoke(runner, monkeypatch, upstream, tmp_path, tools)  # the next run asks for the skipped card only
    assert again.exit_code == 0, again.output
    assert "3 of 3 cards enriched; 1 written now" in again.output and "; 2 already enriched, skipped" in again.output
    assert upstream.asked.count("get_weather") == 1 and upstream.asked.count("lock_door") == 1


def _start(upstream, tmp_path, tools) -> subprocess.Popen:
    env = {**os.environ, **_env(upstream, tmp_path), "FUNES_LLM_TIMEOUT": "120", "HF_HUB_OFFLINE": "1"}
    # SIGINT as a terminal's Ctrl-C sends it, even where the test runs in a background job that ignores it
    return subprocess.Popen([sys.executable, "-m", "funes", "cards", "enrich", str(tools), "--out",
                             str(tmp_path / "out.json")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _stop_on_second_card(proc, upstream, sig) -> str:
    """Send `sig` while the LLM works on the second card; the process's output."""
    deadline = time.monotonic() + 180
    while "convert_currency" not in upstream.asked:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
        time.sleep(0.1)
    proc.send_signal(sig)
    return proc.communicate(timeout=60)[0]


def test_a_killed_run_resumes_without_asking_for_the_done_cards_again(upstream, tmp_path, tools):
    upstream.script = {"convert_currency": ["hang"]}
    proc, again = _start(upstream, tmp_path, tools), None
    try:
        _stop_on_second_card(proc, upstream, signal.SIGKILL)  # the card in flight stays claimed by the dead process
        assert upstream.asked == ["get_weather", "convert_currency"]
        again = _start(upstream, tmp_path, tools)
        output = again.communicate(timeout=240)[0]  # not waiting for the dead process's claim to lapse
    finally:
        for p in (proc, again):
            if p is not None and p.poll() is None:
                p.kill()
    assert again.returncode == 0, output
    assert upstream.asked == ["get_weather", "convert_currency", "convert_currency", "lock_door"]
    assert "3 of 3 cards enriched; 2 written now" in output and "; 1 already enriched, skipped" in output
    assert _enriched(tmp_path) == ["get_weather", "convert_currency", "lock_door"]


def test_ctrl_c_stops_cleanly_keeping_the_cards_done(runner, monkeypatch, upstream, tmp_path, tools):
    upstream.script = {"convert_currency": ["hang"]}
    proc = _start(upstream, tmp_path, tools)
    try:
        output = _stop_on_second_card(proc, upstream, signal.SIGINT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert "Traceback" not in output and "Aborted" not in output
    assert "1 of 3 cards enriched; 1 written now" in output
    assert "stopped (Ctrl-C) after 1 of 3 cards; run the same command again to resume" in output
    assert _enriched(tmp_path) == ["get_weather"]  # OUT holds what was done

    again = _invoke(runner, monkeypatch, upstream, tmp_path, tools)
    assert again.exit_code == 0, again.output
    assert upstream.asked == ["get_weather", "convert_currency", "convert_currency", "lock_door"]
    assert "; 1 already enriched, skipped" in again.output
