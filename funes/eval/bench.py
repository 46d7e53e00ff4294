"""Benchmarks: route latency side by side (every router routes the same fresh message in turn), and chat turns."""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from funes.eval.turns import CORE_CHECKS, judge, streamed_turn
from funes.selection.router import Router


def _stats(samples: list[float]) -> dict[str, float]:
    a = np.asarray(samples)
    return {"n": len(a), "p50": round(float(np.percentile(a, 50)), 3), "p95": round(float(np.percentile(a, 95)), 3),
            "mean": round(float(a.mean()), 3)}


def route_latency(routers: dict[str, Router], messages: list[list[dict]], repeat: int,
                  progress: Callable[[Iterable], Iterable] = iter) -> dict[str, Any]:
    """Median and p95 milliseconds per router, and of embedding the message alone with the first router's
    encoder (`encode`: what routing costs beyond it); the message cache is emptied before every call."""
    samples: dict[str, list[float]] = {name: [] for name in routers}
    encode: list[float] = []
    encoder = next(iter(routers.values())).encoder
    for _ in progress(range(repeat)):
        for messages_one in messages:
            for name, router in routers.items():  # interleaved, so machine noise hits every router alike
                for part in getattr(router, "groups", [router]):  # a mixed registry's groups may embed apart
                    part.encoder.clear_cache()
                t0 = time.perf_counter()
                router.select(messages_one)
                samples[name].append((time.perf_counter() - t0) * 1000)
            encoder.clear_cache()
            t0 = time.perf_counter()
            encoder.encode_query([messages_one[-1]["content"]])
            encode.append((time.perf_counter() - t0) * 1000)
    report = {name: {**_stats(s), "tools": len(routers[name].tools)} for name, s in samples.items()}
    first = next(iter(report))
    for name in report:
        report[name]["p50_ratio_to_" + first] = round(report[name]["p50"] / report[first]["p50"], 3)
        report[name]["p50_ratio_to_encode"] = round(report[name]["p50"] / float(np.percentile(encode, 50)), 3)
    report["encode"] = _stats(encode)
    return report


def pick_cases(cases: list, n: int) -> list:
    """n single-message cases spread evenly over the file (tool and no-tool alike)."""
    single = [c for c in cases if len(c.messages) == 1]
    step = max(1, len(single) // n)
    return single[::step][:n]


def chat_turns(apps: dict[str, Any], cases: list, progress: Callable[[Iterable], Iterable] = iter) -> dict[str, Any]:
    """Each case's message through each app's streamed /chat in turn: seconds, tokens, tools, and the judge's checks."""
    rows = []
    for case in progress(cases):
        row = {"id": case.id, "message": case.messages[-1]["content"], "expected": sorted(case.expected)}
        for name, app in apps.items():
            turn = streamed_turn(app.test_client(), row["message"], f"bench-{name}")
            body = turn["body"]
            ok = turn["status"] == 200
            row[name] = {"status": turn["status"], "seconds": turn["seconds"],
                         "prompt_tokens": (body.get("usage") or {}).get("prompt_tokens"),
                         "offered": body.get("tools_offered", []),
                         "calls": [{k: c.get(k) for k in ("name", "arguments", "error")} for c in
                                   body.get("tool_calls", [])],
                         "reply": body.get("reply") if ok else body.get("error"),
                         "checks": judge(set(row["expected"]), body) if ok else {"right": False}}
        rows.append(row)
    return {"summary": {name: _summary([r[name] for r in rows]) for name in apps}, "cases": rows}


def _summary(turns: list[dict]) -> dict[str, Any]:
    """Medians and counts over one mode's turns."""
    def median(key: str) -> float | None:
        values = [t["seconds"][key] for t in turns if key in t["seconds"]]
        return round(float(np.median(values)), 3) if values else None
    failed = sum(not t["checks"].get(check, True) for t in turns for check in ("plain", "no_refusal", "no_repeat"))
    return {"n": len(turns), "right": sum(t["checks"]["right"] for t in turns),
            "tools_right": sum(t["checks"].get("tools", False) for t in turns),
            "raw_replies": sum(not t["checks"].get("plain", True) for t in turns),
            "bare_refusals": sum(not t["checks"].get("no_refusal", True) for t in turns),
            "repeated_calls": sum(not t["checks"].get("no_repeat", True) for t in turns), "failed_checks": failed,
            "core_right": sum(all(t["checks"].get(c, False) for c in CORE_CHECKS) for t in turns),
            "failing": dict(Counter(c for t in turns for c, ok in t["checks"].items() if not ok and c != "right")),
            "median_seconds": median("total"), "median_first_byte": median("first_byte"),
            "median_decision_event": median("decision"), "median_first_words": median("token"),
            "median_prompt_tokens": float(np.median([t["prompt_tokens"] or 0 for t in turns]))}
