"""FAISS inner-product index over every card text, scored per tool."""
from __future__ import annotations

from dataclasses import dataclass

import faiss
import numpy as np

from funes.tools.names import humanize
from funes.tools.registry import Registry


@dataclass(frozen=True)
class CardTexts:
    """The texts that stand for the tools: one head (name + description) per tool, then examples."""

    texts: list[str]
    owner: np.ndarray  # tool position of each text
    head: np.ndarray   # whether each text is the card's own words (head, head with parameters), not an example


def parameters_text(parameters: dict) -> str:
    """'location: city name; unit: celsius or fahrenheit' from a JSON Schema."""
    props = parameters.get("properties") or {}
    return "; ".join(f"{humanize(k)}: {v.get('description', '')}".strip(": ") if isinstance(v, dict) else humanize(k)
                     for k, v in props.items())


def head_text(tool) -> str:
    """'get weather: Current weather for a city': the text that stands for a bare card."""
    return f"{humanize(tool.name)}: {tool.description}".strip(": ")


def card_texts(registry: Registry) -> CardTexts:
    """Head text, head with parameters, and example texts of every tool in registry order."""
    texts, owner, is_head = [], [], []
    for i, tool in enumerate(registry):
        head = head_text(tool)
        params = parameters_text(tool.parameters)
        # argument names and their descriptions echo the values users type
        own = [head, f"{head} Parameters: {params}"] if params else [head]
        texts += own + list(tool.all_examples)
        owner += [i] * (len(own) + len(tool.all_examples))
        is_head += [True] * len(own) + [False] * len(tool.all_examples)
    return CardTexts(texts, np.asarray(owner, dtype=np.int64), np.asarray(is_head, dtype=bool))


def group_topk_mean(values: np.ndarray, owner: np.ndarray, n_groups: int, k: int, fill: float = -1.0) -> np.ndarray:
    """Per-group mean of the k largest `values` (1-D), `fill` where a group has none.

    A mean over a few best examples keeps one example that shares a city or a merchant with the
    message from deciding alone; k=1 is the plain maximum.
    """
    out = np.full(n_groups, fill, dtype=np.float32)
    if not len(values):
        return out
    order = np.lexsort((-values, owner))
    owners, vals = owner[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], owners[1:] != owners[:-1])))
    rank = np.arange(len(owners)) - np.repeat(starts, np.diff(np.append(starts, len(owners))))
    keep = rank < k
    # bincount, not np.add.at: the same sums, without add.at's per-call cost on every message
    sums = np.bincount(owners[keep], weights=vals[keep], minlength=n_groups)
    counts = np.bincount(owners[keep], minlength=n_groups)
    has = counts > 0
    out[has] = (sums[has] / counts[has]).astype(np.float32)
    return out


def group_max(values: np.ndarray, owner: np.ndarray, n_groups: int, fill: float = -1.0) -> np.ndarray:
    """Per-group maximum of `values` (shape: queries x texts), `fill` where a group has none."""
    out = np.full((values.shape[0], n_groups), fill, dtype=np.float32)
    for q in range(values.shape[0]):
        np.maximum.at(out[q], owner, values[q])
    return out


class VectorIndex:
    """Exact inner product for small registries, HNSW above `hnsw_min` texts."""

    def __init__(self, vectors: np.ndarray, owner: np.ndarray, n_tools: int, *,
                 hnsw_min: int, hnsw_m: int, ef_search: int, search_k: int, top_k: int):
        self.owner, self.n_tools, self.top_k = owner, n_tools, top_k
        dim = vectors.shape[1]
        if len(vectors) > hnsw_min:
            self._index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            self._index.hnsw.efSearch = max(ef_search, search_k)
        else:
            self._index = faiss.IndexFlatIP(dim)
        if len(vectors):
            self._index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self.k = min(search_k, len(vectors))

    @property
    def kind(self) -> str:
        return "hnsw" if isinstance(self._index, faiss.IndexHNSWFlat) else "flat"

    def tool_scores(self, queries: np.ndarray) -> np.ndarray:
        """Mean of each tool's best `top_k` text similarities (queries x tools); -1 outside the nearest texts."""
        out = np.full((len(queries), self.n_tools), -1.0, dtype=np.float32)
        if self.k == 0:
            return out
        sims, ids = self._index.search(np.ascontiguousarray(queries, dtype=np.float32), self.k)
        for q in range(len(queries)):
            ok = ids[q] >= 0
            out[q] = group_topk_mean(sims[q][ok], self.owner[ids[q][ok]], self.n_tools, self.top_k)
        return out
