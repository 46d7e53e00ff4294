"""Character n-grams: carry typos and words MiniLM does not know (Vietnamese, Hinglish)."""
from __future__ import annotations

from collections import Counter

import numpy as np
from scipy.sparse import csr_matrix
from sklearn.feature_extraction.text import TfidfVectorizer

from funes.selection.index import group_max


class CharNgrams:
    """TF-IDF over character 3-5-grams within words, accents folded, fitted on a registry's texts."""

    def __init__(self, texts: list[str]):
        self._vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True,
                                           strip_accents="unicode", lowercase=True, dtype=np.float32)
        try:  # the fitted texts' own rows, scored and learnt from: reading 30,000 texts again took seconds
            self.fitted = self._vectorizer.fit_transform(texts).astype(np.float32).tocsr()
        except ValueError:  # no texts, or none with a 3-gram (an empty registry): no lexical signal
            self._vectorizer = None
            self.fitted = self.transform(texts)
        else:  # transform() by hand: sklearn's input checks cost more than the counting for a message or two
            self._analyze = self._vectorizer.build_analyzer()
            self._vocabulary = self._vectorizer.vocabulary_
            self._idf = self._vectorizer.idf_.astype(np.float32)

    def transform(self, texts: list[str]) -> csr_matrix:
        """TfidfVectorizer.transform: sublinear counts of the known n-grams, times idf, L2-normalised per row."""
        if self._vectorizer is None:
            return csr_matrix((len(texts), 1), dtype=np.float32)
        indptr, indices, counts = [0], [], []
        for text in texts:
            row = Counter(j for g in self._analyze(text) if (j := self._vocabulary.get(g)) is not None)
            indices += row.keys()
            counts += row.values()
            indptr.append(len(indices))
        indices = np.asarray(indices, dtype=np.int32)
        data = (1.0 + np.log(np.asarray(counts, dtype=np.float32))) * self._idf[indices]
        for a, b in zip(indptr, indptr[1:]):
            if (norm := np.linalg.norm(data[a:b])) > 0:
                data[a:b] /= norm
        return csr_matrix((data, indices, indptr), shape=(len(texts), len(self._idf)), dtype=np.float32)


class LexicalIndex:
    """Best n-gram cosine between a message and each tool's card texts."""

    def __init__(self, rows: csr_matrix, owner: np.ndarray, n_tools: int):
        """`rows`: the card texts' n-gram features (CharNgrams.fitted, or transform)."""
        self.owner, self.n_tools = owner, n_tools
        self._matrix = rows.T.tocsr() if rows.shape[0] else None  # n-gram -> the texts that have it
        if self._matrix is not None and self._matrix.shape[0] == 1 and not self._matrix.nnz:
            self._matrix = None
        # how many texts have each n-gram: read per message, so counted once here (the vocabulary is ~20k long)
        self._spans = np.diff(self._matrix.indptr) if self._matrix is not None else None

    def tool_scores(self, features: csr_matrix) -> np.ndarray:
        """Best cosine per tool (queries x tools), from the messages' n-gram features."""
        if self._matrix is None:
            return np.zeros((features.shape[0], self.n_tools), dtype=np.float32)
        m, per_text = self._matrix, np.zeros((features.shape[0], self._matrix.shape[1]), dtype=np.float32)
        for q in range(features.shape[0]):  # features @ matrix by hand: scipy's checks cost more than a message's sum
            grams = features.indices[features.indptr[q]:features.indptr[q + 1]]
            starts, lengths = m.indptr[grams], self._spans[grams]
            at = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
            weights = m.data[at] * np.repeat(features.data[features.indptr[q]:features.indptr[q + 1]], lengths)
            per_text[q] = np.bincount(m.indices[at], weights=weights, minlength=m.shape[1])
        return group_max(per_text, self.owner, self.n_tools, fill=0.0)
