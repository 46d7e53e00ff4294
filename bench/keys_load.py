"""Load with API keys in force: users chat and route at once through `serve`, then every row is accounted for.

A real `python -m funes serve` (gunicorn, 2 workers x 4 threads by default) on an empty data dir, one key per
user from `funes keys add`, and a small local OpenAI-compatible server standing in for the LLM (instant
replies, so the load lands on Funes). Reported: requests, throughput, latency, errors; rows lost (a 200 whose
decision is not stored) or duplicated (a stored chat turn no client was told of); and cross-user reads: each
user asks for another's decisions and conversations, and lists the log, which must hold only their own rows.

    .venv/bin/python bench/keys_load.py [--users 8] [--requests 600] [--clients 16]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import socket
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import sqlalchemy

MESSAGES = ["what time is it in Lisbon?", "How many people live in Moscow?", "tell me a joke",
            "weather in Oslo tomorrow?", "How much did I spend on groceries?", "what did I watch yesterday?"]


class FakeLLM(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat server that answers every request at once, with no tool call."""

    def do_GET(self):  # /v1/models, for readiness
        self._send({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send({"id": "c", "object": "chat.completion", "created": 0, "model": "fake",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "Here you are."}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 3}})

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def funes(env: dict, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "funes", *args], env=env, capture_output=True, text=True,
                          check=True, **kwargs)


class Load:
    """The requests one run sends, and what came back."""

    def __init__(self, url: str, keys: dict[str, str]):
        self.url, self.keys = url, keys
        self.http = httpx.Client(timeout=120)
        self.lock = threading.Lock()
        self.told: dict[int, str] = {}        # decision id -> user, from every 200
        self.conversations: dict[str, list[str]] = {u: [] for u in keys}
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.cross_reads = self.cross_checks = 0

    def one(self, i: int) -> None:
        rng = random.Random(i)
        user = rng.choice(list(self.keys))
        headers = {"Authorization": f"Bearer {self.keys[user]}"}
        kind = rng.random()
        started = time.perf_counter()
        if kind < 0.6:
            mine = self.conversations[user]
            body = {"message": rng.choice(MESSAGES)}
            if mine and rng.random() < 0.5:
                body["conversation_id"] = rng.choice(mine)
            res = self.http.post(f"{self.url}/chat", json=body, headers=headers)
        elif kind < 0.85:
            res = self.http.post(f"{self.url}/route", headers=headers,
                                 json={"messages": [{"role": "user", "content": rng.choice(MESSAGES)}]})
        else:
            self.probe_others(user, headers, rng)
            return
        ms = (time.perf_counter() - started) * 1000
        with self.lock:
            self.latencies.append(ms)
            if res.status_code != 200:
                self.errors.append(f"{res.status_code} {res.text[:120]}")
                return
            body = res.json()
            self.told[body["decision_id"]] = user
            if "conversation_id" in body and body["conversation_id"] not in self.conversations[user]:
                self.conversations[user].append(body["conversation_id"])

    def probe_others(self, user: str, headers: dict, rng: random.Random) -> None:
        """Ask for another user's decision and conversation, and list the log: each leak counts."""
        with self.lock:
            theirs = [d for d, u in self.told.items() if u != user]
            their_conversations = [c for u, cs in self.conversations.items() if u != user for c in cs]
        leaks = checks = 0
        if theirs:
            checks += 1
            leaks += self.http.get(f"{self.url}/decisions/{rng.choice(theirs)}", headers=headers).status_code != 404
        if their_conversations:
            checks += 1
            res = self.http.post(f"{self.url}/chat", headers=headers,
                                 json={"message": "and again?", "conversation_id": rng.choice(their_conversations)})
            leaks += res.status_code != 404
        rows = self.http.get(f"{self.url}/decisions?limit=500", headers=headers).json()["decisions"]
        checks += 1
        leaks += any(r["user_id"] != user for r in rows)
        with self.lock:
            self.cross_reads += leaks
            self.cross_checks += checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--clients", type=int, default=16, help="concurrent client threads")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()

    llm = ThreadingHTTPServer(("127.0.0.1", 0), FakeLLM)
    threading.Thread(target=llm.serve_forever, daemon=True).start()
    data = tempfile.mkdtemp(prefix="funes-keys-load-")
    env = {**os.environ, "FUNES_DATA_DIR": data, "FUNES_LLM_BACKEND": "openai", "FUNES_ENRICH": "off",
           "FUNES_OPENAI_BASE_URL": f"http://127.0.0.1:{llm.server_port}/v1", "HF_HUB_OFFLINE": "1"}
    keys = {f"user{i}": funes(env, "keys", "add", "--user", f"user{i}").stdout.strip() for i in range(args.users)}
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "funes", "serve", "--port", str(port), "--workers",
                               str(args.workers), "--threads", str(args.threads)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                sys.exit("the service did not become healthy")
            time.sleep(1)
        load = Load(url, keys)
        started = time.perf_counter()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(load.one, range(args.requests)))
        seconds = time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(60)
    report(load, seconds, f"sqlite:///{data}/funes.db", args)
    shutil.rmtree(data, ignore_errors=True)  # the data dir holds its own ONNX export, ~300 MB


def report(load: Load, seconds: float, db_url: str, args) -> None:
    """Compare what clients were told with what the database holds."""
    engine = sqlalchemy.create_engine(db_url)
    with engine.connect() as conn:
        stored = dict(conn.execute(sqlalchemy.text("SELECT id, user_id FROM decisions WHERE outcome = 'ok'")).all())
    lost = [d for d in load.told if d not in stored]
    wrong_user = [d for d, u in load.told.items() if d in stored and stored[d] != u]
    untold = [d for d in stored if d not in load.told]  # stored, but no client heard of it
    lat = sorted(load.latencies)
    p95 = lat[int(0.95 * (len(lat) - 1))] if lat else 0.0
    print(f"serve --workers {args.workers} --threads {args.threads}, {args.users} users with keys, "
          f"{args.clients} concurrent clients, {args.requests} requests in {seconds:.1f} s")
    print("| answered 200 | errors | req/s | p50 ms | p95 ms | rows lost | rows stored untold | rows under another "
          "user | cross-user reads |")
    print(f"| {len(load.told)} | {len(load.errors)} | {len(lat) / seconds:.0f} | {statistics.median(lat):.1f} | "
          f"{p95:.1f} | {len(lost)} | {len(untold)} | {len(wrong_user)} | {load.cross_reads} of "
          f"{load.cross_checks} checks |")
    for e in load.errors[:5]:
        print("error:", e)


if __name__ == "__main__":
    main()
