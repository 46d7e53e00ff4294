"""Which of a client's tools go upstream: Funes' selection, plus what a tool loop in progress needs.

Ollama's and OpenAI's chat requests share the shape this reads: `messages` (with `tool_calls` on assistant
turns) and `tools` as function-calling objects. The router decides; this module only applies the rules.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from funes.errors import BadRequest
from funes.messages import message_text
from funes.selection.decision import Decision
from funes.tools.formats import from_openai

ROUTED_ROLES = ("user", "assistant")


@dataclass(frozen=True)
class Filtered:
    """The request body to forward, and what was decided for it."""

    body: dict[str, Any]
    decision: Decision
    offered: int        # tools the client sent
    kept: list[str]     # names forwarded, in the client's order


def cards_of(tools: Any) -> list[dict]:
    """The client's `tools` as Funes cards (name, description, parameters)."""
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of function tools")
    return [from_openai(tool, f"tools[{i}]") for i, tool in enumerate(tools)]  # a RegistryError is a 400


def conversation(messages: Any) -> list[dict]:
    """The user and assistant turns as routing reads them, ending at the last user message ([] if none)."""
    if not isinstance(messages, list):
        raise BadRequest("'messages' must be a list of messages")
    turns = [{"role": m["role"], "content": text}
             for m in messages if isinstance(m, dict) and m.get("role") in ROUTED_ROLES
             for text in [(message_text(m.get("content")) or "").strip()] if text]
    last_user = max((i for i, m in enumerate(turns) if m["role"] == "user"), default=-1)
    return turns[:last_user + 1]


def called(messages: list) -> set[str]:
    """Tools the conversation has already called: a loop in progress keeps them."""
    names = set()
    for m in messages:
        for call in (m.get("tool_calls") or []) if isinstance(m, dict) else []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.add(function["name"])
    return names


def keep(body: dict[str, Any], decision: Decision, names: list[str], offer: tuple[str, ...]) -> list[str]:
    """The tools offered (the selection or a shortlist), tools already called, the one `tool_choice` names;
    never none under "required"."""
    wanted = set(offer) | called(body.get("messages") or [])
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and isinstance((choice.get("function") or {}).get("name"), str):
        wanted.add(choice["function"]["name"])
    if choice == "required" and not wanted & set(names):
        # the client insists on a call: the best-ranked candidate, or every tool when routing ranked none
        wanted = {decision.candidates[0].name} if decision.candidates else set(names)
    return [n for n in dict.fromkeys(names) if n in wanted]


def apply(body: dict[str, Any], decision: Decision, names: list[str], offer: tuple[str, ...] | None = None) -> Filtered:
    """The body with only the kept tools (no `tools` at all when none is kept), every other field as it came;
    `offer` is what routing offers (the decision's selection unless a shortlist is given)."""
    kept = keep(body, decision, names, decision.selected if offer is None else offer)
    out = dict(body)
    if kept:
        out["tools"] = [t for t, n in zip(body["tools"], names) if n in kept]
    else:  # both APIs refuse tool_choice and parallel_tool_calls without tools
        for key in ("tools", "tool_choice", "parallel_tool_calls"):
            out.pop(key, None)
    return Filtered(out, decision, len(names), kept)
