"""A registry of written cards beside a user's bare or enriched ones: each group routed by its own router.

One classifier over the union starves the user's cards: written cards bring ten examples each, a bare
card its name alone, so "turn off the kitchen lights" scored set_light 0.19 beside the packs against
0.69 alone. Each group is routed as if it were alone (the written cards' classifier also learns the
user's generated examples as "none", so "how warm is the nursery?" stops looking like get_weather), and
the decisions are merged in `_choose`: a tool named in the message wins; of two picks, the written one
unless the user's is closer by the cards' own words (and, bare, reaches its card's threshold); a user's pick alone stands, unless it is a weak
bare one and the written classifier is sure no tool is needed. The written classifier learns the user's
cards as "none" too: their generated examples, or a bare card's own words. Measured: bench/mixed.py.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from funes.selection import policy
from funes.selection.decision import Candidate, Decision
from funes.selection.index import card_texts, group_max
from funes.selection.scorers import Evidence
from funes.tools.registry import Registry, Tool

OTHERS_LOGGED = 3  # the other group's best candidates a Decision keeps, however many its own group has


def written(tool: Tool) -> bool:
    """Whether a card routes by examples a person wrote (the packs'), not by a user's bare or generated texts."""
    return not tool.bare and tool.generated is None


def split(registry: Registry) -> tuple[Registry, Registry] | None:
    """(written cards, the user's bare or enriched cards), or None when the registry holds only one kind."""
    cards = [t for t in registry if written(t)]
    user = [t for t in registry if not written(t)]
    return (Registry(cards), Registry(user)) if cards and user else None


@dataclass(frozen=True)
class MixedEvidence:
    """One Evidence per group, in the router's group order, and the message's cosine to every card's own words."""

    parts: tuple[Evidence, ...]
    cosine: np.ndarray           # per card of the registry: best cosine to its name, description and parameters
    position: dict[str, int]     # tool name -> its card's column in `cosine`

    def own_words(self, name: str) -> float:
        """The message's cosine to the card's own words (looked up for the picks only: 10,000 cards cost 3 ms)."""
        return float(self.cosine[self.position[name]])


class MixedRouter:
    """Routes a mixed registry through one router per group and merges their decisions (see module doc)."""

    cards = "mixed"

    def __init__(self, registry: Registry, groups: list, key: str = ""):
        self.registry, self.groups, self.key = registry, groups, key  # groups: written first, then the user's
        self.encoder = groups[0].encoder
        self.tools: list[Tool] = list(registry)
        self.settings = groups[0].settings
        texts = card_texts(Registry(dataclasses.replace(t, examples=(), generated=None) for t in registry))
        self._heads, self._owner = self.encoder.encode_cards(texts.texts), texts.owner
        self._ids = {t.name: t.id for t in registry if t.id}
        self._position = {t.name: i for i, t in enumerate(self.tools)}
        self._requires = [[self._position[r] for r in t.requires if r in self._position] for t in self.tools]

    @property
    def classifier(self):
        return self.groups[0].classifier

    @property
    def thresholds(self) -> np.ndarray:
        """Each card's threshold in force, in the registry's order: its own group's (calibration reads them)."""
        own = {t.name: float(x) for g in self.groups for t, x in zip(g.tools, g.thresholds)}
        return np.asarray([own[t.name] for t in self.tools], dtype=np.float32)

    def tuned(self, overrides: dict[str, Any]) -> MixedRouter:
        """The same groups under other settings (for calibration sweeps)."""
        other = copy.copy(self)
        other.groups = [g.tuned(overrides) for g in self.groups]
        other.settings = other.groups[0].settings
        return other

    def measure(self, messages: Any) -> MixedEvidence:
        parts = tuple(g.measure(messages) for g in self.groups)  # one encoder: later groups hit its query cache
        cosine = group_max(self.encoder.encode_query([parts[0].message]) @ self._heads.T, self._owner,
                           len(self.tools), fill=-1.0)[0]
        return MixedEvidence(parts, cosine, self._position)

    def picks(self, ev: MixedEvidence) -> list[str]:
        return list(self.decide(ev).selected)

    def decide(self, ev: MixedEvidence) -> Decision:
        decisions = [g.decide(e) for g, e in zip(self.groups, ev.parts)]
        chosen = _choose(decisions, ev, self.settings)
        if chosen is None:  # the written cards' classifier vetoed the user's pick
            vetoed = decisions[0]
            reason = (f"no tool: P(no tool) {vetoed.no_tool_probability:.2f} ≥ MIXED_NONE_VETO over the written cards, "
                      f"and {decisions[1].selected[0]} of the user's bare cards is under TOOL_THRESHOLD")
            return replace(_merged(decisions, 0, self.key, self.settings["CANDIDATES_LOGGED"]), reason=reason,
                           decided_by="mixed_veto")
        return self._with_required(_merged(decisions, chosen, self.key, self.settings["CANDIDATES_LOGGED"]), ev)

    def _with_required(self, decision: Decision, ev: MixedEvidence) -> Decision:
        """On a first turn, a tool the chosen group's pick requires from the other group comes along, placed
        before it, as within one group."""
        picks = [self._position[n] for n in decision.selected]
        out = [self.tools[i].name for i in policy.with_required(ev.parts[0], picks, self._requires)]
        if len(out) == len(decision.selected):
            return decision
        candidates = tuple(replace(c, selected=True) if c.name in out else c for c in decision.candidates)
        return replace(decision, selected=tuple(out), selected_ids=tuple(self._ids[n] for n in out if n in self._ids),
                       candidates=candidates)

    def select(self, messages: Any) -> Decision:
        return self.decide(self.measure(messages))


def _choose(decisions: list[Decision], ev: MixedEvidence, s: dict[str, Any]) -> int | None:
    """Which group's decision stands (None: no tool). A named tool wins; else the written cards' pick, unless
    the user's pick is closer to the message by the cards' own words (the one text every card has) by
    MIXED_MARGIN and, over bare cards, reaches its card's threshold; a user's pick alone stands unless it is
    vetoed (`_vetoed`). Own words mislead where MiniLM reads a message poorly (not English, a follow-up), and
    there a bare pick under its threshold took the packs' requests: docs/results.md, "Your tools beside the packs"."""
    written, user = decisions
    named = [i for i, d in enumerate(decisions) if d.decided_by == "name" and d.selected]
    if named:
        return named[0]
    if not user.selected:
        return 0
    if not written.selected:
        return None if _vetoed(written, user, s) else 1
    if user.cards == "bare" and _weak(user):
        return 0
    closest = {i: max(ev.own_words(n) for n in d.selected) for i, d in enumerate(decisions)}
    return 1 if closest[1] - closest[0] >= s["MIXED_MARGIN"] else 0


def _vetoed(written: Decision, user: Decision, s: dict[str, Any]) -> bool:
    """The written cards' classifier is sure no tool is needed (MIXED_NONE_VETO), and the user's bare pick is weak:
    under TOOL_THRESHOLD, and the gate (where there is one) gave it less than even odds. Requests for the packs
    reach a user's bare cards at low similarity; a pick the gate is sure of stands ("play Bohemian Rhapsody in
    the kitchen", P 0.66 at similarity 0.45)."""
    if user.cards != "bare" or written.no_tool_probability is None:
        return False
    best = max(c.score for c in user.candidates if c.selected)
    unsure = user.need_probability is None or user.need_probability < 0.5  # the gate, where there is one, leans no
    return written.no_tool_probability >= s["MIXED_NONE_VETO"] and best < s["TOOL_THRESHOLD"] and unsure


def _weak(decision: Decision) -> bool:
    """Every pick scored under its card's own threshold: the gate chose it as the closest card, no more."""
    return all(c.score < c.threshold for c in decision.candidates if c.selected)


def _merged(decisions: list[Decision], chosen: int, key: str, logged: int) -> Decision:
    """The chosen group's decision, with the other groups' best candidates after its own (at least
    OTHERS_LOGGED of them, so the log shows why a tool of the other group lost); where it chose no tool, the
    groups' candidates in turn."""
    main = decisions[chosen]
    # the other group's candidates: not what this decision selected, and their P is on their own group's scale
    others = tuple(replace(c, selected=False, probability=None) for i, d in enumerate(decisions) if i != chosen
                   for c in d.candidates)
    if main.selected:
        kept = max(logged - min(len(others), OTHERS_LOGGED), sum(c.selected for c in main.candidates))
        own = main.candidates[:kept]
        candidates = (own + others)[: max(logged, len(own))]
    else:
        candidates = _alternated(others, main.candidates)[:logged]
    timings = {k: round(sum(d.timings_ms.get(k, 0.0) for d in decisions), 3) for k in main.timings_ms}
    group = "written cards" if chosen == 0 else f"the user's {main.cards} cards"
    return replace(main, candidates=candidates, timings_ms=timings, reason=f"{main.reason} ({group})",
                   cards="mixed", registry=key)


def _alternated(others: tuple[Candidate, ...], own: tuple[Candidate, ...]) -> tuple[Candidate, ...]:
    """Where no tool was chosen, the groups' candidates in turn, the other group's first: the closest named
    beside an empty answer then come from both (the user's tools, as often as the packs')."""
    out = []
    for i in range(max(len(others), len(own))):
        out += [c[i] for c in (others, own) if i < len(c)]
    return tuple(out)
