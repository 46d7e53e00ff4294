"""The order of candidates where a registry has no classifier: similarity, clause by clause.

Only the order changes, never which tools are selected: thresholds still apply to the similarity alone.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def rank_scores(similarity: np.ndarray, rows: list[int], n_segments: int, settings: dict[str, Any]) -> np.ndarray:
    """One ranking score per tool: the best whole-message row, or a clause row leaning on its best tool."""
    align, penalty = settings["CLAUSE_ALIGN"], np.float32(settings["CLAUSE_PENALTY"])
    rank = similarity
    if not rank.shape[1]:  # an empty registry: nothing to order
        return rank.max(axis=0, initial=0.0)
    clause_rows = [r for r in rows if 0 < r < n_segments]
    score = rank[[r for r in rows if r not in clause_rows]].max(axis=0)
    for row in clause_rows:
        # A short clause alone over-rates tools sharing one word with it; the whole message keeps it on topic.
        aligned = align * rank[row] + (1.0 - align) * rank[0]
        best = int(np.argmax(aligned))
        # Only the clause's own best tool climbs at full score: each part of the request gets one place at the top.
        lifted = aligned - penalty
        lifted[best] = aligned[best]
        score = np.maximum(score, lifted)
    return score
