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
