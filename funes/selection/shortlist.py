"""A shortlist by confidence, for clients that choose among a few tools themselves (a strong LLM, an MCP client).

The router's own pick comes first; then the cards it may have meant, most likely first, until the listed
cards hold SHORTLIST_COVERAGE of its belief P(card | the message needs one), or `k` are listed: one tool when
it is sure, up to k when it is not. Where the router chose no tool, none, with its reason: offering the
likely cards down to a low P(needs a tool) cost far more no-tool requests than it won requests that need
one (docs/results.md#shortlists). It reads a Decision and never changes it: the Decision logged is the
router's, with the shortlist offered beside it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from funes.selection.decision import Decision

CLOSEST_NAMED = 3  # tools named beside an empty answer, so a client can still look


@dataclass(frozen=True)
class Shortlist:
    tools: tuple[str, ...]                  # best first; () = no tool fits
    probabilities: tuple[float | None, ...]  # each one's P(card | the message needs one of the tools)
    picked: tuple[bool, ...]                # whether the router itself selected it
    reason: str
    closest: tuple[str, ...] = ()           # beside an empty answer: the closest tools, so a client can still look

    def to_dict(self) -> dict[str, Any]:
        listed = {"tools": [{"name": n, "probability": p, "picked": k}
                            for n, p, k in zip(self.tools, self.probabilities, self.picked)], "reason": self.reason}
        return listed if self.tools else {**listed, "closest": list(self.closest)}


def shortlist(decision: Decision, k: int, settings: dict[str, Any]) -> Shortlist:
    """The tools to offer for `decision`, at most `k`."""
    if not decision.selected:
        return Shortlist((), (), (), decision.reason, tuple(c.name for c in decision.candidates[:CLOSEST_NAMED]))
    names, held = widen(decision, list(decision.selected[:k]), k, settings["SHORTLIST_COVERAGE"])
    p = {c.name: c.probability for c in decision.candidates}
    added = ", ".join(names[len(decision.selected):])
    reason = f"{decision.reason}; also {added}: together P {held:.2f} of the cards it may need" if added else \
        decision.reason
    return Shortlist(tuple(names), tuple(p.get(n) for n in names),
                     tuple(i < len(decision.selected) for i in range(len(names))), reason)


def widen(decision: Decision, names: list[str], k: int, coverage: float) -> tuple[list[str], float]:
    """`names` and then the decision's other candidates, most likely first, until they hold `coverage` of the
    belief or `k` are listed; and the share they hold."""
    p = {c.name: c.probability for c in decision.candidates}
    held = sum(p.get(n) or 0.0 for n in names)
    for c in sorted((c for c in decision.candidates if c.name not in names and c.probability is not None),
                    key=lambda c: -c.probability):
        if len(names) >= k or held >= coverage:
            break
        names.append(c.name)
        held += c.probability
    return names, held
