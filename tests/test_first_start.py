"""First runs as a new user meets them: real processes on an empty data dir, nothing prepared beforehand."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
START_LIMIT_S = 300  # an ONNX export, the sample data and two workers loading, on a busy 2-core machine


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUNES_")}
    return {**env, "FUNES_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _funes(*args: str, data_dir: Path, timeout: float = START_LIMIT_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "funes", *args], cwd=ROOT, env=_env(data_dir),
                          capture_output=True, text=True, timeout=timeout)


def _wait_healthy(url: str, server: subprocess.Popen) -> dict:
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"serve exited with {server.returncode} before answering")
        try:
            return httpx.get(url + "/healthz", timeout=5).json()
        except httpx.HTTPError:
            time.sleep(1)
    pytest.fail(f"/healthz did not answer within {START_LIMIT_S} s of a first start")


@pytest.fixture
def first_server(tmp_path):
    """`python -m funes serve --workers 2` on an empty data dir, stopped after the test."""
    port = _free_port()
    log = open(tmp_path / "serve.log", "w+")
    server = subprocess.Popen([sys.executable, "-m", "funes", "serve", "--port", str(port), "--workers", "2"],
                              cwd=ROOT, env=_env(tmp_path / "data"), stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        stop(server, log)


def start_serve(tmp_path: Path, data_dir, *args: str, **env: str) -> tuple[str, subprocess.Popen, object]:
    """`python -m funes serve ARGS` in its own session over `data_dir` (its models), with a database of its own,
    no sample data and the FUNES_* settings in `env`; its URL, the process and its log (for `stop`)."""
    port = _free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FUNES_")}
    environ.update(FUNES_DATA_DIR=str(data_dir), FUNES_DATABASE_URL=f"sqlite:///{tmp_path}/serve.db",
                   FUNES_SAMPLE_DATA="false", HF_HUB_OFFLINE="1", **env)
    log = open(tmp_path / "serve.log", "w+")
    server = subprocess.Popen([sys.executable, "-m", "funes", "serve", "--port", str(port), *args], cwd=ROOT,
                              env=environ, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return f"http://127.0.0.1:{port}", server, log


def stop(server: subprocess.Popen, log) -> None:
    """Stop a `serve` started in its own session (unless the test did) and print its log's tail."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
    log.seek(0)
    print(log.read()[-3000:])  # shown by pytest only when the test failed
    log.close()


def test_serve_answers_on_a_fresh_data_dir(first_server):
    url, server = first_server
    health = _wait_healthy(url, server)
    assert health["status"] == "ok" and health["tools"] == 18
    routed = httpx.post(url + "/route", json={"messages": [{"role": "user", "content": "weather in Oslo tomorrow?"}]},
                        timeout=60).json()
    assert routed["selected"] == ["get_weather"]
    # both workers answer: every request finds a worker that started on its own
    answers = [httpx.get(url + "/tools", timeout=30).status_code for _ in range(8)]
    assert answers == [200] * 8
    for _ in range(6):  # a new connection each: gunicorn hands them to either worker
        httpx.post(url + "/route", json={"messages": [{"role": "user", "content": "what time is it?"}]}, timeout=60)
    # whichever worker answers /metrics counts every worker's decisions
    assert [_routes_counted(httpx.get(url + "/metrics", timeout=30).text) for _ in range(4)] == [7] * 4


def _routes_counted(metrics: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
               if line.startswith("funes_decisions_total{") and 'endpoint="route"' in line)


def test_route_and_eval_on_a_fresh_data_dir(tmp_path):
    routed = _funes("route", "how much did I spend on groceries?", data_dir=tmp_path / "a")
    assert routed.returncode == 0, routed.stderr
    assert json.loads(routed.stdout)["selected"]
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "c1", "messages": [{"role": "user", "content": "weather in Lima today"}],
                                 "expected_tools": ["get_weather"], "tags": []}) + "\n")
    scored = _funes("eval", "--cases", str(cases), data_dir=tmp_path / "b")
    assert scored.returncode == 0, scored.stderr
    assert "Traceback" not in scored.stderr
    assert [line.split() for line in scored.stdout.splitlines() if line.startswith("lenient")] == [
        ["lenient", "accuracy", "1.000"]]
