"""The frozen record of one routing decision: what was chosen, why, and with which thresholds."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

@dataclass(frozen=True)
class Candidate:
    name: str
    score: float                     # combined score compared with the threshold
    threshold: float                 # the threshold in force for this tool
    signals: dict[str, float]        # per-signal scores: embedding, lexical, negative, classifier, card, keyword, name
    selected: bool = False
    id: str | None = None
    probability: float | None = None  # P(this card | the message needs one of the registry's): the shortlist's order

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: v for k, v in data.items() if v is not None}


@dataclass(frozen=True)
class Decision:
    message: str
    selected: tuple[str, ...]                 # tool names handed to the LLM, best first; () = answer without tools
    decided_by: str                           # the rule that fired: one of policy.DECIDERS
    reason: str
    candidates: tuple[Candidate, ...]
    none_score: float                         # similarity to the closest message that needs no tool
    thresholds: dict[str, Any]
    timings_ms: dict[str, float]
    history_used: tuple[str, ...] = ()
    no_tool_probability: float | None = None  # the classifier's P(no tool), where the registry has one
    selected_ids: tuple[str, ...] = field(default=())
    cards: str = "written"                    # written | bare | enriched: what the registry's cards carried
    registry: str = ""                        # hash of the cards routed over (labels attach to it)
    need_probability: float | None = None     # the learned gate's P(needs one of the tools), over bare cards

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["selected"] = list(self.selected)
        data["candidates"] = [c.to_dict() for c in self.candidates]
        data["history_used"] = list(self.history_used)
        data["selected_ids"] = list(self.selected_ids)
        return data
