"""The first /chat after `serve` against the second, same run: is the embedded model warm when serve says ready?

Usage (the embedded model; its GGUF already assembled in the data dir, so no start pays for that):
    FUNES_DATA_DIR=/work/data python bench/first_chat.py
Starts `python -m funes serve` on a free port with a throwaway SQLite database, waits for its
`ready at http://...` line, then times two /chat turns, two short messages of the same kind (the next turn a
user sends is another message: the same one twice would be a whole-prompt cache hit), and prints both and
their ratio (target <= 1.3x).
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
START_LIMIT_S = 600  # the encoder, the sample data and the embedded model loading on a busy 2-core machine


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, tmp: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, Path]:
    """`python -m funes serve` on `port`, a fresh SQLite database under `tmp`; its output goes to tmp/serve.log."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "FUNES_DATABASE_URL": f"sqlite:///{tmp}/funes.db", **(env or {})}
    log = tmp / "serve.log"
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, "-m", "funes", "serve", "--port", str(port)], cwd=ROOT, env=env,
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return server, log


def wait_ready(server: subprocess.Popen, log: Path, limit_s: float = START_LIMIT_S) -> tuple[str, float]:
    """The URL of serve's `ready at` line and the seconds it took to appear."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if server.poll() is not None:
            raise RuntimeError(f"serve exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        for line in log.read_text().splitlines():
            if line.startswith("ready at "):
                return line.removeprefix("ready at ").strip(), time.monotonic() - started
        time.sleep(0.5)
    raise TimeoutError(f"no ready line within {limit_s:.0f} s:\n{log.read_text()[-3000:]}")


def stop_server(server: subprocess.Popen) -> None:
    """Stop serve and its workers (its own process group)."""
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)


def time_chat(url: str, message: str) -> tuple[float, dict]:
    """Seconds one /chat turn took, and its reply."""
    started = time.perf_counter()
    response = httpx.post(url + "/chat", json={"message": message}, timeout=600)
    response.raise_for_status()
    return time.perf_counter() - started, response.json()


def first_and_second(first_message: str, second_message: str) -> dict:
    """Start serve, wait for ready, time a /chat turn with each message; the numbers as a dict."""
    with tempfile.TemporaryDirectory(prefix="funes-first-chat-") as tmp:
        server, log = start_server(free_port(), Path(tmp))
        try:
            url, ready_s = wait_ready(server, log)
            first, reply = time_chat(url, first_message)
            second, _ = time_chat(url, second_message)
        finally:
            stop_server(server)
    return {"ready_s": ready_s, "first_s": first, "second_s": second, "ratio": first / second,
            "reply": str(reply.get("reply", ""))[:80]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", nargs=2, default=["Hi! How are you today?", "Hello! How is your day going?"])
    args = parser.parse_args()
    r = first_and_second(*args.messages)
    print(f"ready after {r['ready_s']:.1f} s; first /chat {r['first_s']:.2f} s, second {r['second_s']:.2f} s, "
          f"ratio {r['ratio']:.2f} (target <= 1.3); reply {r['reply']!r}")


if __name__ == "__main__":
    main()
