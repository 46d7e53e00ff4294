"""Start-up as a user meets it: --version, input errors before any model loads, prepare's steps, the ready line."""
import os
import subprocess
import sys
import threading
import time
import tomllib
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from funes.cli import cli
from funes.cli.serve import _announce_ready
from funes.health import readiness

ROOT = Path(__file__).resolve().parent.parent
ERROR_LIMIT_S = 3.0  # a missing file is reported before any import of the encoder; generous for a loaded box


def _funes(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, float]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FUNES_")}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "funes", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**clean, "HF_HUB_OFFLINE": "1", **(env or {})}, timeout=120)
    return done, time.perf_counter() - started


def test_version_prints_the_projects_version(runner):
    with open(ROOT / "pyproject.toml", "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"funes {version}\n"


@pytest.mark.parametrize("args, env, message", [
    (["route", "hi", "--tools", "/nonexistent.json"], {}, "Error: /nonexistent.json: tools file not found"),
    (["eval", "--cases", "/nonexistent.jsonl"], {}, "Error: /nonexistent.jsonl: cases file not found"),
    (["calibrate", "--cases", "/nonexistent.jsonl", "--out", "fit.json"], {},
     "Error: /nonexistent.jsonl: cases file not found"),
    (["cards", "enrich", "/nonexistent.json", "--out", "out.json"], {}, "Error: /nonexistent.json: tools file not found"),
    (["--config", "/nonexistent.json", "route", "hi"], {}, "Error: /nonexistent.json: config file not found"),
    (["route", "hi"], {"FUNES_TOOLS_FILES": '["/nonexistent.json"]'},
     "Error: TOOLS_FILES: /nonexistent.json: tools file not found"),
    (["route", "hi"], {"FUNES_TOOL_MODULES": '["no_such_tools_module"]'},
     "Error: TOOL_MODULES: no module named 'no_such_tools_module' (installed, or on PYTHONPATH?)"),
])
def test_a_missing_input_is_one_line_at_once(args, env, message):
    done, seconds = _funes(*args, env=env)
    assert done.returncode == 1
    assert done.stderr.strip() == message  # the right reason, one line, no traceback
    assert seconds < ERROR_LIMIT_S, f"{seconds:.1f} s to report a missing file"


def test_a_broken_tools_file_is_reported_before_the_encoder_loads(tmp_path):
    bad = tmp_path / "tools.json"
    bad.write_text("{not json")
    done, seconds = _funes("route", "hi", "--tools", str(bad))
    assert done.returncode == 1
    assert done.stderr.strip().startswith(f"Error: {bad}:1: invalid JSON")
    assert seconds < ERROR_LIMIT_S


def test_prepare_says_each_step_and_sums_up_skipped_sample_rows(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("FUNES_DATABASE_URL", f"sqlite:///{tmp_path}/prepare.db")
    result = runner.invoke(cli, ["prepare"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[:2] == ["database schema…", lines[1]] and lines[1].startswith("database schema: done in ")
    encoder = "exporting the encoders to ONNX (once)" if lines[2].startswith("exporting") else "loading the encoders"
    assert lines[2] == f"{encoder}…"
    done = [n for n, line in enumerate(lines) if line.startswith(f"{encoder}: done in ")]
    assert len(done) == 1  # (the export's own library warnings may come between)
    samples = lines[done[0] + 1:]
    assert samples and all(line.startswith("sample data: ") for line in samples)  # no per-row "bad date" lines
    assert any(line.startswith("sample data: finance ") for line in samples)
    for line in samples:
        if "skipped (see " in line:
            listed = Path(line.rsplit("(see ", 1)[1].rstrip(")"))
            assert int(line.split(", ")[-1].split()[0]) == len(listed.read_text().splitlines())
    again = runner.invoke(cli, ["prepare"])
    assert "sample data: every pack already has data" in again.stderr


class _Readyz(BaseHTTPRequestHandler):
    ready = threading.Event()

    def do_GET(self):  # noqa: N802  (http.server's name)
        self.send_response(200 if self.path == "/readyz" and self.ready.is_set() else 503)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_serve_prints_one_ready_line_once_readyz_answers_200(capfd):
    server = HTTPServer(("127.0.0.1", 0), _Readyz)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        announcer = _announce_ready("127.0.0.1", server.server_port, interval=0.05)
        time.sleep(0.3)
        assert "ready at" not in capfd.readouterr().out  # 503 so far: a worker still warming up
        _Readyz.ready.set()
        announcer.join(timeout=5)
        assert capfd.readouterr().out == f"ready at http://127.0.0.1:{server.server_port}\n"
    finally:
        server.shutdown()


class _Warming:
    """Parts whose embedded LLM is still warming up; every other part answers."""

    settings = {"DATA_DIR": ".", "MCP_SERVERS": []}

    def __init__(self, done: threading.Event):
        self.llm_warming = threading.Thread(target=done.wait)
        self.llm_warming.start()
        self.db = self.encoder = self.text_encoder = self
        self.llm = object()

    def ping(self):
        pass

    def encode_query(self, texts):
        return texts


def test_readyz_waits_for_the_llm_warm_up():
    done = threading.Event()
    parts = _Warming(done)
    assert readiness(parts) == {"ready": False, "checks": {"database": "ok", "disk": "ok", "encoder": "ok",
                                                           "llm": "warming up"}}
    done.set()
    parts.llm_warming.join()
    assert readiness(parts)["ready"] is True
