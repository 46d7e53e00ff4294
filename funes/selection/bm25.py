"""Word-level BM25 over card texts: rare words a message shares with one card (a unit, a library, a noun)."""
from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from sklearn.feature_extraction.text import CountVectorizer, strip_accents_unicode

from funes.selection.index import CardTexts, group_max
from funes.tools.names import humanize


def plain_words(text: str) -> str:
    """Lowercase, accents folded, names split into words: 'get_weather' -> 'get weather'."""
    return strip_accents_unicode(humanize(text))


class WordIndex:
    """Okapi BM25 of a message's words against every card text; a tool scores its best text."""

    def __init__(self, texts: CardTexts, n_tools: int, k1: float, b: float):
        self.owner, self.n_tools = texts.owner, n_tools
        self._vectorizer = CountVectorizer(preprocessor=plain_words, dtype=np.float32)
        try:
            counts = self._vectorizer.fit_transform(texts.texts).tocsr()
        except ValueError:  # no texts, or no word of two letters in them: no word signal
            self._vectorizer, self._weights = None, None
            return
        # by word, each word's (text, weight) pairs: a message's few words are summed without a sparse product,
        # whose checks cost more than the sum
        self._weights = _bm25_weights(counts, k1, b).tocsc()
        self._analyze, self._vocabulary = self._vectorizer.build_analyzer(), self._vectorizer.vocabulary_

    def tool_scores(self, queries: list[str]) -> np.ndarray:
        """Best BM25 per tool (queries x tools), divided by each query's best tool so it lies in 0..1."""
        if self._vectorizer is None:
            return np.zeros((len(queries), self.n_tools), dtype=np.float32)
        w = self._weights
        per_text = np.zeros((len(queries), w.shape[0]), dtype=np.float32)
        for row, query in zip(per_text, queries):
            # a word said twice is still one thing asked for: each counts once
            for j in {self._vocabulary[word] for word in self._analyze(query) if word in self._vocabulary}:
                row[w.indices[w.indptr[j]:w.indptr[j + 1]]] += w.data[w.indptr[j]:w.indptr[j + 1]]
        raw = group_max(per_text, self.owner, self.n_tools, fill=0.0)
        top = raw.max(axis=1, keepdims=True)
        return np.divide(raw, top, out=np.zeros_like(raw), where=top > 0)


def _bm25_weights(counts: csr_matrix, k1: float, b: float) -> csr_matrix:
    """Each (text, word) count turned into its BM25 term weight: saturated, length-normalised, times idf."""
    n_texts = counts.shape[0]
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    idf = np.log1p((n_texts - df + 0.5) / (df + 0.5))
    norm = k1 * (1.0 - b + b * lengths / max(float(lengths.mean()), 1e-9))
    row_of = np.repeat(np.arange(n_texts), np.diff(counts.indptr))
    weights = counts.copy()
    weights.data = (counts.data * (k1 + 1.0) / (counts.data + norm[row_of]) * idf[counts.indices]).astype(np.float32)
    return weights
