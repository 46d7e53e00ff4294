"""The signals of one registry, built once: FAISS, n-grams, classifier, keyword patterns, names.

`Scorers.measure` does the costly part of routing (embedding, search) and returns frozen `Evidence`;
nothing here applies a threshold.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import regex
from scipy.sparse import csr_matrix

from funes.messages import user_turns
from funes.selection.classifier import IntentClassifier
from funes.selection.closing import is_closing
from funes.selection.gate import Gate, features
from funes.selection.index import CardTexts, VectorIndex, card_texts, group_max
from funes.selection.keyword_patterns import KeywordMatcher
from funes.selection.mentions import asked_about, mentions
from funes.selection.multilingual import E5_MAX_CHARS, E5_MAX_TOOLS, Multilingual, looks_non_english, reordered
from funes.selection.ngrams import CharNgrams, LexicalIndex
from funes.tools.names import NameResolver
from funes.tools.registry import Registry

# Where a message asking for several things splits into parts worth scoring on their own.
_CLAUSE = regex.compile(r"(?:[,;]\s*|\s+)(?:and then|and also|and|also|then|plus|y|y también|và|rồi|aur|phir)\s+"
                        r"|[;?]\s+|,\s+(?=(?:can|could|what|how|which|also|then)\b)", regex.I)
# The signals of a message's words need no vector: a worker computes them while the encoder's session runs,
# which releases the GIL (the second core was idle meanwhile). One task a message, so a few workers suffice.
_TEXT_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="funes-text")
# e5 builds its view of a registry and embeds messages on a thread of its own, in order: a registry's view is
# built before any message to it is embedded, and a slow e5 call never holds up the words' workers.
_E5_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="funes-e5")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Anchors:
    """Messages that need no tool, with their vectors: what a tool must beat."""

    texts: list[str]
    vectors: np.ndarray


class _Words(NamedTuple):
    """The signals read from a message's words alone."""

    features: csr_matrix
    lexical: np.ndarray
    keyword_hits: dict[int, str]
    named: dict[int, float]
    about_tool: bool
    closing: bool


@dataclass(frozen=True, kw_only=True)
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
    card: np.ndarray | None = None   # cosine to each card's own words per row, where its examples were generated
    multilingual_ms: float | None = None  # time of e5, where it read a non-English message
    closing: bool = False  # the message only thanks, praises or says goodbye
    need: float | None = None  # the learned gate's P(the message needs one of these tools), for bare cards


def similarity_of(embedding: np.ndarray, lexical: np.ndarray, negative: np.ndarray, s: dict[str, Any]) -> np.ndarray:
    """Embedding plus weighted lexical, minus how far a negative example is closer than the card."""
    return (embedding + s["LEXICAL_WEIGHT"] * lexical
            - s["NEGATIVE_WEIGHT"] * np.maximum(0.0, negative - embedding)).astype(np.float32)


def clauses(message: str, min_words: int) -> list[str]:
    """Parts of a message long enough to be a request of their own."""
    parts = [p.strip(" ,.;?!") for p in _CLAUSE.split(message) if p and p.strip(" ,.;?!")]
    parts = [p for p in parts if len(p.split()) >= min_words]
    return parts if len(parts) > 1 else []


def _e5_view(registry: Registry, multilingual: Multilingual, settings: dict[str, Any]) -> Scorers:
    """A registry's signals in e5's space: its cards and the no-tool anchors embedded by e5, e5's gate."""
    e5, texts = multilingual.encoder, list(multilingual.anchor_texts)
    return Scorers(registry, e5, settings, Anchors(texts, e5.encode_cards(texts)), gate=multilingual.gate)


def trains_classifier(registry: Registry, settings: dict[str, Any]) -> bool:
    """Whether a registry's cards carry enough examples for a classifier (it then trains one)."""
    n = len(registry)
    return sum(len(t.all_examples) for t in registry) >= settings["CLASSIFIER_MIN_EXAMPLES"] * n > 0


def _cache_dir(settings: dict[str, Any]) -> Path | None:
    return Path(settings["DATA_DIR"]) / "classifiers" if settings["VECTOR_CACHE"] else None


def _card_matrix(vectors: np.ndarray, texts: CardTexts, n_tools: int) -> np.ndarray:
    """Head vectors folded into one column per tool, so a query's product is its mean cosine to the card's own words."""
    owner = texts.owner[texts.head]
    fold = np.zeros((len(owner), n_tools), dtype=np.float32)
    fold[np.arange(len(owner)), owner] = 1.0
    fold /= np.maximum(fold.sum(axis=0, keepdims=True), 1.0)
    return (vectors[texts.head].T @ fold).astype(np.float32)


class Scorers:
    """Every signal over one registry: built once, then `measure` per message."""

    def __init__(self, registry: Registry, encoder, settings: dict[str, Any], anchors: Anchors | None,
                 multilingual: Multilingual | None = None, foreign: list[str] = (), gate: Gate | None = None):
        self.tools, self.encoder = list(registry), encoder
        texts = card_texts(registry)
        n = len(self.tools)
        vectors = encoder.encode_cards(texts.texts)
        self.index = VectorIndex(vectors, texts.owner, n, hnsw_min=settings["HNSW_MIN_TEXTS"],
                                 hnsw_m=settings["HNSW_M"], ef_search=settings["HNSW_EF_SEARCH"],
                                 search_k=settings["SEARCH_K"], top_k=settings["EMBED_TOP_K"])
        negatives = [(i, t) for i, tool in enumerate(self.tools) for t in tool.all_negatives]
        self._neg_owner = np.asarray([i for i, _ in negatives], dtype=np.int64)
        self._neg_vecs = encoder.encode_cards([t for _, t in negatives])
        self._anchors = anchors or Anchors([], np.zeros((0, encoder.dim), np.float32))
        learns = bool(self._anchors.texts) and trains_classifier(registry, settings)
        # foreign: texts of another group's cards routed beside these (funes.selection.mixed), learnt as "none"
        self._foreign = list(foreign) if learns else []
        self._foreign_vecs = encoder.encode_cards(self._foreign)
        none_texts = (self._anchors.texts + [t for _, t in negatives] + self._foreign) if learns else []
        self.ngrams = CharNgrams(texts.texts + none_texts)
        self.lexical = LexicalIndex(self.ngrams.fitted[:len(texts.texts)], texts.owner, n)
        self.classifier = self._train(texts.texts, texts.owner, vectors, none_texts, settings) if learns else None
        generated = any(t.generated for t in self.tools)
        self.gate = gate if self.classifier is None and self.tools else None  # a classifier learnt "none" itself
        # generated texts include a few non-English requests; e5 carries them to other wordings and languages
        self.multilingual = multilingual.encoder if multilingual and self.classifier and generated else None
        self.second = self._train_second(texts.texts + none_texts, texts.owner, settings) if self.multilingual else None
        self._card = _card_matrix(vectors, texts, n) if generated else None
        # over bare cards the same signals in e5's space read a non-English message beside the encoder's; built in
        # the background (e5 embeds a card text in 5-20 ms), so that no registry waits for it, only such a message
        self._e5 = (_E5_POOL.submit(_e5_view, registry, multilingual, settings)
                    if self.gate and multilingual and multilingual.gate and n <= E5_MAX_TOOLS else None)
        self._e5_encode = multilingual.encoder.encode if self._e5 else None
        self._anchor_best: dict[tuple, np.ndarray] = {}
        self.keywords = KeywordMatcher(registry, settings["KEYWORD_BUDGET_S"])
        self.names = NameResolver(registry.names, settings["NAME_FUZZY_CUTOFF"])
        self.position: dict[str, int] = {}
        for i, tool in enumerate(self.tools):
            self.position.setdefault(tool.name, i)

    def _signals(self, vectors: np.ndarray, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Embedding, lexical and negative scores (texts x tools) of embedded texts."""
        emb, neg = self._vector_signals(vectors)
        return emb, self.lexical.tool_scores(self.ngrams.transform(texts)), neg

    def _vector_signals(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Embedding and negative scores (texts x tools)."""
        emb = self.index.tool_scores(vectors)
        neg = np.zeros_like(emb)
        if len(self._neg_vecs):
            neg = group_max(vectors @ self._neg_vecs.T, self._neg_owner, len(self.tools), fill=0.0)
        return emb, neg

    def _words(self, message: str, queries: list[str]) -> _Words:
        """Everything measured on the message's words: n-grams, keyword patterns, names, closings."""
        features = self.ngrams.transform(queries)
        return _Words(features, self.lexical.tool_scores(features), self.keywords.match(message),
                      {self.position[n]: q for n, q in mentions(self.names, message).items()},
                      asked_about(self.names, message), is_closing(message))

    @cached_property
    def anchor_signals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The no-tool anchors scored against these cards as if they were messages (None: no anchors or tools)."""
        if not self._anchors.texts or not self.tools:
            return None
        return self._signals(self._anchors.vectors, self._anchors.texts)

    def anchor_best(self, settings: dict[str, Any]) -> np.ndarray:
        """The no-tool anchors' best similarity over these cards, sorted (under these weights)."""
        key = (settings["LEXICAL_WEIGHT"], settings["NEGATIVE_WEIGHT"])
        if key not in self._anchor_best:
            signals = self.anchor_signals
            self._anchor_best[key] = (np.sort(similarity_of(*signals, settings).max(axis=1)) if signals is not None
                                      else np.zeros(0, np.float32))
        return self._anchor_best[key]

    def _need(self, vector: np.ndarray, emb: np.ndarray, lexical: np.ndarray, neg: np.ndarray, none: float,
              settings: dict[str, Any]) -> float | None:
        """The gate's P(the message needs one of these tools), where there is a gate."""
        if self.gate is None:
            return None
        sim = similarity_of(emb, lexical, neg, settings)
        return self.gate.proba(vector, features(sim, emb, lexical, none, self.anchor_best(settings)))

    def _train(self, texts, owner, vectors, none_texts, settings) -> IntentClassifier:
        """The registry's classifier: card texts labelled by tool, anchors and negatives as none."""
        labels = np.r_[owner, np.full(len(none_texts), len(self.tools))]
        all_vectors = np.vstack([vectors, self._anchors.vectors, self._neg_vecs, self._foreign_vecs])
        all_texts = texts + none_texts
        return IntentClassifier.train(all_texts, labels, all_vectors, self.ngrams.fitted,
                                      len(self.tools), settings["CLASSIFIER_C"], _cache_dir(settings),
                                      self.encoder.model_id, settings["CLASSIFIER_NONE_SHARE"])

    def _train_second(self, all_texts: list[str], owner: np.ndarray, settings) -> IntentClassifier:
        """The same classifier over e5 vectors alone (no n-grams): for messages that do not look English."""
        labels = np.r_[owner, np.full(len(all_texts) - len(owner), len(self.tools))]
        return IntentClassifier.train(all_texts, labels, self.multilingual.encode_cards(all_texts),
                                      csr_matrix((len(all_texts), 0), dtype=np.float32), len(self.tools),
                                      settings["CLASSIFIER_C"], _cache_dir(settings), self.multilingual.model_id,
                                      settings["CLASSIFIER_NONE_SHARE"])

    def e5_view(self) -> Scorers | None:
        """These cards' signals in e5's space, once built (None: this registry has none)."""
        return self._e5.result() if self._e5 else None

    def _e5_started(self, message: str) -> Future | None:
        """e5's vector of a non-English message over bare cards, started on its thread (None: not needed)."""
        if self._e5 is None or not looks_non_english(message):
            return None
        return _E5_POOL.submit(self._e5_encode, [message[:E5_MAX_CHARS]])

    def _e5_read(self, e5: Future, emb: np.ndarray, lexical: np.ndarray, settings: dict[str, Any]
                 ) -> tuple[float | None, float | None]:
        """e5's gate P for the message, and the cards reordered by e5's cosines too (in place); the ms it waited.

        The encoder knows English: for a non-English message e5's gate decides better than the encoder's, alone
        or averaged with it (docs/results.md)."""
        t0 = time.perf_counter()
        try:
            view, vector = self._e5.result(), e5.result()
        except Exception as e:  # e5 costs this message its second reading, not its route
            log.warning("e5 did not read a message (%s: %s): the encoder's gate decides", type(e).__name__, e)
            return None, None
        emb5, neg5 = view._vector_signals(vector)
        need = view._need(vector[0], emb5[0], lexical, neg5[0], float(view._none(vector)[0]), settings)
        emb[0] = reordered(emb[0], emb5[0])
        return (time.perf_counter() - t0) * 1000, need

    def _none(self, vectors: np.ndarray) -> np.ndarray:
        """Per query, its mean similarity to the closest no-tool anchors (-1 without them)."""
        if not self._anchors.texts:
            return np.full(len(vectors), -1.0)
        top = min(self.index.top_k, len(self._anchors.texts))
        return -np.sort(-(vectors @ self._anchors.vectors.T), axis=1)[:, :top].mean(axis=1)

    def _second_opinion(self, message: str, proba: np.ndarray, no_tool: np.ndarray) -> float | None:
        """Average the e5 classifier into the message's row where it does not look English; its ms, or None."""
        if self.second is None or not looks_non_english(message):
            return None
        t0 = time.perf_counter()
        tools, none = self.second.proba(self.multilingual.encode([message]), csr_matrix((1, 0), dtype=np.float32))
        proba[0] = (proba[0] + tools[0]) / 2
        no_tool[0] = (no_tool[0] + none[0]) / 2
        return (time.perf_counter() - t0) * 1000

    @staticmethod
    def queries(messages: Any, settings: dict[str, Any]) -> tuple[str, tuple[str, ...], list[str], list[str]]:
        """The message, the earlier turns read with it, its parts, and every text to embed (parts, then history)."""
        message, earlier = user_turns(messages)
        turns = settings["HISTORY_TURNS"]
        history = tuple(earlier[-turns:]) if turns > 0 else ()
        segments = [message] + clauses(message, settings["CLAUSE_MIN_WORDS"])
        return message, history, segments, segments + ([" ".join(history + (message,))] if history else [])

    def measure(self, messages: Any, settings: dict[str, Any]) -> Evidence:
        """Embed the message (with its clauses and history) and score every tool on every signal; the words'
        signals are read on the other core while the model runs, or here on a cache hit."""
        t0 = time.perf_counter()
        message, history, segments, queries = self.queries(messages, settings)
        e5 = self._e5_started(message)
        pending = []  # the words' signals, computed by a worker while the model runs (if it runs: not on a cache hit)
        vectors = self.encoder.encode_query(
            queries, lambda: pending.append(_TEXT_POOL.submit(self._words, message, queries)))
        t1 = time.perf_counter()
        words = pending[0].result() if pending else self._words(message, queries)
        emb, neg = self._vector_signals(vectors)
        none = self._none(vectors)
        proba, no_tool = self.classifier.proba(vectors, words.features) if self.classifier else (None, None)
        second_ms = self._second_opinion(message, proba, no_tool) if proba is not None else None
        need = None
        if e5 is not None:
            second_ms, need = self._e5_read(e5, emb, words.lexical[0], settings)
        if need is None:
            need = self._need(vectors[0], emb[0], words.lexical[0], neg[0], float(none[0]), settings)
        card = vectors @ self._card if self._card is not None else None
        t2 = time.perf_counter()
        return Evidence(message=message, history=history, n_segments=len(segments), embedding=emb,
                        lexical=words.lexical, negative=neg, none=none.astype(np.float32), classifier=proba,
                        no_tool=no_tool, named=words.named, about_tool=words.about_tool,
                        keyword_hits=words.keyword_hits, embed_ms=(t1 - t0) * 1000,
                        search_ms=(t2 - t1) * 1000 - (second_ms or 0.0),
                        card=card, multilingual_ms=second_ms,
                        closing=words.closing, need=need)
