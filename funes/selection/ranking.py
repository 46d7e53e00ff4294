"""The order of candidates where a registry has no classifier: similarity, clause by clause.

Only the order changes, never which tools are selected: thresholds still apply to the similarity alone.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def rank_scores(similarity: np.ndarray, rows: list[int], n_segments: int, settings: dict[str, Any]) -> np.ndarray:
    """One ranking score per tool: its best over the whole message and each clause leaning on the whole message."""
    align = settings["CLAUSE_ALIGN"]
    rank = similarity
    if not rank.shape[1]:  # an empty registry: nothing to order
        return rank.max(axis=0, initial=0.0)
    clause_rows = [r for r in rows if 0 < r < n_segments]
    score = rank[[r for r in rows if r not in clause_rows]].max(axis=0)
    for row in clause_rows:
        # A short clause alone over-rates tools sharing one word with it; the whole message keeps it on topic.
        score = np.maximum(score, align * rank[row] + (1.0 - align) * rank[0])
    return score
