"""Character n-gram similarity: carries typos and words MiniLM does not know (Vietnamese, Hinglish)."""
from __future__ import annotations

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from funes.selection.index import group_max


class LexicalIndex:
    """TF-IDF over character n-grams of the card texts, accents folded."""

    def __init__(self, texts: list[str], owner: np.ndarray, n_tools: int):
        self.owner, self.n_tools = owner, n_tools
        self._vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 4), sublinear_tf=True,
                                           strip_accents="unicode", lowercase=True, dtype=np.float32)
        self._matrix = self._vectorizer.fit_transform(texts or [""]).T.tocsr() if texts else None

    def tool_scores(self, queries: list[str]) -> np.ndarray:
        """Best cosine per tool (queries x tools)."""
        if self._matrix is None:
            return np.zeros((len(queries), self.n_tools), dtype=np.float32)
        sims = (self._vectorizer.transform(queries) @ self._matrix).toarray()
        return group_max(sims, self.owner, self.n_tools, fill=0.0)
