"""Character n-grams: carry typos and words MiniLM does not know (Vietnamese, Hinglish)."""
from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from sklearn.feature_extraction.text import TfidfVectorizer

from funes.selection.index import group_max


class CharNgrams:
    """TF-IDF over character 3-5-grams within words, accents folded, fitted on a registry's texts."""

    def __init__(self, texts: list[str]):
        self._vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True,
                                           strip_accents="unicode", lowercase=True, dtype=np.float32)
        try:
            self._vectorizer.fit(texts)
        except ValueError:  # no texts, or none with a 3-gram (an empty registry): no lexical signal
            self._vectorizer = None

    def transform(self, texts: list[str]) -> csr_matrix:
        if self._vectorizer is None:
            return csr_matrix((len(texts), 1), dtype=np.float32)
        return self._vectorizer.transform(texts)


class LexicalIndex:
    """Best n-gram cosine between a message and each tool's card texts."""

    def __init__(self, ngrams: CharNgrams, texts: list[str], owner: np.ndarray, n_tools: int):
        self.owner, self.n_tools = owner, n_tools
        self._matrix = ngrams.transform(texts).T.tocsr() if texts else None
        if self._matrix is not None and self._matrix.shape[0] == 1 and not self._matrix.nnz:
            self._matrix = None

    def tool_scores(self, features: csr_matrix) -> np.ndarray:
        """Best cosine per tool (queries x tools), from the messages' n-gram features."""
        if self._matrix is None:
            return np.zeros((features.shape[0], self.n_tools), dtype=np.float32)
        return group_max((features @ self._matrix).toarray(), self.owner, self.n_tools, fill=0.0)
