"""The candidate order of registries without a classifier: clauses move tools, scores stay."""
import numpy as np

from funes.selection.ranking import rank_scores


def knobs(align=0.5):
    return {"CLAUSE_ALIGN": align}


def test_each_clause_puts_its_best_tool_near_the_top():
    # Row 0 is the whole message, rows 1-2 its clauses; tool 3 is only the second clause's best.
    similarity = np.array([[0.70, 0.65, 0.64, 0.50],
                           [0.72, 0.60, 0.60, 0.30],
                           [0.40, 0.55, 0.50, 0.80]], dtype=np.float32)
    score = rank_scores(similarity, [0, 1, 2], 3, knobs(0.75))
    assert set(np.argsort(-score)[:2].tolist()) == {0, 3}
    # Without clause rows the order is the whole message's.
    assert np.argsort(-rank_scores(similarity, [0], 1, knobs(0.75))).tolist() == [0, 1, 2, 3]


def test_an_empty_registry_has_nothing_to_order():
    empty = np.zeros((2, 0), dtype=np.float32)
    assert rank_scores(empty, [0, 1], 2, knobs()).shape == (0,)
