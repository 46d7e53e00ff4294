"""The proxy measured: the time it adds over calling the upstream directly, and the tool tokens it saves."""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import numpy as np

from funes.eval.loopback import Loopback
from funes.llm.parsing import parse_text_tool_calls
from funes.proxy.upstream import NO_DELAY

ANSWER = json.dumps({"model": "bench", "created_at": "2026-01-01T00:00:00Z", "done": True,
                     "message": {"role": "assistant", "content": "ok"}}).encode()


class InstantUpstream:
    """An Ollama-shaped /api/chat that answers at once and keeps the tool names of each proxied request."""

    def __init__(self):
        self.tools_seen: list[list[str]] = []  # requests that came through Funes (X-Bench-Path: proxy)
        seen = self.tools_seen

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):  # as Ollama's Go server does: no Nagle, so headers and body leave at once
                super().setup()
                self.request.setsockopt(*NO_DELAY[0])

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.headers.get("X-Bench-Path") == "proxy":
                    seen.append([t["function"]["name"] for t in body.get("tools", [])])
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(ANSWER)))
                self.end_headers()
                self.wfile.write(ANSWER)

        self._server = Loopback(Handler)
        self.url = self._server.url

    def close(self) -> None:
        self._server.close()


def as_functions(cards: list[dict]) -> list[dict]:
    """Cards as the `tools` list an Ollama or OpenAI client sends."""
    return [{"type": "function", "function": {"name": c["name"], "description": c.get("description", ""),
                                              "parameters": c.get("parameters", {"type": "object", "properties": {}})}}
            for c in cards]


def _stats(ms: list[float]) -> dict[str, float]:
    return {"p50": round(float(np.percentile(ms, 50)), 2), "p95": round(float(np.percentile(ms, 95)), 2)}


def overhead(funes_url: str, upstream_url: str, bodies: list[dict], cards: list[dict], repeat: int,
             progress: Callable[[Iterable], Iterable] = iter) -> dict[str, Any]:
    """Milliseconds per request: straight to the upstream, through Funes, and Funes' POST /route on the same
    messages and tools (routing plus its logged decision, over HTTP), interleaved so noise hits all three."""
    samples: dict[str, list[float]] = {"direct": [], "proxy": [], "route": []}
    with httpx.Client(timeout=60, transport=httpx.HTTPTransport(socket_options=NO_DELAY)) as http:
        for body in progress(bodies * repeat):
            for path, url, payload in (("direct", f"{upstream_url}/api/chat", body),
                                       ("proxy", f"{funes_url}/api/chat", body),
                                       ("route", f"{funes_url}/route", {"messages": body["messages"], "tools": cards})):
                t0 = time.perf_counter()
                http.post(url, json=payload, headers={"X-Bench-Path": path}).raise_for_status()
                samples[path].append((time.perf_counter() - t0) * 1000)
    added = [p - d for p, d in zip(samples["proxy"], samples["direct"])]
    return {"requests": len(added), **{f"{k}_ms": _stats(v) for k, v in samples.items()}, "added_ms": _stats(added)}


def tool_tokens(tools: list[dict], seen: list[list[str]], count: Callable[[str], int]) -> dict[str, Any]:
    """Tokens of the tool definitions a client sends, against those Funes forwarded, per request."""
    by_name = {t["function"]["name"]: count(json.dumps(t, ensure_ascii=False)) for t in tools}
    every = sum(by_name.values())
    sent = [sum(by_name[n] for n in names) for names in seen]
    return {"tools": len(tools), "all_tools_tokens": every, "forwarded_tokens_median": float(np.median(sent)),
            "forwarded_tokens_mean": round(float(np.mean(sent)), 1),
            "tools_forwarded_median": float(np.median([len(n) for n in seen])),
            "saved_share": round(1 - float(np.mean(sent)) / every, 3) if every else 0.0}


RESULT = json.dumps({"status": "ok"})  # what the client's tool returns: the loop measures calls, not answers


def end_to_end(funes_url: str, llm_url: str, cases: list, tools: list[dict], max_tokens: int,
               progress: Callable[[Iterable], Iterable] = iter, steps: int = 3) -> dict[str, Any]:
    """Each case's conversation sent with every tool, straight to the LLM server and through Funes' /v1 proxy,
    by a client that runs every call and sends the result back, as agent frameworks do, for up to `steps`
    answers: whether the model called exactly the expected tools (none for a no-tool case), in its first
    answer and over the loop, and seconds per turn. Calls count whether the server returned them structured
    or the model wrote them as text (a ```json block, <tool_call> tags), which Ollama and most agent
    frameworks parse too."""
    names = [t["function"]["name"] for t in tools]
    rows = []
    with httpx.Client(timeout=600) as http:
        for case in progress(cases):
            row = {"id": case.id, "expected": sorted(case.expected)}
            for mode, url in (("direct", llm_url), ("proxy", funes_url)):
                row[mode] = _loop(http, f"{url}/v1/chat/completions", case.messages, tools, names, max_tokens, steps)
                row[mode]["right_first"] = row[mode]["first_status"] == 200 and row[mode]["first"] == row["expected"]
                row[mode]["right"] = row[mode]["status"] == 200 and row[mode]["called"] == row["expected"]
            rows.append(row)
    summary = {mode: {"right": sum(r[mode]["right"] for r in rows), "n": len(rows),
                      "right_first_answer": sum(r[mode]["right_first"] for r in rows),
                      "median_seconds": float(np.median([r[mode]["seconds"] for r in rows]))}
               for mode in ("direct", "proxy")}
    return {"summary": summary, "steps": steps, "cases": rows}


def _loop(http: httpx.Client, url: str, messages: list[dict], tools: list[dict], names: list[str],
          max_tokens: int, steps: int) -> dict[str, Any]:
    """One client turn: ask, run each call (every tool answers RESULT), ask again, until no new tool is called."""
    messages, seen, answers = list(messages), set(), []  # answers: (status, calls, reply) of each step
    t0 = time.perf_counter()
    for step in range(max(1, steps)):
        body = {"model": "local", "messages": messages, "tools": tools, "temperature": 0, "max_tokens": max_tokens}
        res = http.post(url, json=body)
        message = res.json()["choices"][0]["message"] if res.status_code == 200 else {}
        calls = _calls(message, names)
        answers.append((res.status_code, sorted({name for name, _ in calls}), message.get("content") or ""))
        if not {name for name, _ in calls} - seen:  # words, or the same calls again: the loop has ended
            break
        seen.update(name for name, _ in calls)
        ids = [f"call_{step}_{i}" for i in range(len(calls))]
        # calls written as text go back structured, as a framework that parsed them sends them
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in zip(ids, calls)]})
        messages += [{"role": "tool", "tool_call_id": i, "content": RESULT} for i in ids]
    (first_status, first, _), (status, _, reply) = answers[0], answers[-1]
    return {"status": status, "first_status": first_status, "seconds": round(time.perf_counter() - t0, 2),
            "first": first, "called": sorted(seen), "steps": len(answers), "reply": reply[:200]}


def _calls(message: dict, names: list[str]) -> list[tuple[str, dict]]:
    """(name, arguments) of each call in an answer, structured or written as text."""
    _, written = parse_text_tool_calls(message.get("content") or "", names, lambda n: n)
    calls = []
    for c in message.get("tool_calls") or []:
        try:
            arguments = json.loads(c["function"].get("arguments") or "{}")
        except (TypeError, ValueError):
            arguments = {}
        calls.append((c["function"]["name"], arguments if isinstance(arguments, dict) else {}))
    return calls + [(c.name, c.arguments) for c in written]
