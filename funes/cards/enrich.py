"""Enrichment: a model writes example requests, negatives and keywords for a card from the card alone.

`Enricher.raw` asks the LLM once per card (constrained JSON, fixed seed) and tidies what it got;
the result depends only on the card, the model and the prompt, so `EnrichmentCache` keeps it, and
`claim` + `write` make each card one job of the enrichments table, done once across workers and hosts.
Filtering against the other cards of a registry happens later, in `funes.cards.filters`.
"""
from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterable

import regex
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from funes.cards import prompt
from funes.cards.cache import EnrichmentCache
from funes.cards.variants import misspell
from funes.errors import FunesError, LLMUnavailable
from funes.llm.gate import Cancel
from funes.store.enrichment import worker_id
from funes.tools.registry import Tool

log = logging.getLogger(__name__)
TYPO_VARIANTS = 4  # misspelt copies of the plainer requests, made by code
LLM_PAUSE_S = 60  # after the LLM failed to answer, before any worker asks it again for that card
WAIT_S = 1.0  # how often `run` looks at a card another worker is enriching
# `run` asks again for a card the LLM did not answer (a read timeout on a busy machine, a refused connection, a
# garbled reply) this many times in all, waiting 1 s, then 2 s..., before it skips the card and goes on
LLM_TRIES = 3
LLM_BACKOFF_S = 1.0
_SPACE = regex.compile(r"\s+")


class EnrichmentError(FunesError):
    """The model's answer for a card could not be used."""

    attempts = 0       # failed answers for the card so far, once recorded
    retry_s = 0.0      # seconds until it is tried again


def normalized(text: str) -> str:
    """Lower case, single spaces, no end punctuation: what counts as the same text twice."""
    return _SPACE.sub(" ", text).strip().strip(" .!?¿¡").casefold()


class Enricher:
    """Writes texts for cards with an LLM that has `complete_json` (embedded, ollama, openai), sampled as the
    cache says (its seed and temperature are part of its keys), one claimed card at a time."""

    def __init__(self, llm, cache: EnrichmentCache, *, max_tokens: int = 700, retry_s: float = 60.0,
                 retry_max_s: float = 3600.0, lease_s: float = 600.0):
        self.llm, self.cache = llm, cache
        self.options = {"seed": cache.seed, "temperature": cache.temperature, "top_p": 0.95, "max_tokens": max_tokens}
        self.retry_s, self.retry_max_s, self.lease_s = retry_s, retry_max_s, lease_s
        self.worker = worker_id()

    def raw(self, tool: Tool, cancel: Cancel | None = None) -> dict:
        """The model's texts for `tool`, tidied (not stored); EnrichmentError when they cannot be used."""
        started = time.perf_counter()
        cancelling = {"cancel": cancel} if cancel is not None else {}
        answer = self.llm.complete_json(prompt.messages(tool), prompt.schema(), prompt.grammar(), **cancelling,
                                        **self.options)
        texts = tidy(parse(answer, tool.name), tool)
        texts["seconds"] = round(time.perf_counter() - started, 1)
        return texts

    def claim(self, tool: Tool, due_only: bool = True) -> bool:
        """Take the card for this worker (its row made where missing); False when another worker has it, it is
        done, or (with `due_only`) its retry time has not come."""
        self.cache.enqueue([tool])
        return self.cache.store.claim(self.cache.key(tool), self.worker, self.lease_s, due_only)

    def write(self, tool: Tool, cancel: Cancel | None = None) -> dict:
        """Enrich a card claimed by `claim` and store the outcome: texts when done; a failed answer is recorded
        with its retry time and raised (EnrichmentError with `attempts`, `retry_s`); a pause, a cancel or any
        other error gives the card back uncounted and is raised."""
        key, store = self.cache.key(tool), self.cache.store
        try:
            texts = self.raw(tool, cancel)
        except EnrichmentError as e:
            e.attempts, e.retry_s = store.fail(key, self.worker, str(e), self.retry_s, self.retry_max_s)
            raise
        except LLMUnavailable as e:
            store.release(key, self.worker, f"paused: the LLM is unavailable: {e}", LLM_PAUSE_S)
            raise
        except BaseException:
            store.release(key, self.worker)
            raise
        self.cache.done(tool, texts)
        return texts

    def run(self, tools: Iterable[Tool], progress: Callable[[Tool, dict | Exception, bool], None] = lambda *a: None,
            ) -> dict[str, dict]:
        """Raw texts for every tool (stored at once); a card the model fails on goes to `progress` and is skipped.
        A failed card is tried again now (its backoff is for the background), an unanswered request a few times;
        a card another worker is enriching is waited for, one a killed process was enriching is taken over."""
        # progress(tool, texts or the error, new): new is False for a stored result
        if n := self.cache.store.requeue_orphans():
            log.info("requeued %d card(s) a stopped process was enriching", n)
        out = {}
        for tool in tools:
            result, new = self._one(tool)
            if not isinstance(result, Exception):
                out[tool.key] = result
            progress(tool, result, new)
        return out

    def _one(self, tool: Tool) -> tuple[dict | Exception, bool]:
        retrying = Retrying(stop=stop_after_attempt(LLM_TRIES), wait=wait_exponential(LLM_BACKOFF_S),
                            retry=retry_if_exception_type(LLMUnavailable), before_sleep=_retrying(tool), reraise=True)
        try:
            return retrying(self._once, tool)
        except EnrichmentError as e:
            return e, True
        except LLMUnavailable as e:  # its message names the server, not the card
            return type(e)(f"{tool.name}: no answer in {LLM_TRIES} tries: {e}"), True

    def _once(self, tool: Tool) -> tuple[dict, bool]:
        """The card's texts and whether they are new: stored, written here, or waited for while another worker
        writes them."""
        while True:
            texts = self.cache.get(tool)
            if texts is not None:
                return texts, False
            if self.claim(tool, due_only=False):
                return self.write(tool), True
            job = self.cache.jobs([tool]).get(self.cache.key(tool))
            if job is not None and job.state == "failed" and job.claimed_by is None and job.attempts:
                continue  # given back between the two looks: claim it
            time.sleep(WAIT_S)  # another worker is writing it


def _retrying(tool: Tool) -> Callable[[RetryCallState], None]:
    def say(state: RetryCallState) -> None:
        log.warning("enrichment of %s: the LLM did not answer (try %d of %d), asking again in %.0f s: %s", tool.name,
                    state.attempt_number, LLM_TRIES, state.next_action.sleep, state.outcome.exception())
    return say


def parse(answer: str, name: str) -> dict[str, list[str]]:
    """Each kind's usable strings from the model's JSON; EnrichmentError naming the card when there are none."""
    # servers that ignore the schema happen: anything off-shape is dropped, not trusted
    try:
        data = json.loads(answer)
    except json.JSONDecodeError as e:
        raise EnrichmentError(f"{name}: the model's answer is not the expected JSON: {e}") from None
    if not isinstance(data, dict):
        raise EnrichmentError(f"{name}: the model's answer is not the expected JSON: not an object")
    texts = {kind: [t.strip() for t in data.get(kind) if isinstance(t, str) and 2 <= len(t.strip()) <= prompt.MAX_CHARS]
             if isinstance(data.get(kind), list) else [] for kind, _, _ in prompt.KINDS}
    if not any(texts[kind] for kind in prompt.EXAMPLE_KINDS):
        raise EnrichmentError(f"{name}: the model's answer holds no example request")
    return texts


def tidy(data: dict, tool: Tool) -> dict:
    """Examples, negatives and keywords: deduplicated, worked-example echoes dropped, misspelt variants added."""
    seen = {normalized(t) for t in prompt.shot_texts()}
    def fresh(texts: Iterable[str]) -> list[str]:
        kept = []
        for text in (_SPACE.sub(" ", t).strip() for t in texts):
            if text and normalized(text) not in seen:
                seen.add(normalized(text))
                kept.append(text)
        return kept
    examples = fresh(t for kind in prompt.EXAMPLE_KINDS for t in data[kind])
    negatives = fresh(data["no_tool"])
    rng = random.Random(prompt.card_hash(tool))
    english = [t for t in examples if t in data["direct"] + data["indirect"] + data["terse"]]
    typos = fresh(misspell(t, rng) for t in english[:: max(1, len(english) // TYPO_VARIANTS)][:TYPO_VARIANTS])
    keywords = sorted({normalized(k) for k in data["keywords"] if regex.fullmatch(r"[\p{L}\p{N}' -]{3,40}", k)})
    return {"examples": examples + typos, "negatives": negatives, "keywords": keywords}
