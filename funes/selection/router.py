"""The router: the registry's scorers measure a message, the policy applies thresholds, a Decision comes out.

It decides; it never acts. `measure` does the costly part (embedding, search); `decide` only compares
numbers with settings, so calibration can replay thousands of messages under new thresholds.
"""
from __future__ import annotations

import copy
import time
from typing import Any, Protocol, runtime_checkable

import numpy as np

from funes.selection import explain, policy
from funes.selection.decision import Decision
from funes.selection.scorers import Anchors, Evidence, Scorers
from funes.tools.registry import Registry

__all__ = ["Anchors", "Evidence", "Router", "Routing", "ROUTING_SETTINGS"]

# The settings a decision depends on: logged with every Decision, overridable per router (calibration).
ROUTING_SETTINGS = ("TOOL_THRESHOLD", "CLASSIFIER_THRESHOLD", "CLASSIFIER_MULTI_THRESHOLD", "NONE_VETO",
                    "TOOL_THRESHOLDS", "GATE_THRESHOLD", "KEYWORD_MIN_SCORE", "MAX_TOOLS",
                    "LEXICAL_WEIGHT", "NEGATIVE_WEIGHT", "CONTEXT_PENALTY", "HISTORY_TURNS", "CLAUSE_MIN_WORDS",
                    "NAME_FUZZY_CUTOFF", "CANDIDATES_LOGGED",
                    "CLAUSE_ALIGN", "GENERATED_FALLBACK",
                    "TOOL_THRESHOLD_QUANTILE", "CARD_WEIGHT", "FALLBACK_QUANTILE", "MIXED_MARGIN",
                    "MIXED_NONE_VETO")


@runtime_checkable
class Routing(Protocol):
    """What every router offers, over one kind of cards (Router) or the packs' beside a user's (MixedRouter)."""

    registry: Registry
    tools: list
    settings: dict[str, Any]
    cards: str           # written | bare | enriched | mixed
    thresholds: np.ndarray  # each card's threshold in force, in `tools`' order

    def measure(self, messages: Any) -> Any: ...          # the costly part: embedding, search (Evidence)
    def decide(self, ev: Any) -> Decision: ...            # numbers only: replayed under other settings
    def select(self, messages: Any) -> Decision: ...      # measure, then decide
    def picks(self, ev: Any) -> list[str]: ...            # the selected names only (calibration's fast path)
    def tuned(self, overrides: dict[str, Any]) -> Routing: ...  # the same cards under other settings


def cards_kind(registry: Registry) -> str:
    """What the registry routes by: generated texts (enriched), bare cards only in part (bare), or written ones."""
    if any(t.generated for t in registry):
        return "enriched"
    return "bare" if any(t.bare for t in registry) else "written"


class Router:
    """Hybrid selection over one registry: embeddings, character n-grams, keywords, names, history."""

    def __init__(self, registry: Registry, encoder, settings: dict[str, Any], anchors: Anchors | None,
                 key: str = "", multilingual=None, foreign: list[str] = (), gate=None):
        self.registry, self.encoder, self.key = registry, encoder, key  # key: the registry's hash, for labels
        self.scorers = Scorers(registry, encoder, settings, anchors, multilingual, foreign, gate)
        self.tools = self.scorers.tools
        position = self.scorers.position
        self._requires = [[position[r] for r in t.requires if r in position] for t in self.tools]
        # routed by its cards' own words where texts were too few for a classifier (a label or two): bare
        kind = cards_kind(registry)
        self.cards = "bare" if kind == "enriched" and self.classifier is None else kind
        self.rules = policy.rules_for(self.cards, self.classifier is not None, self.scorers.gate is not None)
        self._apply(settings)

    @property
    def classifier(self):
        return self.scorers.classifier

    def _apply(self, settings: dict[str, Any]) -> None:
        self.settings = {k: settings[k] for k in ROUTING_SETTINGS}
        if self.cards != "enriched":  # logged as in force: written cards' classifiers need no fallback
            for name in ("GENERATED_FALLBACK", "CARD_WEIGHT", "FALLBACK_QUANTILE"):
                self.settings[name] = 0.0
        per_tool = self.settings["TOOL_THRESHOLDS"] or {}
        default = (self.settings["CLASSIFIER_THRESHOLD"] if self.classifier
                   else policy.bare_threshold(len(self.tools), self._anchor_best, self.settings))
        self.thresholds = np.asarray([per_tool.get(t.name, t.threshold if t.threshold is not None else default)
                                      for t in self.tools], dtype=np.float32)
        # the fallback stands in for generated texts' misses only: written cards' classifier is trusted (a floor
        # on the best card's P paid nothing: docs/results.md#the-other-routing-settings-turned-off-two-fewer)
        self.fallback = np.asarray([0.0 if t.generated else np.inf for t in self.tools], dtype=np.float32)
        gate = policy.anchor_quantile(self._anchor_best, self.settings["FALLBACK_QUANTILE"])
        self.fallback_gate = -np.inf if gate is None else gate

    def _anchor_best(self) -> np.ndarray:
        """The no-tool anchors' best similarity over these cards under the settings in force."""
        return self.scorers.anchor_best(self.settings)

    def tuned(self, overrides: dict[str, Any]) -> Router:
        """The same scorers under other settings (for calibration sweeps)."""
        other = copy.copy(self)
        other._apply({**self.settings, **overrides})
        return other

    def measure(self, messages: Any) -> Evidence:
        """Embed the message (with its clauses and history) and score every tool on every signal."""
        return self.scorers.measure(messages, self.settings)

    def combined(self, ev: Evidence) -> np.ndarray:
        """The score thresholds apply to: the classifier's probability where there is one, else similarity."""
        return policy.combined(ev, self.settings)

    def picks(self, ev: Evidence) -> list[str]:
        """Only the selected tool names (the calibration fast path)."""
        picks, _, _ = policy.choose(ev, self.combined(ev), self.thresholds, self.settings, self._requires,
                                    self.fallback, self.fallback_gate, self.rules)
        return [self.tools[i].name for i in picks[: self.settings["MAX_TOOLS"]]]

    def decide(self, ev: Evidence) -> Decision:
        """Apply the policy to measured evidence and package the outcome."""
        t0 = time.perf_counter()
        scores = self.combined(ev)
        picks, decided_by, rows = policy.choose(ev, scores, self.thresholds, self.settings, self._requires,
                                                self.fallback, self.fallback_gate, self.rules)
        picks, rank = explain.ranked(ev, scores, picks[: self.settings["MAX_TOOLS"]], decided_by, rows,
                                     self.tools, self.settings)
        ms = {"embed": ev.embed_ms, "search": ev.search_ms, "decide": (time.perf_counter() - t0) * 1000}
        if ev.multilingual_ms is not None:  # its presence says e5 read the message (non-English)
            ms["multilingual"] = ev.multilingual_ms
        ms["total"] = sum(ms.values())
        gate = self.scorers.gate
        return explain.decision(ev, scores, rank, picks, decided_by, rows, self.tools, self.thresholds,
                                self.settings, ms, self.cards, self.key, gate.temperature if gate else None)

    def select(self, messages: Any) -> Decision:
        """Decide which tools (none, one or several) to hand to the LLM for the last user message."""
        return self.decide(self.measure(messages))
