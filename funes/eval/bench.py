"""Route latency, measured side by side: every router routes the same fresh message in turn."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from funes.selection.router import Router


def _stats(samples: list[float]) -> dict[str, float]:
    a = np.asarray(samples)
    return {"n": len(a), "p50": round(float(np.percentile(a, 50)), 3), "p95": round(float(np.percentile(a, 95)), 3),
            "mean": round(float(a.mean()), 3)}


def route_latency(routers: dict[str, Router], messages: list[list[dict]], repeat: int,
                  progress: Callable[[Iterable], Iterable] = iter) -> dict[str, Any]:
    """Median and p95 milliseconds per router; the message cache is emptied before every call."""
    samples: dict[str, list[float]] = {name: [] for name in routers}
    for _ in progress(range(repeat)):
        for messages_one in messages:
            for name, router in routers.items():  # interleaved, so machine noise hits every router alike
                router.encoder.clear_cache()
                t0 = time.perf_counter()
                router.select(messages_one)
                samples[name].append((time.perf_counter() - t0) * 1000)
    report = {name: {**_stats(s), "tools": len(routers[name].tools)} for name, s in samples.items()}
    first = next(iter(report))
    for name in report:
        report[name]["p50_ratio_to_" + first] = round(report[name]["p50"] / report[first]["p50"], 3)
    return report


def pick_cases(cases: list, n: int) -> list:
    """n single-message cases spread evenly over the file (tool and no-tool alike)."""
    single = [c for c in cases if len(c.messages) == 1]
    step = max(1, len(single) // n)
    return single[::step][:n]


def chat_turns(apps: dict[str, Any], cases: list, progress: Callable[[Iterable], Iterable] = iter) -> dict[str, Any]:
    """Run each case's message through each app's /chat in turn; tokens, seconds and the tools called."""
    rows = []
    for case in progress(cases):
        row = {"id": case.id, "message": case.messages[-1]["content"], "expected": sorted(case.expected)}
        for name, app in apps.items():
            t0 = time.perf_counter()
            res = app.test_client().post("/chat", json={"message": row["message"], "user_id": f"bench-{name}"})
            body = res.get_json()
            called = sorted({c["name"] for c in body.get("tool_calls", [])}) if res.status_code == 200 else None
            row[name] = {"status": res.status_code, "seconds": round(time.perf_counter() - t0, 2),
                         "prompt_tokens": (body.get("usage") or {}).get("prompt_tokens"),
                         "offered": len(body.get("tools_offered", [])), "called": called,
                         "right": called is not None and set(called) == set(row["expected"])}
        rows.append(row)
    summary = {}
    for name in apps:
        mine = [r[name] for r in rows]
        summary[name] = {"median_seconds": float(np.median([m["seconds"] for m in mine])),
                         "median_prompt_tokens": float(np.median([m["prompt_tokens"] or 0 for m in mine])),
                         "right": sum(m["right"] for m in mine), "n": len(mine)}
    return {"summary": summary, "cases": rows}
