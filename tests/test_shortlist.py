"""The shortlist by confidence over real decisions: sure, one tool; unsure, several, most likely first; none."""
from funes.selection.decision import Candidate, Decision
from funes.selection.shortlist import shortlist
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
