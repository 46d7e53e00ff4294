"""The decision cascade: measured Evidence and thresholds in, chosen tool positions out. Numbers only, no I/O.

Each kind of registry has its cascade of named rules (`RULES`); the first that fires decides and the
Decision names it. Written and enriched cards: a question about a tool, or a message that only thanks or
says goodbye, selects none; a tool named to run; the classifier over the message and its clauses; its
veto; the message with history; a tool's own keyword pattern; for generated cards, the fallback; else
none. Bare cards: the same with the learned gate (and the closest card) in place of the classifier, and no
veto or fallback; similarity thresholds where no gate was fitted over the encoder.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from funes.selection.scorers import Evidence, similarity_of

QUANTILE_MIN_CARDS = 12  # registries smaller than this keep TOOL_THRESHOLD (measured on the BFCL mix)


def similarity(ev: Evidence, s: dict[str, Any]) -> np.ndarray:
    """Embedding plus weighted lexical, minus how far a negative example is closer than the card."""
    return similarity_of(ev.embedding, ev.lexical, ev.negative, s)


def bare_threshold(n_tools: int, anchor_best: Callable[[], np.ndarray], s: dict[str, Any]) -> float:
    """The similarity a bare card needs: TOOL_THRESHOLD, or what TOOL_THRESHOLD_QUANTILE of the no-tool
    anchors' best scores over this registry stay under (its cards' wording sets the scale)."""
    # A few cards say little about how their registry is worded, and near-miss requests to one or two
    # cards (BFCL's irrelevance sets) score above unrelated anchors: those keep the fixed threshold.
    q = s["TOOL_THRESHOLD_QUANTILE"] if n_tools >= QUANTILE_MIN_CARDS else 0.0
    threshold = anchor_quantile(anchor_best, q)
    return float(s["TOOL_THRESHOLD"]) if threshold is None else threshold


def anchor_quantile(anchor_best: Callable[[], np.ndarray], q: float) -> float | None:
    """The similarity that share `q` of the no-tool anchors' best scores over a registry stay under (None: q 0
    or no anchors); `anchor_best` gives those scores (Scorers.anchor_best)."""
    best = anchor_best() if q else None
    return float(np.quantile(best, q)) if best is not None and len(best) else None


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


def _row_picks(ev: Evidence, scores: np.ndarray, row: int, thresholds: np.ndarray, s: dict[str, Any]) -> list[int]:
    """A row's eligible tools, best first: over a classifier every tool over its threshold, over similarity the
    best alone (a runner-up near it was a wrong second tool more often than a right one; several parts of a
    message get theirs from their clauses)."""
    ok = scores[row] >= thresholds
    if not ok.any():
        return []
    if ev.classifier is not None:
        return _by_card(ev, row, sorted(np.flatnonzero(ok).tolist(), key=lambda i: -scores[row][i]), s)
    return [int(np.flatnonzero(ok)[np.argmax(scores[row][ok])])]


def _clause_pick(ev: Evidence, scores: np.ndarray, row: int, thresholds: np.ndarray, s: dict[str, Any]) -> list[int]:
    """A clause of a multi-part message adds its best tool at the lower CLASSIFIER_MULTI_THRESHOLD."""
    if ev.classifier is None:
        return _row_picks(ev, scores, row, thresholds, s)
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


@dataclass(frozen=True)
class Inputs:
    """What every rule reads: the evidence, its scores, the thresholds and settings in force."""

    ev: Evidence
    scores: np.ndarray
    thresholds: np.ndarray
    s: dict[str, Any]
    requires: list[list[int]]
    fallback: np.ndarray   # per-tool probability floors of the generated-texts fallback (inf: never)
    gate: float            # the similarity a message needs for that fallback (FALLBACK_QUANTILE)

    @property
    def rows(self) -> list[int]:
        return list(range(self.ev.n_segments))


Fired = tuple[list[int], list[int]]  # the chosen tool positions (none: []) and the query rows used


@dataclass(frozen=True)
class Rule:
    """One step of the cascade: `fire` returns what it chose, or None to hand over to the next rule."""

    name: str                    # what a Decision's `decided_by` says when this rule fired
    gloss: str                   # when it fires, for people: docs/routing.md's table is made from it
    settings: tuple[str, ...]    # the settings it reads, or that set the thresholds it compares with
    fire: Callable[[Inputs], Fired | None]


def _message(i: Inputs) -> Fired | None:
    """The message's eligible tools and each clause's best, over the classifier or similarity."""
    picks = _row_picks(i.ev, i.scores, 0, i.thresholds, i.s)
    for row in i.rows[1:]:
        picks += [t for t in _clause_pick(i.ev, i.scores, row, i.thresholds, i.s) if t not in picks]
    if not picks:
        return None
    best = i.scores[i.rows].max(axis=0)
    return with_required(i.ev, sorted(picks, key=lambda t: -best[t]), i.requires), i.rows


def _gated(i: Inputs) -> Fired | None:
    """The learned gate says the message needs one of the cards: the closest card, and each clause's best."""
    if i.ev.need < i.s["GATE_THRESHOLD"]:
        return None
    picks = [int(np.argmax(i.scores[0]))]
    for row in i.rows[1:]:
        picks += [t for t in _clause_pick(i.ev, i.scores, row, i.thresholds, i.s) if t not in picks]
    return with_required(i.ev, picks, i.requires), i.rows


def _history(i: Inputs) -> Fired | None:
    """A follow-up: the message read with the previous user turn, its scores lowered by CONTEXT_PENALTY."""
    if not i.ev.history:
        return None
    ctx = i.ev.n_segments
    picks = _row_picks(i.ev, i.scores - np.float32(i.s["CONTEXT_PENALTY"]), ctx, i.thresholds, i.s)
    return (picks, i.rows + [ctx]) if picks else None


def _keyword(i: Inputs) -> Fired | None:
    """A tool's own keyword pattern matched and its similarity reaches KEYWORD_MIN_SCORE."""
    sim = similarity(i.ev, i.s)[0]
    hits = [t for t in i.ev.keyword_hits if sim[t] >= i.s["KEYWORD_MIN_SCORE"]]
    return (with_required(i.ev, sorted(hits, key=lambda t: -sim[t])[:1], i.requires), i.rows) if hits else None


def _fallback(i: Inputs) -> Fired | None:
    """The classifier's best generated card, where it is unsure rather than sure of none (see below)."""
    # A classifier learnt from generated texts spreads its belief over near tools more than one learnt from
    # written ones: where it is unsure there is nothing to do, its best generated card stands, even below
    # the threshold (against the bare-card similarity pick: +0.045 to +0.085 on four sets).
    # But a message that looks no more like any card than half the no-tool anchors do is no tool: beside
    # 199 cards the classifier is seldom sure of "none" (MetaTool 0.643 -> 0.682; docs/results.md).
    ev, sim = i.ev, similarity(i.ev, i.s)[0]
    if (ev.no_tool is None or float(ev.no_tool[0]) >= i.s["GENERATED_FALLBACK"]
            or not len(sim) or float(sim.max()) < i.gate):
        return None
    picks = _unsure_pick(ev, i.fallback, i.s)
    return (with_required(ev, picks, i.requires), i.rows) if picks else None


ABOUT_TOOL = Rule("about_tool", "the message asks how a named tool works: no tool", ("NAME_FUZZY_CUTOFF",),
                  lambda i: ([], i.rows) if i.ev.about_tool else None)
# a closing would otherwise be read with history as a follow-up and re-run the previous tool
CLOSING = Rule("closing", "the message only thanks or says goodbye: no tool (read with history it had re-run the "
               "previous tool)", (), lambda i: ([], i.rows) if i.ev.closing else None)
NAMED = Rule("name", "a tool is named to run: that tool", ("NAME_FUZZY_CUTOFF",),
             lambda i: (sorted(i.ev.named, key=lambda t: -i.ev.named[t]), i.rows) if i.ev.named else None)
CLASSIFIER = Rule("classifier", "a tool's probability reaches its threshold over the message, or a clause's best "
                  "reaches the lower multi-part one; enriched picks are settled by log P + `CARD_WEIGHT` × the "
                  "message's cosine to the card's own name and description",
                  ("CLASSIFIER_THRESHOLD", "TOOL_THRESHOLDS", "CLASSIFIER_MULTI_THRESHOLD", "CARD_WEIGHT"), _message)
SIMILARITY = Rule("similarity", "the most similar tool, if its similarity reaches its threshold",
                  ("TOOL_THRESHOLD", "TOOL_THRESHOLD_QUANTILE", "TOOL_THRESHOLDS", "LEXICAL_WEIGHT",
                   "NEGATIVE_WEIGHT"), _message)
GATE = Rule("gate", "the learned gate's P(the message needs one of these cards) reaches `GATE_THRESHOLD`: the "
            "closest card, and each clause's best that passes `similarity`'s test",
            ("GATE_THRESHOLD", "TOOL_THRESHOLD", "TOOL_THRESHOLD_QUANTILE", "TOOL_THRESHOLDS", "LEXICAL_WEIGHT",
             "NEGATIVE_WEIGHT"), _gated)
VETO = Rule("veto", "the classifier's P(no tool) for the message itself is at least `NONE_VETO`: no tool, and no "
            "later rule may overrule it", ("NONE_VETO",), lambda i: ([], i.rows) if _vetoed(i.ev, i.s) else None)
HISTORY = Rule("history", "the message read with the previous user turn, scores lowered by `CONTEXT_PENALTY`, "
               "selects a tool", ("HISTORY_TURNS", "CONTEXT_PENALTY"), _history)
KEYWORD = Rule("keyword", "a card's keyword pattern matched and its similarity reaches `KEYWORD_MIN_SCORE`: that tool",
               ("KEYWORD_MIN_SCORE", "LEXICAL_WEIGHT", "NEGATIVE_WEIGHT"), _keyword)
FALLBACK = Rule("fallback", "the classifier picked nothing but is not sure of none (P(no tool) below "
                "`GENERATED_FALLBACK`): its best enriched card stands, but only when the "
                "message's best similarity reaches the `FALLBACK_QUANTILE` quantile of the anchors'",
                ("GENERATED_FALLBACK", "FALLBACK_QUANTILE", "CARD_WEIGHT", "LEXICAL_WEIGHT",
                 "NEGATIVE_WEIGHT"), _fallback)

# One cascade per kind of registry; the first rule that fires decides, and "none" when none does.
RULES: dict[str, tuple[Rule, ...]] = {
    "written": (ABOUT_TOOL, CLOSING, NAMED, CLASSIFIER, VETO, HISTORY, KEYWORD),   # classifier over written texts
    "enriched": (ABOUT_TOOL, CLOSING, NAMED, CLASSIFIER, VETO, HISTORY, KEYWORD, FALLBACK),  # ... generated ones
    "bare": (ABOUT_TOOL, CLOSING, NAMED, GATE, HISTORY, KEYWORD),  # no classifier: the learned gate, the closest card
    "bare_ungated": (ABOUT_TOOL, CLOSING, NAMED, SIMILARITY, HISTORY, KEYWORD),  # no gate for this encoder
}


# What a Decision's `decided_by` can say: a rule above, the mixed registry's veto (funes.selection.mixed), or none.
DECIDERS = (*dict.fromkeys(r.name for cascade in RULES.values() for r in cascade), "mixed_veto", "none")


def rules_for(cards: str, has_classifier: bool, has_gate: bool = False) -> tuple[Rule, ...]:
    """The cascade of a registry: the gate (else similarity) where it has no classifier, else by its cards."""
    if not has_classifier:
        return RULES["bare" if has_gate else "bare_ungated"]
    return RULES["enriched" if cards == "enriched" else "written"]


def choose(ev: Evidence, scores: np.ndarray, thresholds: np.ndarray, s: dict[str, Any],
           requires: list[list[int]], fallback: np.ndarray, fallback_gate: float = -np.inf,
           rules: tuple[Rule, ...] | None = None) -> tuple[list[int], str, list[int]]:
    """The chosen tool positions (best first), the name of the rule that fired, and the query rows it used."""
    inputs = Inputs(ev, scores, thresholds, s, requires, fallback, fallback_gate)
    for rule in rules or rules_for("enriched", ev.classifier is not None, ev.need is not None):
        fired = rule.fire(inputs)
        if fired is not None:
            return fired[0], rule.name, fired[1]
    return [], "none", inputs.rows
