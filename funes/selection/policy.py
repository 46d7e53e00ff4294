"""The decision cascade: measured Evidence and thresholds in, chosen tool positions out. Numbers only, no I/O.

Order: a question about a tool, or a message that only thanks or says goodbye, selects none; a tool named
to run; the message and its clauses; the classifier's veto; the message with history; a tool's own keyword
pattern; for generated cards, the generated-card fallback; else none.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from funes.selection.scorers import Evidence

QUANTILE_MIN_CARDS = 12  # registries smaller than this keep TOOL_THRESHOLD (measured on the BFCL mix)


def similarity(ev: Evidence, s: dict[str, Any]) -> np.ndarray:
    """Embedding plus weighted lexical, minus how far a negative example is closer than the card."""
    return similarity_of(ev.embedding, ev.lexical, ev.negative, s)


def similarity_of(embedding: np.ndarray, lexical: np.ndarray, negative: np.ndarray, s: dict[str, Any]) -> np.ndarray:
    """`similarity` from its three score matrices."""
    return (embedding + s["LEXICAL_WEIGHT"] * lexical
            - s["NEGATIVE_WEIGHT"] * np.maximum(0.0, negative - embedding)).astype(np.float32)


def bare_threshold(n_tools: int, anchor_signals: Callable[[], tuple | None], s: dict[str, Any]) -> float:
    """The similarity a bare card needs: TOOL_THRESHOLD, or what TOOL_THRESHOLD_QUANTILE of the no-tool
    anchors' best scores over this registry stay under (its cards' wording sets the scale)."""
    # A few cards say little about how their registry is worded, and near-miss requests to one or two
    # cards (BFCL's irrelevance sets) score above unrelated anchors: those keep the fixed threshold.
    q = s["TOOL_THRESHOLD_QUANTILE"] if n_tools >= QUANTILE_MIN_CARDS else 0.0
    threshold = anchor_quantile(anchor_signals, q, s)
    return float(s["TOOL_THRESHOLD"]) if threshold is None else threshold


def anchor_quantile(anchor_signals: Callable[[], tuple | None], q: float, s: dict[str, Any]) -> float | None:
    """The similarity that share `q` of the no-tool anchors' best scores over a registry stay under (None: q 0
    or no anchors)."""
    signals = anchor_signals() if q else None
    if signals is None:
        return None
    return float(np.quantile(similarity_of(*signals, s).max(axis=1), q))


def combined(ev: Evidence, s: dict[str, Any]) -> np.ndarray:
    """The score thresholds apply to: the classifier's probability where there is one, else similarity."""
    return ev.classifier if ev.classifier is not None else similarity(ev, s)


def _by_card(ev: Evidence, row: int, picks: list[int], s: dict[str, Any]) -> list[int]:
    """As many tools as the classifier picked, the best by log P + CARD_WEIGHT x cosine to the card's own words.

    Generated examples stray (a trip planner's "How do I get to Jaipur by train?"); the name and
    description are the one text a person wrote, so they settle which of the likely tools it is."""
    if not picks or ev.card is None or not s["CARD_WEIGHT"]:
        return picks
    blend = np.log(np.maximum(ev.classifier[row], 1e-9)) + s["CARD_WEIGHT"] * ev.card[row]
    return np.argsort(-blend)[: len(picks)].tolist()


def _row_picks(ev: Evidence, scores: np.ndarray, row: int, none_row: int, thresholds: np.ndarray,
               s: dict[str, Any]) -> list[int]:
    """A row's eligible tools, best first: its best, and others within MULTI_GAP (similarity only)."""
    ok = scores[row] >= thresholds
    if ev.classifier is None:  # the classifier learnt "none" itself; similarity must beat the anchors
        ok &= ev.embedding[row] - ev.none[none_row] >= s["NONE_MARGIN"]
    if not ok.any():
        return []
    if ev.classifier is not None:
        return _by_card(ev, row, sorted(np.flatnonzero(ok).tolist(), key=lambda i: -scores[row][i]), s)
    ok &= scores[row] >= float(scores[row][ok].max()) - s["MULTI_GAP"]
    return sorted(np.flatnonzero(ok).tolist(), key=lambda i: -scores[row][i])


def _clause_pick(ev: Evidence, scores: np.ndarray, row: int, thresholds: np.ndarray, s: dict[str, Any]) -> list[int]:
    """A clause of a multi-part message adds its best tool at the lower CLASSIFIER_MULTI_THRESHOLD."""
    if ev.classifier is None:
        return _row_picks(ev, scores, row, row, thresholds, s)
    best = int(np.argmax(scores[row]))
    return _by_card(ev, row, [best], s) if scores[row][best] >= s["CLASSIFIER_MULTI_THRESHOLD"] else []


def _vetoed(ev: Evidence, s: dict[str, Any]) -> bool:
    """The classifier is sure the message itself needs no tool: no fallback may overrule it."""
    return ev.no_tool is not None and float(ev.no_tool[0]) >= s["NONE_VETO"]


def _unsure_pick(ev: Evidence, floor: np.ndarray, s: dict[str, Any]) -> list[int]:
    """The classifier's best tool, where it reaches that tool's floor (inf: never)."""
    best = int(np.argmax(ev.classifier[0]))
    return _by_card(ev, 0, [best], s) if ev.classifier[0][best] >= floor[best] else []


def with_required(ev: Evidence, picks: list[int], requires: list[list[int]]) -> list[int]:
    """On a first turn, a tool that needs another's output (build_itinerary <- search_pois) brings it,
    placed before it: small models call the first tool offered first."""
    if ev.history:
        return picks
    out: list[int] = []
    for i in picks:
        out += [r for r in requires[i] if r not in out and r not in picks]
        out.append(i)
    return out


def choose(ev: Evidence, scores: np.ndarray, thresholds: np.ndarray, s: dict[str, Any],
           requires: list[list[int]], fallback: np.ndarray,
           fallback_gate: float = -np.inf) -> tuple[list[int], str, list[int]]:
    """The chosen tool positions (best first), the signal that decided, and the query rows it used.

    `fallback`: per-tool probability floors of the generated-texts fallback (inf: never); `fallback_gate`:
    the similarity a message needs for that fallback (FALLBACK_QUANTILE)."""
    rows = list(range(ev.n_segments))
    if ev.about_tool or ev.closing:  # a closing would otherwise be read with history as a follow-up
        return [], "none", rows
    if ev.named:
        return sorted(ev.named, key=lambda i: -ev.named[i]), "name", rows
    picks = _row_picks(ev, scores, 0, 0, thresholds, s)
    for row in rows[1:]:
        picks += [i for i in _clause_pick(ev, scores, row, thresholds, s) if i not in picks]
    if picks:
        best = scores[rows].max(axis=0)
        return with_required(ev, sorted(picks, key=lambda i: -best[i]), requires), "embedding", rows
    if _vetoed(ev, s):
        return [], "none", rows
    if ev.history:
        ctx = ev.n_segments
        picks = _row_picks(ev, scores - np.float32(s["CONTEXT_PENALTY"]), ctx, 0, thresholds, s)
        if picks:
            return picks, "embedding", rows + [ctx]
    sim = similarity(ev, s)[0]
    hits = [i for i in ev.keyword_hits if sim[i] >= s["KEYWORD_MIN_SCORE"]]
    if hits:
        return with_required(ev, sorted(hits, key=lambda i: -sim[i])[:1], requires), "keyword", rows
    # A classifier learnt from generated texts spreads its belief over near tools more than one learnt from
    # written ones: where it is unsure there is nothing to do, its best generated card stands, even below
    # the threshold (against the bare-card similarity pick: +0.045 to +0.085 on four sets, bench/enrich_fallback.py).
    # But a message that looks no more like any card than half the no-tool anchors do is no tool: beside
    # 199 cards the classifier is seldom sure of "none" (MetaTool 0.643 -> 0.682, bench/enrich_size.py).
    if (ev.no_tool is not None and float(ev.no_tool[0]) < s["GENERATED_FALLBACK"]
            and len(sim) and float(sim.max()) >= fallback_gate):
        picks = _unsure_pick(ev, fallback, s)
        if picks:
            return with_required(ev, picks, requires), "fallback", rows
    return [], "none", rows
