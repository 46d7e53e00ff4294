"""A per-registry intent classifier trained on the cards' own texts.

Logistic regression over the MiniLM embedding plus character n-grams, one class per tool and one
class "none" learnt from the no-tool anchors and every card's negatives. It is trained only when
the registry carries enough examples to learn from (the built-in packs do; bare BFCL cards do not),
and cached on disk keyed by what it was trained on, so a restart does not retrain.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import joblib
import numpy as np
from scipy.sparse import csr_matrix, hstack
from sklearn.linear_model import LogisticRegression

log = logging.getLogger(__name__)
CACHED_CLASSIFIERS = 64  # files kept on disk, least recently used dropped (each labelled version adds one)
FEATURES_VERSION = 1  # bump when the features change, so cached classifiers are not reused


def class_weights(labels: np.ndarray, none_label: int, none_share: float) -> dict[int, float]:
    """Balanced weights, with the "none" class given at least `none_share` of the total.

    Balanced weighting makes "none" one class among K+1, so its prior shrinks as a registry grows,
    yet a message needing no tool is as likely beside 199 tools as beside 18."""
    classes, counts = np.unique(labels, return_counts=True)
    n, k = len(labels), len(classes)
    share = max(none_share, 1.0 / k) if none_label in classes and k > 1 else 1.0 / k
    rest = (1.0 - share) / (k - 1) if k > 1 else 1.0
    return {int(c): n * (share if c == none_label else rest) / m for c, m in zip(classes, counts)}


class IntentClassifier:
    """P(tool) and P(none) for a message, from its embedding and its character n-grams."""

    def __init__(self, model: LogisticRegression, dim: int, n_tools: int):
        self.n_tools = n_tools
        coef, bias = model.coef_, model.intercept_
        if coef.shape[0] == 1:  # two classes: a sigmoid, which is a softmax over (-z/2, z/2)
            coef, bias = np.vstack([-coef / 2, coef / 2]), np.r_[-bias / 2, bias / 2]
        # The fitted weights, split at the embedding / n-gram boundary: predicting by hand skips
        # scikit-learn's per-call validation, which costs more than the arithmetic on one message.
        self._w_dense = np.ascontiguousarray(coef[:, :dim].T, dtype=np.float32)
        self._w_sparse = np.ascontiguousarray(coef[:, dim:].T, dtype=np.float32)
        self._bias = bias.astype(np.float32)
        self._labels = model.classes_.astype(int)

    @classmethod
    def train(cls, texts: list[str], labels: np.ndarray, vectors: np.ndarray, ngrams: csr_matrix, n_tools: int,
              c: float, cache_dir: Path | None, model_id: str, none_share: float = 0.0) -> IntentClassifier:
        """Fit (or load from cache) on texts labelled with tool positions, `n_tools` meaning none."""
        weights = class_weights(labels, n_tools, none_share)
        key = hashlib.sha256(repr((FEATURES_VERSION, model_id, c, texts, labels.tolist(), sorted(weights.items())))
                             .encode()).hexdigest()[:24]
        path = cache_dir / f"classifier-{key}.joblib" if cache_dir else None
        if path and path.exists():
            try:
                loaded = joblib.load(path)
                os.utime(path)  # recently used: kept when the directory is pruned
                return loaded
            except Exception:  # a stale or torn cache file is only a cache: retrain
                log.warning("ignoring unreadable classifier cache %s", path)
        model = LogisticRegression(C=c, max_iter=3000, class_weight=weights)
        model.fit(hstack([csr_matrix(vectors), ngrams]).tocsr(), labels)
        trained = cls(model, vectors.shape[1], n_tools)
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{id(trained)}")
            joblib.dump(trained, tmp)
            tmp.replace(path)
            _prune(cache_dir)
        return trained

    def proba(self, vectors: np.ndarray, ngrams: csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """Per-row tool probabilities (rows x tools) and the probability of needing no tool."""
        logits = vectors @ self._w_dense + self._bias
        for q in range(ngrams.shape[0]):  # ngrams @ _w_sparse by hand: scipy's checks cost more than the sum
            a, b = ngrams.indptr[q], ngrams.indptr[q + 1]
            logits[q] += ngrams.data[a:b] @ self._w_sparse[ngrams.indices[a:b]]
        raw = np.exp(logits - logits.max(axis=1, keepdims=True))
        raw /= raw.sum(axis=1, keepdims=True)
        is_none = self._labels == self.n_tools
        tools = np.zeros((len(vectors), self.n_tools), dtype=np.float32)
        tools[:, self._labels[~is_none]] = raw[:, ~is_none]
        none = raw[:, is_none].sum(axis=1).astype(np.float32)  # zero where "none" was never a label
        return tools, none


def _prune(cache_dir: Path) -> None:
    """Keep the CACHED_CLASSIFIERS most recently used classifier files."""
    files = []
    for path in cache_dir.glob("classifier-*.joblib"):
        try:
            files.append((path.stat().st_mtime, path))
        except FileNotFoundError:  # another worker pruned it first
            pass
    for _, path in sorted(files, reverse=True)[CACHED_CLASSIFIERS:]:
        path.unlink(missing_ok=True)
