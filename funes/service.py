"""One chat turn: route -> LLM with only the selected tools (running its calls) | memory RAG -> reply -> record."""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.exc import IntegrityError

from funes import dates
from funes.errors import Busy, Conflict, LLMBadReply, LLMUnavailable, NotFound
from funes.llm.gate import TurnGate
from funes.metrics import Metrics
from funes.selection.decision import Decision
from funes.selection.router import Router
from funes.store.conversations import ConversationStore
from funes.store.db import Database
from funes.store.decisions import DecisionLog, TurnClaims
from funes.tool_loop import ToolLoop, Turn, ask, dated
from funes.tools.runner import ToolRunner

log = logging.getLogger(__name__)
RETRY_AFTER_S = 5  # what a refused turn's Retry-After says: a short turn's time, so clients come back soon
STORED_POLL_S = (0.05, 0.1, 0.2, 0.4)  # waits for another process's turn to be readable after its key collided
CLAIM_POLL_S = 0.25  # how often a request waiting on another process's turn with its key looks for the stored turn


class TurnSlots:
    """At most `limit` turns at once in this process (None: no bound); one more is refused at once, never queued."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit) if limit else None

    def take(self) -> Callable[[], None]:
        """Take a slot now (Busy when none is free) and return what gives it back."""
        if self._free is None:
            return lambda: None
        if not self._free.acquire(blocking=False):
            raise Busy(f"{self.limit} turns (chats, proxied turns, MCP tool calls, routers for callers' tools) are in "
                       f"flight in this process, its limit (MAX_CONCURRENT_TURNS); try again in {RETRY_AFTER_S} s",
                       RETRY_AFTER_S)
        return self._free.release

    @contextmanager
    def hold(self) -> Iterator[None]:
        release = self.take()
        try:
            yield
        finally:
            release()


class KeyLocks:
    """One lock per Idempotency-Key in flight here: a concurrent request with the same key waits for the first."""

    def __init__(self):
        self._lock = threading.Lock()
        self._held: dict[str, list] = {}  # key -> [its lock, requests holding or waiting for it]

    @contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._lock:
            entry = self._held.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._lock:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._held[key]


class ChatService:
    """Wires the router, the LLM, the tools, memory and the logs into turns. Holds no per-turn state."""

    def __init__(self, *, router: Router | Callable[[], Router], llm, runner: ToolRunner, memory, db: Database,
                 conversations: ConversationStore, log: DecisionLog, metrics: Metrics, settings: dict[str, Any],
                 gate: TurnGate | None = None):
        # a callable gives the current router: the configured cards' one changes once they are enriched
        self._router = router if callable(router) else (lambda: router)
        self.gate = gate or TurnGate()  # turns in flight: background work on the same LLM yields to them
        self.llm, self.runner, self.memory = llm, runner, memory
        self.db, self.conversations, self.log, self.metrics = db, conversations, log, metrics
        self.settings = settings
        self.slots = TurnSlots(settings["MAX_CONCURRENT_TURNS"] or None)  # taken by the web layer, which owns threads
        self._keys = KeyLocks()
        self.claims = TurnClaims(db)  # renewed while its turn runs: a dead worker's is taken over, never waited out
        self._longest_s = settings["TURN_TIMEOUT"] + settings["LLM_TIMEOUT"]  # what a live claimant's turn may take
        self.loop = ToolLoop(llm, runner, log, metrics, settings)
        dates.today(settings["TIME_ZONE"])  # a misspelt zone fails at start, not on every turn

    @property
    def router(self) -> Router:
        return self._router()

    def chat(self, message: str, conversation_id: str | None, user_id: str | None,
             idempotency_key: str | None = None, emit: Callable[[str, dict], None] | None = None,
             client: str | None = None) -> dict[str, Any]:
        """Answer one user message; a retry with the same Idempotency-Key gets the stored turn back.

        Requests with one key wait for the first, in any process, and get its turn; the key is the caller's own
        (its user, else its conversation, else its `client` address). `emit(event, data)`, where given, hears the
        turn as it goes: the decision, each tool call, the text."""
        if not idempotency_key:
            with self.gate.turn():
                return self._turn(message, conversation_id, user_id, None, emit)
        key = _key_hash(user_id, conversation_id, client, idempotency_key)
        with self._keys.hold(key):
            if done := self.log.by_idempotency_key(key) or self._claim(key):
                return _replay(done, message)
            with self.claims.held(key):
                try:
                    with self.gate.turn():
                        return self._turn(message, conversation_id, user_id, key, emit)
                except IntegrityError:  # another process took over this claim as lapsed, and stored its turn first
                    done = self._stored(key)
                    if done is None:
                        raise
                    return _replay(done, message)

    def _claim(self, key: str) -> dict[str, Any] | None:
        """Claim the turn of `key` (None), or wait for the process that holds it and return the turn it stored.

        A turn that failed stores nothing under its key and gives the claim back: the waiter then runs its own."""
        # a live claimant's turn ends by then; a dead one's claim is taken over within the lease
        give_up = time.monotonic() + self._longest_s + self.claims.lease_s + 2 * CLAIM_POLL_S
        while not self.claims.take(key):
            time.sleep(CLAIM_POLL_S)
            if done := self.log.by_idempotency_key(key):
                return done
            if time.monotonic() > give_up:  # only when the clocks of the hosts disagree
                raise Conflict("another request with this Idempotency-Key is still being answered; try again later")
        if done := self.log.by_idempotency_key(key):  # stored, and its claim given back, just before this one
            self.claims.give_back(key)
        return done

    def _stored(self, key: str) -> dict[str, Any] | None:
        """The turn another process stored under `key`, waiting briefly until this one can read it."""
        for pause in (0.0, *STORED_POLL_S):
            time.sleep(pause)
            if done := self.log.by_idempotency_key(key):
                return done
        return None

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
            reply = self.loop.run(router, decision, history, turn) if uses_tools else \
                self._from_memory(decision, history, user_id, turn)
        except LLMUnavailable as e:  # nothing of the turn is kept but its decision: no history, no memory
            bad = isinstance(e, LLMBadReply)
            decision_id = self._record(**record, outcome="llm_bad_reply" if bad else "llm_unavailable", error=str(e))
            # the client learns which part failed; the server's address and error stay in the decision log
            name = getattr(self.llm, "name", "configured")
            what = "answered in a shape Funes cannot read" if bad else "is unavailable"
            raise (LLMBadReply if bad else LLMUnavailable)(
                f"the LLM ({name}) {what}; decision {decision_id} holds the details") from e
        except Exception as e:  # a bug or a database failure: still leave the decision for the inspector
            self._record(**record, outcome="error", error=f"{type(e).__name__}: {e}")
            raise
        with self.db.transaction() as conn:  # the decision row and both messages land together or not at all
            decision_id = self._record(**record, outcome=_outcome(turn), reply=reply, idempotency_key=key, conn=conn)
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

    def _from_memory(self, decision: Decision, history: list[dict], user_id: str, turn: Turn) -> str:
        """No tool fits: answer from the user's relevant memories, with no tools at all."""
        hits = self.memory.search(user_id, decision.message)
        turn.memories = [{"id": h.id, "text": h.text, "score": round(h.score, 4), "kind": h.kind} for h in hits]
        system = dated(self.settings["SYSTEM_PROMPT"], dates.today(self.settings["TIME_ZONE"]))
        if hits:
            system += "\n\n" + self.settings["MEMORY_PROMPT"] + "\n" + "\n".join(f"- {h.text}" for h in hits)
        messages = [{"role": "system", "content": system}, *history, {"role": "user", "content": decision.message}]
        reply = ask(self.llm, messages, None, turn).content.strip()
        if not reply:  # silence is no answer to store in the conversation and memory
            raise LLMBadReply("the model answered with no words")
        return reply

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


def _outcome(turn: Turn) -> str:
    """"ok", or "tool_error" when the turn's tools were called and every call failed (the reply is then the
    model's account of a failure, which the log should not show as a success)."""
    failed = turn.tool_calls and all(c.error is not None for c in turn.tool_calls)
    return "tool_error" if failed else "ok"


def _key_hash(user_id: str | None, conversation_id: str | None, client: str | None, key: str) -> str:
    """What a retried turn is found by: the caller's key within its user and conversation, hashed; an anonymous
    caller with no conversation yet is told apart by its address."""
    scope = [user_id, conversation_id] + ([f"client:{client}"] if user_id is None and conversation_id is None else [])
    return hashlib.sha256(json.dumps([*scope, key]).encode()).hexdigest()


def _replay(row: dict[str, Any], message: str) -> dict[str, Any]:
    """The stored turn's answer, as the first request got it."""
    if row["message"] != message:
        raise Conflict("this Idempotency-Key was used for a different message")
    return {"reply": row["reply"], "conversation_id": row["conversation_id"], "decision_id": row["id"],
            "tools_offered": row["tools_offered"], "tool_calls": row["tool_calls"],
            "memories_used": row["memories_used"], "usage": row["usage"], "replayed": True}


def _usage(turn: Turn) -> dict[str, int]:
    return {"llm_calls": turn.steps, "prompt_tokens": turn.prompt_tokens, "completion_tokens": turn.completion_tokens}
