"""`serve` as a real gunicorn process: one worker leaving, or a reload, never takes the service down."""
import os
import signal
import subprocess
import time

import httpx
import pytest

from tests.test_first_start import START_LIMIT_S, start_serve, stop



def _workers(master: int) -> set[int]:
    """gunicorn's workers: the master's child processes."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(master)], capture_output=True, text=True).stdout
    return {int(pid) for pid in out.split()}


def _green_for(url: str, server: subprocess.Popen, seconds: float, wait: float = 5) -> list[int]:
    """Poll /healthz once a second for `seconds`, each waiting up to `wait`; every status seen (0: no answer)."""
    seen, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert server.poll() is None, f"gunicorn's master exited with {server.returncode}"
        try:
            seen.append(httpx.get(url + "/healthz", timeout=wait).status_code)
        except httpx.HTTPError:
            seen.append(0)
        time.sleep(1)
    return seen


@pytest.fixture
def served(tmp_path, data_dir):
    """`funes serve --workers 2` over the session's data dir (its models), with a database of its own."""
    # TMPDIR: so serve's metrics folder is made where the test finds it
    url, server, log = start_serve(tmp_path, data_dir, "--workers", "2", TMPDIR=str(tmp_path))
    try:
        deadline = time.monotonic() + START_LIMIT_S
        while not _ready(url):
            assert server.poll() is None and time.monotonic() < deadline, "serve did not become ready"
            time.sleep(1)
        yield url, server, tmp_path
    finally:
        stop(server, log)


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_worker_leaving_or_a_reload_keeps_the_service_up(served):
    url, server, tmp = served
    folder, = tmp.glob("funes-metrics-*")
    first = _workers(server.pid)
    assert len(first) == 2 and folder.is_dir()

    os.kill(min(first), signal.SIGTERM)  # a worker exits through Python, as a tool's sys.exit makes it
    assert set(_green_for(url, server, 12)) == {200}
    assert folder.is_dir(), "a worker's exit removed the metrics folder every worker counts into"
    assert len(_workers(server.pid)) == 2 and min(first) not in _workers(server.pid)  # replaced

    # A reload replaces every worker, rolling: the old ones answer until the new ones have loaded the app, whose
    # llama.cpp then loads its model in a process of its own (in the worker it held the GIL: 7-8 s unanswered)
    before = _workers(server.pid)
    os.kill(server.pid, signal.SIGHUP)
    assert set(_green_for(url, server, 15, wait=5)) == {200}  # the old code answered nothing for ~10 s
    deadline = time.monotonic() + START_LIMIT_S
    while _workers(server.pid) & before:
        assert time.monotonic() < deadline, "the old workers were never retired"
        time.sleep(1)
    assert folder.is_dir() and len(_workers(server.pid)) == 2
    assert httpx.get(url + "/metrics", timeout=30).status_code == 200

    os.kill(server.pid, signal.SIGTERM)  # the master's own exit still cleans up after it
    server.wait(timeout=60)
    assert not folder.exists()
