"""The shortlist by confidence over real decisions: sure, one tool; unsure, several, most likely first; none."""
from funes.selection.decision import Candidate, Decision
from funes.selection.gate import TEMPERATURE, fit_temperature
from funes.selection.shortlist import shortlist
from funes.tools.registry import Registry
from tests.test_gate import KILN, user

SETTINGS = {"SHORTLIST_COVERAGE": 0.8}


def decision(picked: list[tuple[str, float]], others: list[tuple[str, float]], decided_by: str = "gate") -> Decision:
    candidates = tuple(Candidate(name=n, score=p, threshold=0.0, signals={}, selected=True, probability=p)
                       for n, p in picked)
    candidates += tuple(Candidate(name=n, score=p, threshold=0.0, signals={}, probability=p) for n, p in others)
    return Decision(message="m", selected=tuple(n for n, _ in picked), decided_by=decided_by, reason="why",
                    candidates=candidates, none_score=0.0, thresholds={}, timings_ms={})


def test_a_sure_pick_is_offered_alone():
    listed = shortlist(decision([("a", 0.92)], [("b", 0.05), ("c", 0.03)]), 5, SETTINGS)
    assert listed.tools == ("a",) and listed.picked == (True,) and listed.reason == "why"


def test_an_unsure_pick_brings_the_likely_others_until_they_cover_the_belief_or_k():
    listed = shortlist(decision([("a", 0.40)], [("c", 0.10), ("b", 0.35), ("d", 0.15)]), 5, SETTINGS)
    assert listed.tools == ("a", "b", "d") and listed.picked == (True, False, False)
    assert listed.reason == "why; also b, d: together P 0.90 of the cards it may need"
    assert shortlist(decision([("a", 0.40)], [("b", 0.35), ("d", 0.15)]), 2, SETTINGS).tools == ("a", "b")


def test_where_the_router_chose_no_tool_the_shortlist_is_empty_with_its_reason():
    listed = shortlist(decision([], [("b", 0.5), ("c", 0.4)], decided_by="none"), 5, SETTINGS)
    assert listed.tools == () and listed.reason == "why"


def test_a_bare_registrys_cards_carry_probabilities_that_sum_to_one_over_the_registry(factory):
    made = factory.router(KILN).select(user("how hot is the kiln right now?"))
    p = {c.name: c.probability for c in made.candidates}
    assert made.selected == ("get_kiln_temperature",) and len(p) == len(KILN)
    assert abs(sum(p.values()) - 1.0) < 0.01 and max(p, key=p.get) == "get_kiln_temperature"
    assert made.need_probability >= factory.settings["GATE_THRESHOLD"]


def test_a_written_registrys_cards_carry_the_classifiers_belief(router):
    made = router.select(user("what time is it in Lisbon?"))
    p = {c.name: c.probability for c in made.candidates}
    assert made.selected == ("get_datetime",) and max(p, key=p.get) == "get_datetime"
    assert sum(p.values()) <= 1.0001  # the logged candidates' share of the belief over every tool


def test_beside_the_packs_the_other_groups_cards_are_neither_picked_nor_on_the_picks_scale(router, factory):
    mixed = factory.router(Registry([*router.registry, *KILN]))
    made = mixed.select(user("what time is it in Lisbon?"))
    listed = shortlist(made, 5, {"SHORTLIST_COVERAGE": 0.99})
    assert made.selected == ("get_datetime",) and listed.tools[0] == "get_datetime"
    assert listed.picked == (True,) + (False,) * (len(listed.tools) - 1)
    kiln = {t.name for t in KILN}
    assert not kiln & set(listed.tools)  # the user's group was not chosen: its P is on another scale
    assert all(c.probability is None and not c.selected for c in made.candidates if c.name in kiln)


def test_the_temperature_is_learnt_where_there_are_orders_and_the_default_where_none():
    import numpy as np

    assert fit_temperature([]) == TEMPERATURE
    assert fit_temperature([(np.array([0.5, -np.inf]), [0])]) == TEMPERATURE
    orders = [(np.array([0.60, 0.50, 0.20]), [0]), (np.array([0.55, 0.58, 0.10]), [1]),
              (np.array([0.40, 0.45, 0.30]), [0])]
    assert 1 < fit_temperature(orders) < 60  # an order right twice in three: a finite temperature


def test_the_find_tools_bench_counts_a_named_tool_only_beside_an_empty_answer():
    from bench.find_tools import score
    from funes.eval.scoring import Case

    def case(expected):
        return Case("c", [user("m")], frozenset(expected), frozenset(expected), not expected, False, (), None, "")
    answers = [{"tools": [], "closest": ["a", "b"]}, {"tools": [{"name": "c"}], "closest": ["a"]},
               {"tools": [{"name": "a"}, {"name": "b"}]}, {"tools": []}, {"tools": [{"name": "x"}]}]
    got = score([case({"a"}), case({"a"}), case({"b"}), case(()), case(())], answers)
    assert (got["right_listed"], got["right_or_named"], got["mean_tools"]) == (0.3333, 0.6667, 1.0)
    assert got["no_tool_empty"] == 0.5 and got["median_tools"] == 1
