"""A per-registry intent classifier trained on the cards' own texts.

Logistic regression over the MiniLM embedding plus character n-grams, one class per tool and one
class "none" learnt from the no-tool anchors and every card's negatives. It is trained only when
the registry carries enough examples to learn from (the built-in packs do; bare BFCL cards do not),
and cached on disk keyed by what it was trained on, so a restart does not retrain.
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import joblib
import numpy as np
from scipy.sparse import csr_matrix, hstack
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

log = logging.getLogger(__name__)


class IntentClassifier:
    """P(tool) and P(none) for a message, from its embedding and its character n-grams."""

    def __init__(self, vectorizer: TfidfVectorizer, model: LogisticRegression, n_tools: int):
        self._vectorizer, self._model, self.n_tools = vectorizer, model, n_tools
        self._columns = {int(c): i for i, c in enumerate(model.classes_)}

    @classmethod
    def train(cls, texts: list[str], labels: np.ndarray, vectors: np.ndarray, n_tools: int, c: float,
              cache_dir: Path | None, model_id: str) -> IntentClassifier:
        """Fit (or load from cache) on texts labelled with tool positions, `n_tools` meaning none."""
        key = hashlib.sha256(repr((model_id, c, texts, labels.tolist())).encode()).hexdigest()[:24]
        path = cache_dir / f"classifier-{key}.joblib" if cache_dir else None
        if path and path.exists():
            try:
                return joblib.load(path)
            except Exception:  # a stale or torn cache file is only a cache: retrain
                log.warning("ignoring unreadable classifier cache %s", path)
        vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True,
                                     strip_accents="unicode", dtype=np.float32).fit(texts)
        model = LogisticRegression(C=c, max_iter=3000, class_weight="balanced")
        model.fit(_features(vectorizer, texts, vectors), labels)
        trained = cls(vectorizer, model, n_tools)
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{id(trained)}")
            joblib.dump(trained, tmp)
            tmp.replace(path)
        return trained

    def proba(self, queries: list[str], vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-row tool probabilities (rows x tools) and the probability of needing no tool."""
        raw = self._model.predict_proba(_features(self._vectorizer, queries, vectors))
        tools = np.zeros((len(queries), self.n_tools), dtype=np.float32)
        none = np.zeros(len(queries), dtype=np.float32)
        for label, col in self._columns.items():
            if label == self.n_tools:
                none[:] = raw[:, col]
            else:
                tools[:, label] = raw[:, col]
        return tools, none


def _features(vectorizer: TfidfVectorizer, texts: list[str], vectors: np.ndarray):
    return hstack([csr_matrix(vectors), vectorizer.transform(texts)]).tocsr()
