"""Prometheus metrics of one app: decisions by path and signal, latencies, tool-call outcomes."""
from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest, multiprocess

# Buckets in seconds: routes take milliseconds, turns with a CPU LLM take seconds to minutes.
ROUTE_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.012, 0.02, 0.05, 0.1, 0.25, 1.0)
TURN_BUCKETS = (0.05, 0.25, 1, 2.5, 5, 10, 20, 40, 80, 160)


class Metrics:
    """A registry per app, so several apps (tests, workers) never share counters by accident."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self):
        self.registry = CollectorRegistry()
        self.decisions = Counter("funes_decisions", "Decisions by endpoint, path and deciding signal",
                                 ["endpoint", "path", "decided_by", "outcome"], registry=self.registry)
        self.route_seconds = Histogram("funes_route_seconds", "Time to route one message", ["endpoint"],
                                       buckets=ROUTE_BUCKETS, registry=self.registry)
        self.turn_seconds = Histogram("funes_turn_seconds", "Time of a whole chat turn", ["path"],
                                      buckets=TURN_BUCKETS, registry=self.registry)
        self.llm_seconds = Histogram("funes_llm_seconds", "Time spent in the LLM during a turn",
                                     buckets=TURN_BUCKETS, registry=self.registry)
        self.tool_calls = Counter("funes_tool_calls", "Tool calls by tool and outcome", ["tool", "outcome"],
                                  registry=self.registry)

    def routed(self, endpoint: str, decided_by: str, seconds: float, path: str | None = None) -> None:
        """A routing; counted as a decision here when no turn follows (`path` given: route, proxy)."""
        self.route_seconds.labels(endpoint).observe(seconds)
        if path is not None:
            self.decisions.labels(endpoint, path, decided_by, "ok").inc()

    def turn(self, path: str, decided_by: str, outcome: str, seconds: float, llm_seconds: float) -> None:
        self.decisions.labels("chat", path, decided_by, outcome).inc()
        self.turn_seconds.labels(path).observe(seconds)
        self.llm_seconds.observe(llm_seconds)

    def tool_call(self, tool: str, outcome: str) -> None:
        self.tool_calls.labels(tool, outcome).inc()

    def render(self) -> bytes:
        """The text exposition; under `serve` (PROMETHEUS_MULTIPROC_DIR set) every worker's counts, summed."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
            return generate_latest(registry)
        return generate_latest(self.registry)
