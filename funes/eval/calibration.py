"""Calibrate routing thresholds on labelled cases, reporting before/after on a held-out split."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from funes.eval.scoring import Measured, lenient_accuracy, score, stratified_split

# The settings swept, each over its grid (coordinate ascent, a few rounds).
GRID: dict[str, list[float]] = {
    "CLASSIFIER_THRESHOLD": [round(x, 3) for x in np.arange(0.2, 0.81, 0.05)],
    "CLASSIFIER_MULTI_THRESHOLD": [round(x, 3) for x in np.arange(0.15, 0.61, 0.05)] + [1.01],
    "NONE_VETO": [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.01],
    "GATE_THRESHOLD": [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7],
    "TOOL_THRESHOLD_QUANTILE": [0.0, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.99],
    "TOOL_THRESHOLD": [round(x, 3) for x in np.arange(0.30, 0.86, 0.02)],
    "LEXICAL_WEIGHT": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7],
    "KEYWORD_MIN_SCORE": [round(x, 3) for x in np.arange(0.25, 0.8, 0.05)] + [9.0],
    "CONTEXT_PENALTY": [0.0, 0.03, 0.06, 0.1, 0.15, 0.25, 9.0],
    "NEGATIVE_WEIGHT": [0.0, 0.5, 1.0, 2.0],
}
ROUNDS = 3
PER_TOOL_MIN_CASES = 8     # a tool needs this many fit cases before it gets its own threshold
PER_TOOL_STEPS = [-0.12, -0.08, -0.04, 0.04, 0.08, 0.12]


@dataclass(frozen=True)
class Calibration:
    settings: dict[str, Any]
    fit_before: dict[str, Any]
    fit_after: dict[str, Any]
    holdout_before: dict[str, Any]
    holdout_after: dict[str, Any]
    n_fit: int
    n_holdout: int


def split(measured: list[Measured], share: float, seed: int) -> tuple[list[Measured], list[Measured]]:
    """A held-out share of the cases, stratified by whether a tool is expected: (fit, held-out)."""
    held, fit = stratified_split(measured, lambda m: bool(m.case.expected), share, seed)
    return fit, held


def objective(measured: list[Measured], overrides: dict[str, Any], cap: float) -> float:
    """Lenient accuracy, heavily penalised past the cap on tools given to no-tool messages."""
    acc, false_tool = lenient_accuracy(measured, overrides)
    return acc - 5.0 * max(0.0, false_tool - cap)


def _sweep_globals(fit: list[Measured], current: dict[str, Any], cap: float) -> dict[str, Any]:
    best = objective(fit, current, cap)
    for _ in range(ROUNDS):
        improved = False
        for name, values in GRID.items():
            for value in values:
                trial = {**current, name: value}
                got = objective(fit, trial, cap)
                if got > best + 1e-9:
                    best, current, improved = got, trial, True
        if not improved:
            break
    return current


def _default_thresholds(fit: list[Measured], current: dict[str, Any]) -> dict[str, float]:
    """Each tool's threshold under `current` before any per-tool one, as the cases' routers work it out."""
    out: dict[str, float] = {}
    routers = {id(m.router): m.router for m in fit}
    for router in routers.values():
        tuned = router.tuned({**current, "TOOL_THRESHOLDS": {}})
        for tool, threshold in zip(tuned.tools, tuned.thresholds):
            out.setdefault(tool.name, float(threshold))
    return out


def _sweep_per_tool(fit: list[Measured], current: dict[str, Any], cap: float) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for m in fit:
        for name in m.case.expected:
            counts[name] = counts.get(name, 0) + 1
    best = objective(fit, current, cap)
    thresholds = dict(current.get("TOOL_THRESHOLDS") or {})
    defaults = _default_thresholds(fit, current)
    for name in sorted(n for n, c in counts.items() if c >= PER_TOOL_MIN_CASES):
        base = thresholds.get(name, defaults.get(name, current["TOOL_THRESHOLD"]))
        for step in PER_TOOL_STEPS:
            trial_t = {**thresholds, name: float(round(base + step, 3))}
            got = objective(fit, {**current, "TOOL_THRESHOLDS": trial_t}, cap)
            if got > best + 1e-9:
                best, thresholds = got, trial_t
    return {**current, "TOOL_THRESHOLDS": thresholds}


def calibrate(measured: list[Measured], cfg: dict[str, Any]) -> Calibration:
    """Fit the global then per-tool thresholds on one split; score both splits before and after."""
    fit, held = split(measured, cfg["CALIBRATE_HOLDOUT"], cfg["CALIBRATE_SEED"])
    cap = cfg["CALIBRATE_MAX_FALSE_TOOL"]
    start = {k: cfg[k] for k in GRID} | {"TOOL_THRESHOLDS": {}}
    fitted = _sweep_per_tool(fit, _sweep_globals(fit, start, cap), cap)
    before = {k: cfg[k] for k in fitted}
    return Calibration(settings=fitted, fit_before=score(fit, before), fit_after=score(fit, fitted),
                       holdout_before=score(held, before) if held else {},
                       holdout_after=score(held, fitted) if held else {}, n_fit=len(fit), n_holdout=len(held))
