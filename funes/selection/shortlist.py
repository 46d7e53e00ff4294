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


@dataclass(frozen=True)
class Shortlist:
    tools: tuple[str, ...]                  # best first; () = no tool fits
    probabilities: tuple[float | None, ...]  # each one's P(card | the message needs one of the tools)
    picked: tuple[bool, ...]                # whether the router itself selected it
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"tools": [{"name": n, "probability": p, "picked": k}
                          for n, p, k in zip(self.tools, self.probabilities, self.picked)], "reason": self.reason}


def shortlist(decision: Decision, k: int, settings: dict[str, Any]) -> Shortlist:
    """The tools to offer for `decision`, at most `k`."""
    if not decision.selected:
        return Shortlist((), (), (), decision.reason)
    coverage = settings["SHORTLIST_COVERAGE"]
    chosen = [c for c in decision.candidates if c.selected][:k]
    others = sorted((c for c in decision.candidates if not c.selected and c.probability is not None),
                    key=lambda c: -c.probability)
    held = sum(c.probability or 0.0 for c in chosen)
    for c in others:
        if len(chosen) >= k or held >= coverage:
            break
        chosen.append(c)
        held += c.probability
    names = ", ".join(c.name for c in chosen if not c.selected)
    reason = f"{decision.reason}; also {names}: together P {held:.2f} of the cards it may need" if names else \
        decision.reason
    return Shortlist(tuple(c.name for c in chosen), tuple(c.probability for c in chosen),
                     tuple(c.selected for c in chosen), reason)
