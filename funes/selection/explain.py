"""Package a choice into a Decision: candidates in order, every signal's score, thresholds and the reason."""
from __future__ import annotations

from typing import Any

import numpy as np

from funes.selection.decision import Candidate, Decision
from funes.selection.ranking import rank_scores
from funes.selection.scorers import Evidence
from funes.tools.registry import Tool


def ranked(ev: Evidence, scores: np.ndarray, picks: list[int], decided_by: str, rows: list[int],
           tools: list[Tool], s: dict[str, Any]) -> tuple[list[int], np.ndarray]:
    """The candidates' order score; over bare cards, the selected tools (never others) in that order."""
    if ev.classifier is not None:
        return picks, scores[rows].max(axis=0)
    rank = rank_scores(scores, rows, ev.n_segments, s)
    # A tool placed after the tool it needs keeps that place (see policy.with_required).
    if decided_by in ("similarity", "gate", "history") and not any(tools[i].requires for i in picks):
        picks = sorted(picks, key=lambda i: -rank[i])
    return picks, rank


SIGNALS = ("embedding", "lexical", "negative", "classifier", "card")  # Evidence's per-tool matrices


def _signals(ev: Evidence, rows: list[int], order: list[int]) -> list[dict[str, float | None]]:
    """Each candidate's best score per signal over the rows (message parts) decided on."""
    # rounded as whole arrays: seventy round() calls a message cost more than the rest of the packaging
    best = {name: _rounded(m[rows][:, order].max(axis=0)) if (m := getattr(ev, name)) is not None
            else [None] * len(order) for name in SIGNALS}
    named = _rounded(np.asarray([ev.named.get(i, 0.0) for i in order]))
    return [{**{name: b[n] for name, b in best.items()}, "keyword": 1.0 if i in ev.keyword_hits else 0.0,
             "name": named[n]} for n, i in enumerate(order)]


def _rounded(values: np.ndarray) -> list[float]:
    """Floats to four places, as round() gives them (a quotient of integers is the nearest double)."""
    return np.round(values.astype(np.float64), 4).tolist()


def card_probability(ev: Evidence, score: np.ndarray, rank: np.ndarray, temperature: float | None) -> np.ndarray | None:
    """P(each card | the message needs one of them): the classifier's belief over the tools where there is one
    (`score`: its best over the rows decided on), else a softmax of the candidates' order at the temperature the
    gate learnt (None: no gate)."""
    if ev.classifier is not None:
        return score / max(float(score.sum()), 1e-9)
    if temperature is None or not len(rank):
        return None
    odds = np.exp(temperature * (rank - rank.max()))
    return odds / odds.sum()


def decision(ev: Evidence, scores: np.ndarray, rank: np.ndarray, picks: list[int], decided_by: str,
             rows: list[int], tools: list[Tool], thresholds: np.ndarray, settings: dict[str, Any],
             timings: dict[str, float], cards: str = "written", registry: str = "",
             temperature: float | None = None) -> Decision:
    """The frozen Decision, with every logged candidate's per-signal scores, candidates in `rank` order."""
    score = scores[rows].max(axis=0)
    top = np.argsort(-rank)[: settings["CANDIDATES_LOGGED"]].tolist()
    order = sorted(set(top) | set(picks), key=lambda i: -rank[i])
    scored, limits = _rounded(score[order]), _rounded(np.asarray(thresholds)[order])
    p = card_probability(ev, score, rank, temperature)
    probability = _rounded(p[order]) if p is not None else [None] * len(order)
    candidates = tuple(Candidate(name=tools[i].name, id=tools[i].id, score=scored[n], threshold=limits[n],
                                 selected=i in picks, signals=signals, probability=probability[n])
                       for n, (i, signals) in enumerate(zip(order, _signals(ev, rows, order))))
    selected = tuple(tools[i].name for i in picks)
    reason = why(ev, decided_by, picks, score, thresholds, tools, settings)
    used_history = ev.history if rows[-1] == ev.n_segments else ()
    return Decision(message=ev.message, selected=selected, decided_by=decided_by, reason=reason,
                    candidates=candidates, none_score=round(float(ev.none[0]), 4),
                    thresholds=dict(settings), timings_ms={k: round(v, 3) for k, v in timings.items()},
                    history_used=used_history,
                    no_tool_probability=round(float(ev.no_tool[0]), 4) if ev.no_tool is not None else None,
                    selected_ids=tuple(tools[i].id for i in picks if tools[i].id), cards=cards,
                    registry=registry, need_probability=round(ev.need, 4) if ev.need is not None else None)


def why(ev: Evidence, rule: str, picks: list[int], score: np.ndarray, thresholds: np.ndarray, tools: list[Tool],
        s: dict[str, Any]) -> str:
    """One sentence: the rule that fired and the numbers that made it fire."""
    p_none = float(ev.no_tool[0]) if ev.no_tool is not None else None
    fixed = {"about_tool": "no tool: the message asks how a tool works, not to run it",
             "closing": "no tool: the message only thanks, praises or says goodbye"}
    if rule in fixed:
        return fixed[rule]
    # over bare cards a non-English message's need is e5's gate's (funes.selection.multilingual)
    need = "P(needs a tool, read by e5)" if ev.multilingual_ms is not None and ev.classifier is None else "P(needs a tool)"
    if rule == "gate" and ev.need is not None:
        parts = [f"{tools[picks[0]].name}: {need} {ev.need:.2f} ≥ GATE_THRESHOLD {s['GATE_THRESHOLD']:.2f}, "
                 f"the closest card (score {score[picks[0]]:.2f})"] if picks else []
        return "; ".join(parts + [f"{tools[i].name}: one part of the message" for i in picks[1:]])
    if rule == "veto":
        return f"no tool: P(no tool) {p_none:.2f} ≥ NONE_VETO {s['NONE_VETO']:.2f}"
    if not picks:
        best = int(np.argmax(score)) if len(score) else None
        top = f"; best {tools[best].name} {score[best]:.2f} < {thresholds[best]:.2f}" if best is not None else ""
        if ev.need is not None and ev.need < s["GATE_THRESHOLD"]:
            closest = f"; closest {tools[best].name} {score[best]:.2f}" if best is not None else ""
            return f"no tool: {need} {ev.need:.2f} < GATE_THRESHOLD {s['GATE_THRESHOLD']:.2f}{closest}"
        return f"no tool: nothing reached its threshold{top}" + (f"; P(no tool) {p_none:.2f}" if p_none is not None else "")
    names = ", ".join(tools[i].name for i in picks)
    if rule == "name":
        return f"{names}: named in the message as a tool to run"
    if rule == "keyword":
        return f"{names}: its keyword pattern matched, score ≥ KEYWORD_MIN_SCORE {s['KEYWORD_MIN_SCORE']:.2f}"
    if rule == "fallback":
        return (f"{names}: the classifier's best enriched card, P {score[picks[0]]:.2f}, P(no tool) {p_none:.2f} "
                f"< GENERATED_FALLBACK {s['GENERATED_FALLBACK']:.2f}")
    # without a classifier the score is cosine plus LEXICAL_WEIGHT × shared words: it can pass 1, so not "similarity"
    label = "P" if ev.classifier is not None else "score"
    parts = [f"{tools[i].name}: {label} {score[i]:.2f} " + (f"≥ {thresholds[i]:.2f}" if score[i] >= thresholds[i]
             else "(one part of the message, or needed by another pick)") for i in picks]
    return "; ".join(parts) + (" (with the previous turn)" if rule == "history" else "")
