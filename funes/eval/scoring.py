"""Score a router on labelled cases (../shared/eval/FORMAT.md): strict/lenient accuracy, no-tool F1, recall@k."""
from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from funes.errors import BadRequest, RegistryError
from funes.selection.factory import RouterFactory
from funes.selection.router import Evidence, Router
from funes.tools.loaders import load_cards
from funes.tools.registry import Registry


@dataclass(frozen=True)
class Case:
    id: str
    messages: list[dict]
    expected: frozenset[str]
    acceptable: frozenset[str]
    no_tool_ok: bool
    has_acceptable: bool
    tags: tuple[str, ...]
    tools: tuple[dict, ...] | None
    where: str


def _case(data: Any, where: str) -> Case:
    if not isinstance(data, dict):
        raise BadRequest(f"{where}: a case must be a JSON object")
    for key, typ in (("id", str), ("messages", list), ("expected_tools", list)):
        if not isinstance(data.get(key), typ):
            raise BadRequest(f"{where}: case field {key!r} missing or not a {typ.__name__}")
    expected = frozenset(data["expected_tools"])
    tools = data.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest(f"{where}: case field 'tools' must be a list")
    return Case(id=data["id"], messages=data["messages"], expected=expected,
                acceptable=frozenset(data.get("acceptable_tools") or expected) | expected,
                no_tool_ok=bool(data.get("no_tool_acceptable")),
                has_acceptable="acceptable_tools" in data, tags=tuple(data.get("tags", ())),
                tools=tuple(tools) if tools is not None else None, where=where)


def cases_from_labels(rows: list[dict]) -> list[Case]:
    """Labelled decisions (LabelLog.labelled) as cases: the message with the history it was routed with."""
    cases = []
    for r in rows:
        messages = [{"role": "user", "content": h} for h in r["history"]] + [{"role": "user", "content": r["message"]}]
        expected = frozenset(r["tools"])
        cases.append(Case(id=f"decision-{r['decision_id']}", messages=messages, expected=expected,
                          acceptable=expected, no_tool_ok=False, has_acceptable=False, tags=("labelled",),
                          tools=None, where=f"decision {r['decision_id']}"))
    return cases


def load_cases(path: str) -> list[Case]:
    """Read a cases file; any problem is a one-line error naming the file and line."""
    cases = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        cases.append(_case(json.loads(line), f"{path}:{n}"))
                    except json.JSONDecodeError as e:
                        raise BadRequest(f"{path}:{n}: invalid JSON: {e.msg}") from None
    except (FileNotFoundError, IsADirectoryError):
        raise BadRequest(f"{path}: cases file not found") from None
    return cases


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def examples_from_cases(labelled: list[Case], per_tool: int, scored: list[Case]) -> dict[str, list[str]]:
    """Single-tool labelled messages as card examples, never one that is also being scored."""
    exclude = {_norm(c.messages[-1]["content"]) for c in scored if c.messages}
    extra: dict[str, list[str]] = {}
    for case in labelled:
        if len(case.expected) != 1 or not case.messages or len(case.messages) > 1:
            continue
        text = case.messages[-1]["content"].strip()
        bucket = extra.setdefault(next(iter(case.expected)), [])
        if _norm(text) not in exclude and len(bucket) < per_tool:
            bucket.append(text)
    return extra


def check_names(case: Case, registry: Registry) -> None:
    """Every expected or acceptable tool must exist in the case's registry."""
    unknown = sorted((case.expected | case.acceptable) - set(registry.names))
    if unknown:
        raise BadRequest(f"{case.where}: unknown tool name(s) {', '.join(unknown)} in case {case.id!r}")


@dataclass
class Measured:
    """One case with its router and evidence, ready to be decided under any settings."""

    case: Case
    router: Router
    evidence: Evidence


def measure_cases(factory: RouterFactory, cases: list[Case], registry: Registry | None,
                  progress: Callable[[Iterable], Iterable] = iter) -> list[Measured]:
    """Build each case's router (inline tools or the shared registry) and measure its message."""
    shared = factory.router(registry) if registry is not None else None
    out = []
    for case in progress(cases):
        if case.tools is not None:
            try:
                reg = load_cards(list(case.tools), f"{case.where}: tools")
            except RegistryError as e:
                raise BadRequest(str(e)) from None
            router = factory.router(reg)
        elif shared is None:
            raise BadRequest(f"{case.where}: case has no inline 'tools' and no tools file was given")
        else:
            reg, router = registry, shared
        check_names(case, reg)
        out.append(Measured(case, router, router.measure(case.messages)))
    return out


def stratified_split(items: list, needs_tool: Callable[[Any], bool], share: float, seed: int) -> tuple[list, list]:
    """(share, rest): `share` of the tool and of the no-tool items each, drawn with `seed`."""
    rng = random.Random(seed)
    taken, rest = [], []
    for group in ([x for x in items if needs_tool(x)], [x for x in items if not needs_tool(x)]):
        group = group[:]
        rng.shuffle(group)
        cut = round(len(group) * share)
        taken += group[:cut]
        rest += group[cut:]
    return taken, rest


def lenient_ok(case: Case, picked: set[str]) -> bool:
    if not picked:
        return not case.expected or case.no_tool_ok
    return picked <= case.acceptable if case.has_acceptable else picked == set(case.expected)


@dataclass
class Tally:
    n: int = 0
    strict: int = 0
    lenient: int = 0
    tp: int = 0   # no tool chosen, none expected
    fp: int = 0   # no tool chosen, one expected
    fn: int = 0   # a tool chosen, none expected
    recall: dict[int, list[float]] = field(default_factory=lambda: {1: [], 3: [], 5: []})
    latency: list[float] = field(default_factory=list)
    tags: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))

    def add(self, case: Case, picked: set[str], ranked: list[str], total_ms: float) -> None:
        self.n += 1
        self.strict += picked == set(case.expected)
        ok = lenient_ok(case, picked)
        self.lenient += ok
        none_chosen, none_expected = not picked, not case.expected
        self.tp += none_chosen and none_expected
        self.fp += none_chosen and not none_expected
        self.fn += (not none_chosen) and none_expected
        if case.expected:
            for k in self.recall:
                self.recall[k].append(len(case.expected & set(ranked[:k])) / len(case.expected))
        self.latency.append(total_ms)
        for tag in case.tags:
            self.tags[tag][0] += 1
            self.tags[tag][1] += ok

    def report(self) -> dict[str, Any]:
        precision = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        recall = self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        lat = np.asarray(self.latency or [0.0])
        return {"n": self.n, "strict_accuracy": _r(self.strict / max(self.n, 1)),
                "lenient_accuracy": _r(self.lenient / max(self.n, 1)),
                "no_tool": {"precision": _r(precision), "recall": _r(recall), "f1": _r(f1)},
                "recall_at": {str(k): _r(float(np.mean(v))) if v else None for k, v in self.recall.items()},
                "latency_ms": {"p50": _r(float(np.percentile(lat, 50))), "p95": _r(float(np.percentile(lat, 95)))},
                "by_tag": {t: {"n": n, "lenient_accuracy": _r(ok / n)} for t, (n, ok) in sorted(self.tags.items())}}


def _r(x: float) -> float:
    return round(x, 4)


def ranked_names(selected: Iterable[str], candidates: Iterable[str]) -> list[str]:
    """Selected tools first, then the other candidates by score, names deduplicated."""
    return list(dict.fromkeys([*selected, *candidates]))


def score(measured: list[Measured], overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Decide every measured case (under optional setting overrides) and report the metrics."""
    tally, tuned = Tally(), {}
    for m in measured:
        router = m.router
        if overrides:
            router = tuned.get(id(m.router)) or tuned.setdefault(id(m.router), m.router.tuned(overrides))
        decision = router.decide(m.evidence)
        ranked = ranked_names(decision.selected, (c.name for c in decision.candidates))
        tally.add(m.case, set(decision.selected), ranked, decision.timings_ms["total"])
    return tally.report()


def lenient_accuracy(measured: list[Measured], overrides: dict[str, Any]) -> tuple[float, float]:
    """Lenient accuracy and the share of no-tool cases given a tool, under overrides (fast path)."""
    ok = false_tool = no_tool = 0
    tuned: dict[int, Router] = {}
    for m in measured:
        router = tuned.get(id(m.router)) or tuned.setdefault(id(m.router), m.router.tuned(overrides))
        picked = set(router.picks(m.evidence))
        ok += lenient_ok(m.case, picked)
        if not m.case.expected:
            no_tool += 1
            false_tool += bool(picked - m.case.acceptable)
    return ok / max(len(measured), 1), false_tool / max(no_tool, 1)
