"""The tool loop of one turn: offer the selected tools, run what the model calls, settle on a reply in words.

The router has decided; this only acts on its Decision. Every step is held to the turn's deadline.
"""
from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from funes import dates
from funes.llm.base import LLMReply
from funes.llm.parsing import ProseFilter, is_machinery, is_refusal, points_at_tools, says_failure
from funes.metrics import Metrics
from funes.selection.decision import Decision
from funes.selection.router import Router
from funes.selection.scorers import clauses
from funes.store.decisions import DecisionLog
from funes.tools.runner import CallResult, ToolRunner, capped

CORRECTION = ("Now answer the user's message itself in plain sentences, speaking to them as \"you\", from the "
              "tool results above if there are any.")
COULD_NOT = "I could not complete that"  # how a turn that cannot end well begins its reply
ANSWER_NOW = ("Answer the user now, in plain sentences, speaking to them as \"you\", from the tool results above, "
              "without tools.")
UNUSED = ("The user's message asks for several things and {names} has not been called yet. Call it now if a part "
          "of the message needs it; otherwise give your answer again.")


@dataclass
class Turn:
    """What one turn gathered on its way to a reply."""

    conversation_id: str | None = None
    deadline: float = math.inf  # time.monotonic() after which no further LLM step starts
    tools_offered: list[str] = field(default_factory=list)
    tool_calls: list[CallResult] = field(default_factory=list)
    made: set[str] = field(default_factory=set)  # the calls that ran, by name and arguments
    ran: set[str] = field(default_factory=set)  # the tools that ran (a call refused for order of work did not)
    earlier: set[str] | None = None  # tools that ran in the conversation's earlier turns, read once when needed
    batch_from: int = 0  # tool_calls[batch_from:] came in the model's latest step
    dates: list[dict[str, str]] = field(default_factory=list)  # relative time in the message, resolved
    memories: list[dict[str, Any]] = field(default_factory=list)
    llm_ms: float = 0.0
    tools_ms: float = 0.0
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    emit: Callable[[str, dict], None] | None = None  # a streaming caller's events: decision, tool_call, token


def ask(llm, messages: list[dict], tools: list[dict] | None, turn: Turn,
        require_call: bool = False) -> LLMReply:
    """One LLM step of `turn`, counted there: time, steps, tokens; a streaming caller hears its words."""
    t0 = time.perf_counter()
    # words reach a streaming caller as they are written; calls and JSON never do
    on_text = ProseFilter(lambda text: turn.emit("token", {"text": text})) if turn.emit else None
    try:
        if on_text or require_call:
            reply = llm.chat(messages, tools, on_text, require_call=require_call)
        else:
            reply = llm.chat(messages, tools)
    finally:
        turn.llm_ms += (time.perf_counter() - t0) * 1000
        turn.steps += 1
    if on_text and not reply.tool_calls:  # a step in words only: what the filter held back is sent too
        on_text.end()
    turn.prompt_tokens += reply.prompt_tokens or 0
    turn.completion_tokens += reply.completion_tokens or 0
    return reply


class ToolLoop:
    """Runs a routed turn's tools with the LLM; holds no per-turn state (that is the Turn)."""

    def __init__(self, llm, runner: ToolRunner, log: DecisionLog, metrics: Metrics, settings: dict[str, Any]):
        self.llm, self.runner, self.log, self.metrics, self.settings = llm, runner, log, metrics, settings

    def _ask(self, messages: list[dict], tools: list[dict] | None, turn: Turn,
             require_call: bool = False) -> LLMReply:
        return ask(self.llm, messages, tools, turn, require_call)

    def _opening(self, router: Router, decision: Decision, history: list[dict], turn: Turn) -> tuple[list, list]:
        """The tools offered (the selected ones) and the conversation the first step sees."""
        names = [t.name for t in router.tools] if self.settings["OFFER_ALL_TOOLS"] else decision.selected
        tools = [router.registry.get(n) or next(t for t in router.tools if t.name == n) for n in names]
        turn.tools_offered = [t.name for t in tools]
        return tools, [{"role": "system", "content": self._tools_prompt(decision, turn)}, *history,
                       {"role": "user", "content": decision.message}]

    def run(self, router: Router, decision: Decision, history: list[dict], turn: Turn) -> str:
        """Offer only the selected tools; run what the LLM calls until it answers; name any that cannot run here."""
        return _with_no_runner(self._loop(router, decision, history, turn), turn)

    def _loop(self, router: Router, decision: Decision, history: list[dict], turn: Turn) -> str:
        """The steps of `run`: ask, run the calls, feed back their results, settle on words."""
        tools, messages = self._opening(router, decision, history, turn)
        corrected, nudged = False, False
        # routing chose these tools for this message: the first step may be held to calling one of them, among
        # those that can run now (a plan's arguments written before its places were searched are made up)
        required = self.settings["REQUIRE_FIRST_CALL"] and not self.settings["OFFER_ALL_TOOLS"]
        offer = ([t for t in tools if not self.first(t, turn)] or tools) if required else tools
        for _ in range(self.settings["MAX_TOOL_STEPS"]):
            if time.monotonic() > turn.deadline:  # one budget for the whole turn, however many calls it makes
                return _could_not(turn, f"it took longer than {self.settings['TURN_TIMEOUT']:g} s.")
            reply = self._ask(messages, [t.schema() for t in offer] or None, turn, require_call=required)
            content, offer, required = reply.content, tools, False
            # a call made before in this turn has its result above already: asking again would loop
            calls = [c for c in reply.tool_calls if _signature(c) not in turn.made]
            unused = [] if calls or nudged else self._unused(tools, decision.message, turn)
            if unused:  # a part of the message still wants its tool: held to calling it once, then the answer stands
                nudged, offer, required = True, unused, True
                messages += [{"role": "assistant", "content": content}, {"role": "user", "content": UNUSED.format(
                    names=" and ".join(t.name for t in unused))}]
                continue
            if reply.tool_calls and not calls:
                break
            if not calls and not is_machinery(content):
                return self._settle(content, messages, turn)
            if not calls:  # half a call, a JSON block: never the answer; one chance to say it in words, no tools
                if corrected:
                    return _could_not(turn)
                corrected, offer = True, []  # what it wrote stays out: an echoed result only invites more
                messages.append({"role": "user", "content": CORRECTION})
                continue
            messages.append({"role": "assistant", "content": content, "tool_calls": [
                {"id": c.id, "function": {"name": c.name, "arguments": c.arguments}} for c in calls]})
            turn.batch_from = len(turn.tool_calls)
            for call in calls:
                final = self._run_call(call, tools, messages, turn)
                if final is not None:
                    return final
            # a tool this server cannot run is not offered again: the model answers with what it has
            offer = [t for t in tools if not any(c.no_runner and c.name == t.name for c in turn.tool_calls)]
        messages.append({"role": "user", "content": ANSWER_NOW})
        return self._settle(self._ask(messages, None, turn).content, messages, turn, retried=True)

    def _unused(self, tools, message: str, turn: Turn) -> list:
        """Offered tools not run yet, after some were, in a message of several parts."""
        if not turn.ran or not clauses(message, self.settings["CLAUSE_MIN_WORDS"]):
            return []
        return [t for t in tools if t.name not in turn.ran and not t.ends_turn]

    def _settle(self, text: str, messages: list[dict], turn: Turn, retried: bool = False) -> str:
        """The reply the user reads: words, never machinery, an empty or bare refusal, or silence on a failure."""
        text = text.strip()
        if turn.tool_calls and all(c.error for c in turn.tool_calls) and not says_failure(text):
            return _could_not(turn)  # every call failed: say which and why, not a refusal or a guess
        # words that decline, or that tell the user to call the tools, are no answer: one more step without tools
        if text and not is_machinery(text) and not is_refusal(text) and not points_at_tools(text, turn.tools_offered):
            return text
        if turn.tool_calls and not retried and time.monotonic() < turn.deadline:
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": ANSWER_NOW}]
            return self._settle(self._ask(messages, None, turn).content, messages, turn, retried=True)
        if text and not is_machinery(text):
            return text
        return _could_not(turn, "the model gave no answer in words. Please rephrase.")

    def _run_call(self, call, tools, messages: list[dict], turn: Turn) -> str | None:
        """Run one call and feed its result back; returns the final answer when the tool ends the turn."""
        tool = next((t for t in tools if t.name == call.name), None)  # the backend resolved loose names
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        if tool is None:
            offered = ", ".join(turn.tools_offered)
            error = f"tool {call.name!r} is not available; use one of {offered}"
            result = CallResult(call.name, arguments, error=error)
        elif first := self.first(tool, turn):
            ran = any(c.name in first for c in turn.tool_calls[turn.batch_from:])  # called beside it, not before
            error = (f"{tool.name} works on the results of {' and '.join(first)}: " +
                     ("call it again now, with those results" if ran else "call that first"))
            result = CallResult(call.name, arguments, error=error)
        else:
            ran_with = (dates.fill_range(call.arguments, tool.parameters, turn.dates)
                        if isinstance(call.arguments, dict) else call.arguments)
            # what is kept of a result is capped once, here: the model, the log and the reply get the same text
            result = capped(self.runner.run(tool, ran_with), self.settings["TOOL_RESULT_MAX_CHARS"])
            turn.made.add(_signature(call))
            turn.ran.add(tool.name)
        turn.tool_calls.append(result)
        turn.tools_ms += result.ms
        if turn.emit:
            turn.emit("tool_call", result.to_dict())
        # a name the model invented is "unknown": metric labels must not grow with whatever it writes
        self.metrics.tool_call(result.name if tool is not None else "unknown", "error" if result.error else "ok")
        if tool is not None and tool.ends_turn and result.error is None:
            answer = result.result if isinstance(result.result, str) else result.arguments.get("answer")
            if isinstance(answer, str) and answer.strip():
                return answer.strip()
        payload = {"error": result.error} if result.error else {"result": result.result}
        messages.append({"role": "tool", "tool_name": result.name, "tool_call_id": call.id,
                         "content": json.dumps(payload, ensure_ascii=False, default=str)})
        return None

    def first(self, tool, turn: Turn) -> list[str]:
        """Offered tools `tool` requires that have not run yet, in this turn or earlier in the conversation."""
        before = turn.tool_calls[:turn.batch_from]  # a call beside this one was written without its results
        missing = [name for name in tool.requires if name in turn.tools_offered
                   and not any(c.name == name and c.error is None for c in before)]
        if missing and turn.conversation_id is not None:
            if turn.earlier is None:  # the log holds no row of this turn yet: one read serves the whole turn
                turn.earlier = {c["name"] for row in self.log.query(conversation_id=turn.conversation_id, limit=20)
                                for c in row["tool_calls"] if "error" not in c}
            missing = [name for name in missing if name not in turn.earlier]
        return missing

    def _tools_prompt(self, decision: Decision, turn: Turn) -> str:
        """The system prompt with tools: today's date and the message's relative dates resolved by code."""
        today = dates.today(self.settings["TIME_ZONE"])
        spans = dates.resolve(decision.message, today)  # "last month" as exact dates: the model gets it wrong
        turn.dates = [s.to_dict() for s in spans]
        return " ".join(filter(None, (dated(self.settings["TOOLS_PROMPT"], today), dates.prompt_line(spans))))


def _could_not(turn: Turn, why: str = "the model answered with a tool call instead of words. Please rephrase.") -> str:
    """The plain answer to a turn that cannot end well: which tool failed and why, if one did."""
    failed = [c for c in turn.tool_calls if c.error]
    if failed:
        return f"{COULD_NOT}: {failed[-1].name} failed ({_for_user(failed[-1])})."
    return f"{COULD_NOT}: {why}"


def _with_no_runner(reply: str, turn: Turn) -> str:
    """The reply, followed by what it does not say yet about tools that have no handler in this server."""
    notes = [_for_user(c) for c in turn.tool_calls if c.no_runner and c.error]
    notes = [n for n in dict.fromkeys(notes) if n not in reply]
    return " ".join([reply, *(f"({note}.)" for note in notes)]) if notes else reply


def _for_user(call) -> str:
    """A failed call's error as the reply tells it: a missing handler plainly, the operator's remedy left to the
    call's own error (in the response's tool_calls and the decision log)."""
    return f"{call.name} cannot run on this server: it has no handler here" if call.no_runner else call.error


def _signature(call) -> str:
    """A call's name and arguments, to tell the same call made twice."""
    return json.dumps([call.name, call.arguments], sort_keys=True, default=str)


def dated(prompt: str, today: date) -> str:
    """The prompt with today's date, so "last month" means the same to the model as to the tools."""
    return f"{prompt} Today is {today:%A} {today.isoformat()}."
