"""The router: measures every signal for a message, then applies thresholds into a frozen Decision.

It decides; it never acts. `measure` does the costly part (embedding, search); `decide` only compares
numbers with settings, so calibration can replay thousands of messages under new thresholds.
"""
from __future__ import annotations

import copy
import time
from pathlib import Path
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import regex

from funes.errors import BadRequest
from funes.selection.decision import Candidate, Decision
from funes.selection.classifier import IntentClassifier
from funes.selection.index import VectorIndex, card_texts, group_max
from funes.selection.keywords import KeywordMatcher
from funes.selection.lexical import CharNgrams, LexicalIndex
from funes.selection.names import NameResolver
from funes.selection.ranking import rank_scores
from funes.selection.words import WordIndex
from funes.tools.registry import Registry

ROUTING_SETTINGS = ("TOOL_THRESHOLD", "CLASSIFIER_THRESHOLD", "CLASSIFIER_MULTI_THRESHOLD", "NONE_VETO", "TOOL_THRESHOLDS", "NONE_MARGIN", "KEYWORD_MIN_SCORE", "MULTI_GAP",
                    "MAX_TOOLS", "LEXICAL_WEIGHT", "NEGATIVE_WEIGHT", "CONTEXT_PENALTY", "HISTORY_TURNS",
                    "CLAUSE_MIN_WORDS", "NAME_FUZZY_CUTOFF", "USE_NO_TOOL_ANCHORS", "CANDIDATES_LOGGED",
                    "WORD_WEIGHT", "CLAUSE_ALIGN", "CLAUSE_PENALTY")
# Where a message asking for several things splits into parts worth scoring on their own.
_CLAUSE = regex.compile(r"(?:[,;]\s*|\s+)(?:and then|and also|and|also|then|plus|y|y también|và|rồi|aur|phir)\s+"
                        r"|[;?]\s+|,\s+(?=(?:can|could|what|how|which|also|then)\b)", regex.I)


@dataclass(frozen=True)
class Anchors:
    """Messages that need no tool, with their vectors: what a tool must beat."""

    texts: list[str]
    vectors: np.ndarray


@dataclass(frozen=True)
class Evidence:
    """Everything measured about one message before any threshold is applied.

    Matrices have one row per query (the message, its clauses, then the message with history) and
    one column per tool.
    """

    message: str
    history: tuple[str, ...]
    n_segments: int
    embedding: np.ndarray
    lexical: np.ndarray
    negative: np.ndarray
    none: np.ndarray          # per row: similarity to the closest message that needs no tool
    classifier: np.ndarray | None  # P(tool) per row, where the registry has a classifier
    no_tool: np.ndarray | None     # the classifier's P(no tool) per row
    named: dict[int, float]   # tools named in the message as something to run
    about_tool: bool          # the message asks how a named tool works, not to run it
    keyword_hits: dict[int, str]
    embed_ms: float
    search_ms: float
    words: np.ndarray | None = None  # BM25 per row (0-1) where there is no classifier: orders tools, never picks them


def parse_messages(messages: Any) -> tuple[str, list[str]]:
    """The message to route and the earlier user turns, validated."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list of {role, content}")
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in (
                "user", "assistant", "system", "tool"):
            raise BadRequest("each message needs a 'role' (user/assistant) and a string 'content'")
    if messages[-1]["role"] != "user" or not messages[-1]["content"].strip():
        raise BadRequest("the last message must be a non-empty user message")
    earlier = [m["content"] for m in messages[:-1] if m["role"] == "user" and m["content"].strip()]
    return messages[-1]["content"].strip(), earlier


class Router:
    """Hybrid selection over one registry: embeddings, character n-grams, keywords, names, history."""

    def __init__(self, registry: Registry, encoder, settings: dict[str, Any], anchors: Anchors | None):
        self.registry, self.tools, self.encoder = registry, list(registry), encoder
        texts = card_texts(registry)
        n = len(self.tools)
        vectors = encoder.encode_cards(texts.texts)
        self.index = VectorIndex(vectors, texts.owner, n, hnsw_min=settings["HNSW_MIN_TEXTS"],
                                 hnsw_m=settings["HNSW_M"], ef_search=settings["HNSW_EF_SEARCH"],
                                 search_k=settings["SEARCH_K"], top_k=settings["EMBED_TOP_K"])
        negatives = [(i, t) for i, tool in enumerate(self.tools) for t in tool.negatives]
        self._neg_owner = np.asarray([i for i, _ in negatives], dtype=np.int64)
        self._neg_vecs = encoder.encode_cards([t for _, t in negatives])
        self._anchors = anchors or Anchors([], np.zeros((0, encoder.dim), np.float32))
        examples = sum(len(t.examples) for t in self.tools)
        learns = bool(self._anchors.texts) and examples >= settings["CLASSIFIER_MIN_EXAMPLES"] * n > 0
        none_texts = (self._anchors.texts + [t for _, t in negatives]) if learns else []
        self.ngrams = CharNgrams(texts.texts + none_texts)
        self.lexical = LexicalIndex(self.ngrams, texts.texts, texts.owner, n)
        self.classifier = self._train(texts.texts, texts.owner, vectors, none_texts, settings) if learns else None
        # Bare cards (no classifier) rank better with shared rare words too; a classifier already weighs them.
        self.words = None if self.classifier else WordIndex(texts, n, settings["BM25_K1"], settings["BM25_B"])
        self.keywords = KeywordMatcher(registry)
        self.names = NameResolver(registry.names, settings["NAME_FUZZY_CUTOFF"])
        self._position = {}
        for i, tool in enumerate(self.tools):
            self._position.setdefault(tool.name, i)
        self._apply(settings)

    def _train(self, texts, owner, vectors, none_texts, settings) -> IntentClassifier:
        """The registry's classifier: card texts labelled by tool, anchors and negatives as none."""
        labels = np.r_[owner, np.full(len(none_texts), len(self.tools))]
        all_vectors = np.vstack([vectors, self._anchors.vectors, self._neg_vecs])
        cache = Path(settings["DATA_DIR"]) / "classifiers" if settings["VECTOR_CACHE"] else None
        return IntentClassifier.train(texts + none_texts, labels, all_vectors, self.ngrams.transform(texts + none_texts),
                                      len(self.tools), settings["CLASSIFIER_C"], cache, self.encoder.model_id)

    def _apply(self, settings: dict[str, Any]) -> None:
        self.settings = {k: settings[k] for k in ROUTING_SETTINGS}
        per_tool = self.settings["TOOL_THRESHOLDS"] or {}
        default = self.settings["CLASSIFIER_THRESHOLD" if self.classifier else "TOOL_THRESHOLD"]
        self.thresholds = np.asarray([per_tool.get(t.name, t.threshold if t.threshold is not None else default)
                                      for t in self.tools], dtype=np.float32)

    def tuned(self, overrides: dict[str, Any]) -> Router:
        """The same indexes under other settings (for calibration sweeps)."""
        other = copy.copy(self)
        other._apply({**self.settings, **overrides})
        return other

    def clauses(self, message: str) -> list[str]:
        """Parts of a message long enough to be a request of their own."""
        parts = [p.strip(" ,.;?!") for p in _CLAUSE.split(message) if p and p.strip(" ,.;?!")]
        parts = [p for p in parts if len(p.split()) >= self.settings["CLAUSE_MIN_WORDS"]]
        return parts if len(parts) > 1 else []

    def measure(self, messages: Any) -> Evidence:
        """Embed the message (with its clauses and history) and score every tool on every signal."""
        t0 = time.perf_counter()
        message, earlier = parse_messages(messages)
        turns = self.settings["HISTORY_TURNS"]
        history = tuple(earlier[-turns:]) if turns > 0 else ()
        segments = [message] + self.clauses(message)
        queries = segments + ([" ".join(history + (message,))] if history else [])
        vectors = self.encoder.encode_query(queries)
        t1 = time.perf_counter()
        emb = self.index.tool_scores(vectors)
        neg = np.zeros_like(emb)
        if len(self._neg_vecs):
            neg = group_max(vectors @ self._neg_vecs.T, self._neg_owner, len(self.tools), fill=0.0)
        none = np.full(len(queries), -1.0)
        if self.settings["USE_NO_TOOL_ANCHORS"] and self._anchors.texts:
            top = min(self.index.top_k, len(self._anchors.texts))
            none = -np.sort(-(vectors @ self._anchors.vectors.T), axis=1)[:, :top].mean(axis=1)
        features = self.ngrams.transform(queries)
        proba, no_tool = self.classifier.proba(vectors, features) if self.classifier else (None, None)
        named = {self._position[n]: q for n, q in self.names.mentions(message).items()}
        evidence = Evidence(message, history, len(segments), emb, self.lexical.tool_scores(features), neg,
                            none.astype(np.float32), proba, no_tool, named, self.names.asked_about(message),
                            self.keywords.match(message), 0.0, 0.0,
                            self.words.tool_scores(queries) if self.words else None)
        t2 = time.perf_counter()
        return _with_timings(evidence, (t1 - t0) * 1000, (t2 - t1) * 1000)

    def similarity(self, ev: Evidence) -> np.ndarray:
        """Embedding plus weighted lexical, minus how far a negative example is closer than the card."""
        s = self.settings
        return (ev.embedding + s["LEXICAL_WEIGHT"] * ev.lexical
                - s["NEGATIVE_WEIGHT"] * np.maximum(0.0, ev.negative - ev.embedding)).astype(np.float32)

    def combined(self, ev: Evidence) -> np.ndarray:
        """The score thresholds apply to: the classifier's probability where there is one, else similarity."""
        return ev.classifier if ev.classifier is not None else self.similarity(ev)

    def _row_picks(self, ev: Evidence, combined: np.ndarray, row: int, none_row: int) -> list[int]:
        """A row's eligible tools, best first: its best, and others within MULTI_GAP (similarity only)."""
        s = self.settings
        ok = combined[row] >= self.thresholds
        if ev.classifier is None:  # the classifier learnt "none" itself; similarity must beat the anchors
            ok &= ev.embedding[row] - ev.none[none_row] >= s["NONE_MARGIN"]
        if not ok.any():
            return []
        if ev.classifier is None:
            ok &= combined[row] >= float(combined[row][ok].max()) - s["MULTI_GAP"]
        return sorted(np.flatnonzero(ok).tolist(), key=lambda i: -combined[row][i])

    def _clause_pick(self, ev: Evidence, combined: np.ndarray, row: int) -> list[int]:
        """A clause of a multi-part message adds its best tool at the lower CLASSIFIER_MULTI_THRESHOLD."""
        if ev.classifier is None:
            return self._row_picks(ev, combined, row, row)
        best = int(np.argmax(combined[row]))
        return [best] if combined[row][best] >= self.settings["CLASSIFIER_MULTI_THRESHOLD"] else []

    def _vetoed(self, ev: Evidence) -> bool:
        """The classifier is sure the message itself needs no tool: no fallback may overrule it."""
        return ev.no_tool is not None and float(ev.no_tool[0]) >= self.settings["NONE_VETO"]

    def decide(self, ev: Evidence) -> Decision:
        """Apply the signals in order: named tool, message and clauses, history, keywords; else none."""
        t0 = time.perf_counter()
        combined = self.combined(ev)
        picks, decided_by, rows = self._choose(ev, combined)
        picks, rank = self._ranked(ev, combined, picks[: self.settings["MAX_TOOLS"]], decided_by, rows)
        ms = {"embed": ev.embed_ms, "search": ev.search_ms,
              "decide": (time.perf_counter() - t0) * 1000}
        ms["total"] = sum(ms.values())
        return self._decision(ev, combined, rank, picks, decided_by, rows, ms)

    def picks(self, ev: Evidence) -> list[str]:
        """Only the selected tool names (the calibration fast path)."""
        picks, _, _ = self._choose(ev, self.combined(ev))
        return [self.tools[i].name for i in picks[: self.settings["MAX_TOOLS"]]]

    def select(self, messages: Any) -> Decision:
        """Decide which tools (none, one or several) to hand to the LLM for the last user message."""
        return self.decide(self.measure(messages))

    def _choose(self, ev: Evidence, combined: np.ndarray) -> tuple[list[int], str, list[int]]:
        rows = list(range(ev.n_segments))
        if ev.about_tool:
            return [], "none", rows
        if ev.named:
            return sorted(ev.named, key=lambda i: -ev.named[i]), "name", rows
        picks = self._row_picks(ev, combined, 0, 0)
        for row in rows[1:]:
            picks += [i for i in self._clause_pick(ev, combined, row) if i not in picks]
        if picks:
            best = combined[rows].max(axis=0)
            return self._with_required(ev, sorted(picks, key=lambda i: -best[i])), "embedding", rows
        if self._vetoed(ev):
            return [], "none", rows
        if ev.history:
            ctx = ev.n_segments
            picks = self._row_picks(ev, combined - np.float32(self.settings["CONTEXT_PENALTY"]), ctx, 0)
            if picks:
                return picks, "embedding", rows + [ctx]
        similarity = self.similarity(ev)[0]
        hits = [i for i in ev.keyword_hits if similarity[i] >= self.settings["KEYWORD_MIN_SCORE"]]
        if hits:
            return self._with_required(ev, sorted(hits, key=lambda i: -similarity[i])[:1]), "keyword", rows
        return [], "none", rows

    def _ranked(self, ev: Evidence, combined, picks, decided_by, rows) -> tuple[list[int], np.ndarray]:
        """The candidates' order score; where words were measured, the selected tools (never others) in that order."""
        if ev.words is None:
            return picks, combined[rows].max(axis=0)
        rank = rank_scores(combined, ev.words, rows, ev.n_segments, self.settings)
        # A tool placed after the tool it needs keeps that place (see _with_required).
        if decided_by == "embedding" and not any(self.tools[i].requires for i in picks):
            picks = sorted(picks, key=lambda i: -rank[i])
        return picks, rank

    def _with_required(self, ev: Evidence, picks: list[int]) -> list[int]:
        """On a first turn, a tool that needs another's output (build_itinerary <- search_pois) brings it,
        placed before it: small models call the first tool offered first."""
        if ev.history:
            return picks
        out: list[int] = []
        for i in picks:
            out += [self._position[r] for r in self.tools[i].requires
                    if r in self._position and self._position[r] not in out and self._position[r] not in picks]
            out.append(i)
        return out

    def _decision(self, ev: Evidence, combined, rank, picks, decided_by, rows, timings) -> Decision:
        """Package the outcome with every candidate's per-signal scores, candidates in `rank` order."""
        score = combined[rows].max(axis=0)
        top = np.argsort(-rank)[: self.settings["CANDIDATES_LOGGED"]].tolist()
        order = sorted(set(top) | set(picks), key=lambda i: -rank[i])
        candidates = tuple(Candidate(
            name=self.tools[i].name, id=self.tools[i].id, score=round(float(score[i]), 4),
            threshold=round(float(self.thresholds[i]), 4), selected=i in picks,
            signals={"embedding": round(float(ev.embedding[rows, i].max()), 4),
                     "lexical": round(float(ev.lexical[rows, i].max()), 4),
                     "negative": round(float(ev.negative[rows, i].max()), 4),
                     "classifier": round(float(ev.classifier[rows, i].max()), 4) if ev.classifier is not None
                     else None,
                     "words": round(float(ev.words[rows, i].max()), 4) if ev.words is not None else None,
                     "keyword": 1.0 if i in ev.keyword_hits else 0.0,
                     "name": round(ev.named.get(i, 0.0), 4)}) for i in order)
        selected = tuple(self.tools[i].name for i in picks)
        reason = (f"{', '.join(selected)} selected by {decided_by}" if selected
                  else "the message asks how a tool works, not to run it" if ev.about_tool
                  else "no tool scored above its threshold and the no-tool anchors")
        used_history = ev.history if rows[-1] == ev.n_segments else ()
        return Decision(message=ev.message, selected=selected, decided_by=decided_by, reason=reason,
                        candidates=candidates, none_score=round(float(ev.none[0]), 4),
                        thresholds=dict(self.settings), timings_ms={k: round(v, 3) for k, v in timings.items()},
                        history_used=used_history,
                        no_tool_probability=round(float(ev.no_tool[0]), 4) if ev.no_tool is not None else None,
                        selected_ids=tuple(self.tools[i].id for i in picks if self.tools[i].id))


def _with_timings(ev: Evidence, embed_ms: float, search_ms: float) -> Evidence:
    return replace(ev, embed_ms=embed_ms, search_ms=search_ms)
