"""One chat turn: route -> LLM with only the selected tools (running its calls) | memory RAG -> reply -> record."""
from __future__ import annotations

import hashlib
import json
import logging
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from sqlalchemy.exc import IntegrityError

from funes import dates
from funes.errors import Conflict, LLMUnavailable, NotFound
from funes.llm.base import LLMReply
from funes.llm.parsing import ProseFilter, is_machinery, is_refusal, says_failure
from funes.metrics import Metrics
from funes.selection.decision import Decision
from funes.selection.router import Router
from funes.selection.scorers import clauses
from funes.store.conversations import ConversationStore
from funes.store.db import Database
from funes.store.decisions import DecisionLog
from funes.tools.runner import CallResult, ToolRunner

log = logging.getLogger(__name__)
CORRECTION = ("That reply was not shown to the user: it held a tool call or JSON. Answer the user now in plain "
              "sentences, from the tool results above if there are any.")
ANSWER_NOW = "Answer the user now, in plain sentences, from the tool results above, without tools."
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
    dates: list[dict[str, str]] = field(default_factory=list)  # relative time in the message, resolved
    memories: list[dict[str, Any]] = field(default_factory=list)
    llm_ms: float = 0.0
    tools_ms: float = 0.0
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    emit: Callable[[str, dict], None] | None = None  # a streaming caller's events: decision, tool_call, token


class ChatService:
    """Wires the router, the LLM, the tools, memory and the logs into turns. Holds no per-turn state."""

    def __init__(self, *, router: Router | Callable[[], Router], llm, runner: ToolRunner, memory, db: Database,
                 conversations: ConversationStore, log: DecisionLog, metrics: Metrics, settings: dict[str, Any]):
        # a callable gives the current router: the configured cards' one changes once they are enriched
        self._router = router if callable(router) else (lambda: router)
        self.llm, self.runner, self.memory = llm, runner, memory
        self.db, self.conversations, self.log, self.metrics = db, conversations, log, metrics
        self.settings = settings
        dates.today(settings["TIME_ZONE"])  # a misspelt zone fails at start, not on every turn

    @property
    def router(self) -> Router:
        return self._router()

    def chat(self, message: str, conversation_id: str | None, user_id: str | None,
             idempotency_key: str | None = None, emit: Callable[[str, dict], None] | None = None) -> dict[str, Any]:
        """Answer one user message; a retry with the same Idempotency-Key gets the stored turn back.

        `emit(event, data)`, where given, hears the turn as it goes: the decision, each tool call, the text."""
        key = _key_hash(user_id, conversation_id, idempotency_key) if idempotency_key else None
        if key and (done := self.log.by_idempotency_key(key)):
            return _replay(done, message)
        try:
            return self._turn(message, conversation_id, user_id, key, emit)
        except IntegrityError:  # a concurrent retry with the same key stored its turn first
            done = self.log.by_idempotency_key(key) if key else None
            if done is None:
                raise
            return _replay(done, message)

    def _turn(self, message: str, conversation_id: str | None, user_id: str | None, key: str | None,
              emit: Callable[[str, dict], None] | None = None) -> dict:
        """One turn, stored whole; the decision is logged even when it fails."""
        t0 = time.perf_counter()
        is_new = conversation_id is None
        conversation_id, user_id = self._owner(conversation_id, user_id)
        history = [] if is_new else self.conversations.recent(conversation_id,
                                                                self.settings["CHAT_HISTORY_MESSAGES"])
        router = self.router  # one router for the whole turn, even if a rebuilt one lands meanwhile
        decision = router.select(history + [{"role": "user", "content": message}])
        self.metrics.routed("chat", decision.decided_by, decision.timings_ms["total"] / 1000)
        uses_tools = bool(decision.selected) or self.settings["OFFER_ALL_TOOLS"]
        turn = Turn(None if is_new else conversation_id, deadline=time.monotonic() + self.settings["TURN_TIMEOUT"],
                    emit=emit)
        path = "tools" if uses_tools else "memory"
        if emit:
            emit("decision", {"conversation_id": conversation_id, "selected": decision.selected,
                              "decided_by": decision.decided_by, "path": path})
        record = dict(decision=decision, path=path, conversation_id=conversation_id, user_id=user_id, turn=turn,
                      t0=t0)
        try:
            reply = self._with_tools(router, decision, history, turn) if uses_tools else \
                self._from_memory(decision, history, user_id, turn)
        except LLMUnavailable as e:
            decision_id = self._record(**record, outcome="llm_unavailable", error=str(e))
            # the client learns which part failed; the server's address and error stay in the decision log
            name = getattr(self.llm, "name", "configured")
            raise LLMUnavailable(f"the LLM ({name}) is unavailable; decision {decision_id} holds the details") from e
        except Exception as e:  # a bug or a database failure: still leave the decision for the inspector
            self._record(**record, outcome="error", error=f"{type(e).__name__}: {e}")
            raise
        with self.db.transaction() as conn:  # the decision row and both messages land together or not at all
            decision_id = self._record(**record, outcome="ok", reply=reply, idempotency_key=key, conn=conn)
            self.conversations.append_turn(conn, conversation_id, user_id, message, reply, decision_id, new=is_new)
        try:  # the turn is committed: a failure here must not tell the client it was lost
            self.memory.add(user_id, f"User: {message}\nAssistant: {reply}", kind="exchange", source=conversation_id)
        except Exception:
            log.exception("decision %s: the exchange was not stored in long-term memory", decision_id)
        return {"reply": reply, "conversation_id": conversation_id, "decision_id": decision_id,
                "tools_offered": turn.tools_offered, "tool_calls": [c.to_dict() for c in turn.tool_calls],
                "memories_used": turn.memories, "usage": _usage(turn)}

    def _owner(self, conversation_id: str | None, user_id: str | None) -> tuple[str, str]:
        """The conversation's id (new if none) and the memory owner; anonymous callers own one conversation each."""
        if conversation_id is None:
            conversation_id = uuid.uuid4().hex
            return conversation_id, user_id or f"anon:{conversation_id}"
        owner = self.conversations.owner(conversation_id)
        # an anonymous caller may go on with an anonymous conversation only, never a named user's;
        # a 404 either way, so as not to reveal that someone else's conversation exists
        if (user_id or f"anon:{conversation_id}") != owner:
            raise NotFound(f"no conversation {conversation_id!r}")
        return conversation_id, owner

    def _ask(self, messages: list[dict], tools: list[dict] | None, turn: Turn,
             require_call: bool = False) -> LLMReply:
        t0 = time.perf_counter()
        # words reach a streaming caller as they are written; calls and JSON never do
        on_text = ProseFilter(lambda text: turn.emit("token", {"text": text})) if turn.emit else None
        try:
            if on_text or require_call:
                reply = self.llm.chat(messages, tools, on_text, require_call=require_call)
            else:
                reply = self.llm.chat(messages, tools)
        finally:
            turn.llm_ms += (time.perf_counter() - t0) * 1000
            turn.steps += 1
        turn.prompt_tokens += reply.prompt_tokens or 0
        turn.completion_tokens += reply.completion_tokens or 0
        return reply

    def _with_tools(self, router: Router, decision: Decision, history: list[dict], turn: Turn) -> str:
        """Offer only the selected tools; run what the LLM calls until it answers or the steps run out."""
        names = [t.name for t in router.tools] if self.settings["OFFER_ALL_TOOLS"] else decision.selected
        tools = [router.registry.get(n) or next(t for t in router.tools if t.name == n) for n in names]
        turn.tools_offered = [t.name for t in tools]
        messages = [{"role": "system", "content": self._tools_prompt(decision, turn)}, *history,
                    {"role": "user", "content": decision.message}]
        corrected, nudged = False, False
        for step in range(self.settings["MAX_TOOL_STEPS"]):
            if time.monotonic() > turn.deadline:  # one budget for the whole turn, however many calls it makes
                return _could_not(turn, f"it took longer than {self.settings['TURN_TIMEOUT']:g} s.")
            # routing chose these tools for this message: the first step may be held to calling one of them
            first = step == 0 and self.settings["REQUIRE_FIRST_CALL"] and not self.settings["OFFER_ALL_TOOLS"]
            reply = self._ask(messages, [t.schema() for t in tools], turn, require_call=first)
            content, calls = reply.content, list(reply.tool_calls)  # backends parse calls written as text
            unused = [] if calls or nudged else self._unused(tools, decision.message, turn)
            if unused:  # a part of the message may still want its tool: one reminder, then the answer stands
                nudged = True
                messages += [{"role": "assistant", "content": content},
                             {"role": "user", "content": UNUSED.format(names=" and ".join(unused))}]
                continue
            if not calls and not is_machinery(content):
                return self._settle(content, messages, turn)
            if not calls:  # half a call, a JSON block: never the answer; one chance to say it in words
                if corrected:
                    return _could_not(turn)
                corrected = True
                messages += [{"role": "assistant", "content": content}, {"role": "user", "content": CORRECTION}]
                continue
            # a call made before in this turn has its result above already: asking again would loop
            calls = [c for c in calls if _signature(c) not in turn.made]
            if not calls:
                break
            messages.append({"role": "assistant", "content": content, "tool_calls": [
                {"id": c.id, "function": {"name": c.name, "arguments": c.arguments}} for c in calls]})
            for call in calls:
                final = self._run_call(call, tools, messages, turn)
                if final is not None:
                    return final
        messages.append({"role": "user", "content": ANSWER_NOW})
        return self._settle(self._ask(messages, None, turn).content, messages, turn, retried=True)

    def _unused(self, tools, message: str, turn: Turn) -> list[str]:
        """Offered tools not called yet, after some were, in a message of several parts."""
        if not turn.tool_calls or not clauses(message, self.settings["CLAUSE_MIN_WORDS"]):
            return []
        called = {c.name for c in turn.tool_calls}
        return [t.name for t in tools if t.name not in called and not t.ends_turn]

    def _settle(self, text: str, messages: list[dict], turn: Turn, retried: bool = False) -> str:
        """The reply the user reads: words, never machinery, an empty or bare refusal, or silence on a failure."""
        text = text.strip()
        if turn.tool_calls and all(c.error for c in turn.tool_calls) and not says_failure(text):
            return _could_not(turn)  # every call failed: say which and why, not a refusal or a guess
        if text and not is_machinery(text) and not is_refusal(text):
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
        elif first := self._first(tool, turn):
            result = CallResult(call.name, arguments, error=f"call {' and '.join(first)} first: {tool.name} works on "
                                                            "its results")
        else:
            result = self.runner.run(tool, call.arguments)
            turn.made.add(_signature(call))
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

    def _tools_prompt(self, decision: Decision, turn: Turn) -> str:
        """The system prompt with tools: today's date and the message's relative dates resolved by code."""
        today = dates.today(self.settings["TIME_ZONE"])
        spans = dates.resolve(decision.message, today)  # "last month" as exact dates: the model gets it wrong
        turn.dates = [s.to_dict() for s in spans]
        return " ".join(filter(None, (_dated(self.settings["TOOLS_PROMPT"], today), dates.prompt_line(spans))))

    def _from_memory(self, decision: Decision, history: list[dict], user_id: str, turn: Turn) -> str:
        """No tool fits: answer from the user's relevant memories, with no tools at all."""
        hits = self.memory.search(user_id, decision.message)
        turn.memories = [{"id": h.id, "text": h.text, "score": round(h.score, 4), "kind": h.kind} for h in hits]
        system = _dated(self.settings["SYSTEM_PROMPT"], dates.today(self.settings["TIME_ZONE"]))
        if hits:
            system += "\n\n" + self.settings["MEMORY_PROMPT"] + "\n" + "\n".join(f"- {h.text}" for h in hits)
        messages = [{"role": "system", "content": system}, *history, {"role": "user", "content": decision.message}]
        return self._ask(messages, None, turn).content.strip()

    def _first(self, tool, turn: Turn) -> list[str]:
        """Offered tools `tool` requires that have not run yet, in this turn or earlier in the conversation."""
        missing = [name for name in tool.requires if name in turn.tools_offered
                   and not any(c.name == name and c.error is None for c in turn.tool_calls)]
        if missing and turn.conversation_id is not None:
            earlier = {c["name"] for row in self.log.query(conversation_id=turn.conversation_id, limit=20)
                       for c in row["tool_calls"] if "error" not in c}
            missing = [name for name in missing if name not in earlier]
        return missing

    def _record(self, decision: Decision, path: str, outcome: str, conversation_id: str, user_id: str, turn: Turn,
                t0: float, reply: str | None = None, error: str | None = None, idempotency_key: str | None = None,
                conn=None) -> int:
        total = (time.perf_counter() - t0) * 1000
        timings = {"llm": round(turn.llm_ms, 3), "tools": round(turn.tools_ms, 3), "turn": round(total, 3)}
        self.metrics.turn(path, decision.decided_by, outcome, total / 1000, turn.llm_ms / 1000)
        return self.log.record(decision, endpoint="chat", path=path, outcome=outcome,
                               conversation_id=conversation_id, user_id=user_id, tools_offered=turn.tools_offered,
                               tool_calls=[c.to_dict() for c in turn.tool_calls], memories_used=turn.memories,
                               timings=timings, usage=_usage(turn), reply=reply, error=error, dates=turn.dates,
                               idempotency_key=idempotency_key, conn=conn)


def _could_not(turn: Turn, why: str = "the model answered with a tool call instead of words. Please rephrase.") -> str:
    """The plain answer to a turn that cannot end well: which tool failed and why, if one did."""
    failed = [c for c in turn.tool_calls if c.error]
    if failed:
        return f"I could not complete that: {failed[-1].name} failed ({failed[-1].error})."
    return f"I could not complete that: {why}"


def _signature(call) -> str:
    """A call's name and arguments, to tell the same call made twice."""
    return json.dumps([call.name, call.arguments], sort_keys=True, default=str)


def _key_hash(user_id: str | None, conversation_id: str | None, key: str) -> str:
    """What a retried turn is found by: the caller's key within its user and conversation, hashed."""
    return hashlib.sha256(json.dumps([user_id, conversation_id, key]).encode()).hexdigest()


def _replay(row: dict[str, Any], message: str) -> dict[str, Any]:
    """The stored turn's answer, as the first request got it."""
    if row["message"] != message:
        raise Conflict("this Idempotency-Key was used for a different message")
    return {"reply": row["reply"], "conversation_id": row["conversation_id"], "decision_id": row["id"],
            "tools_offered": row["tools_offered"], "tool_calls": row["tool_calls"],
            "memories_used": row["memories_used"], "usage": row["usage"], "replayed": True}


def _dated(prompt: str, today: date) -> str:
    """The prompt with today's date, so "last month" means the same to the model as to the tools."""
    return f"{prompt} Today is {today:%A} {today.isoformat()}."


def _usage(turn: Turn) -> dict[str, int]:
    return {"llm_calls": turn.steps, "prompt_tokens": turn.prompt_tokens, "completion_tokens": turn.completion_tokens}
