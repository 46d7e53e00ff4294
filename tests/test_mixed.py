"""A user's bare cards beside the packs' written ones, with the real MiniLM model: each group routed alone, merged."""
from pathlib import Path

import pytest

from funes.selection.mixed import MixedRouter, split
from funes.tools.loaders import load_cards, load_file, load_packs
from funes.tools.registry import Registry

BENCH = Path(__file__).resolve().parent.parent / "bench"
HOME = [
    {"name": "set_light", "description": "Turn a light on or off, or dim it",
     "parameters": {"type": "object", "properties": {"room": {"type": "string"}, "on": {"type": "boolean"}}}},
    {"name": "get_indoor_temperature", "description": "Read the temperature of a room from its sensor",
     "parameters": {"type": "object", "properties": {"room": {"type": "string"}}}},
    {"name": "lock_door", "description": "Lock or unlock a door of the house",
     "parameters": {"type": "object", "properties": {"door": {"type": "string"}}}},
    {"name": "play_music", "description": "Play music on a speaker",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "room": {"type": "string"}}}},
]


def user(text):
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def mixed(factory, settings):
    return factory.router(Registry([*load_packs(settings["PACKS"]), *load_cards(HOME)]))


def test_a_registry_of_written_and_bare_cards_is_routed_per_group(mixed):
    assert isinstance(mixed, MixedRouter)
    written, bare = (g.registry for g in mixed.groups)
    assert "set_light" in bare and "set_light" not in written
    assert "get_weather" in written and mixed.groups[0].classifier is not None
    assert mixed.groups[1].classifier is None  # four bare cards: no examples to learn from


def test_one_kind_of_card_is_not_split(settings):
    assert split(load_packs(settings["PACKS"])) is None
    assert split(load_cards(HOME)) is None


@pytest.mark.parametrize("message, expected", [
    ("turn off the kitchen lights", "set_light"),
    ("is it warm inside the living room?", "get_indoor_temperature"),
    ("play Bohemian Rhapsody in the kitchen", "play_music"),  # the gate is sure: no veto at low similarity
    ("lock the front door please", "lock_door"),
])
def test_the_users_bare_cards_are_chosen_beside_the_packs(mixed, message, expected):
    decision = mixed.select(user(message))
    assert decision.selected[:1] == (expected,)
    assert decision.cards == "mixed" and "the user's bare cards" in decision.reason


@pytest.mark.parametrize("message, expected", [
    ("How much went on restaurants between February and April?", "analyze_by_category"),
    ("Is it going to snow in Helsinki this weekend?", "get_weather"),
    ("How many hours of YouTube have I watched in total?", "get_statistics"),
])
def test_the_packs_keep_their_messages(mixed, router, message, expected):
    decision = mixed.select(user(message))
    assert decision.selected == router.select(user(message)).selected == (expected,)
    assert "(written cards)" in decision.reason


def test_the_log_shows_both_groups_candidates_whichever_decides(mixed, settings):
    logged = settings["CANDIDATES_LOGGED"]
    for message, group in (("Is it going to snow in Helsinki this weekend?", "(written cards)"),
                           ("turn off the kitchen lights", "(the user's bare cards)")):
        decision = mixed.select(user(message))
        names = [c.name for c in decision.candidates]
        home = [n for n in names if n in {c["name"] for c in HOME}]
        assert decision.reason.endswith(group) and len(names) == logged and 3 <= len(home) < logged, names


@pytest.mark.parametrize("message", ["How many people live in Moscow?", "Write a limerick about a cat"])
def test_no_tool_still_wins_where_nothing_fits(mixed, message):
    assert mixed.select(user(message)).selected == ()


def test_where_no_tool_fits_the_closest_candidates_come_from_both_groups_in_turn(mixed):
    decision = mixed.select(user("How many people live in Moscow?"))
    home = {c["name"] for c in HOME}
    kinds = ["home" if c.name in home else "pack" for c in decision.candidates]
    assert decision.selected == () and kinds[:4] == ["home", "pack", "home", "pack"], kinds


def test_a_sure_written_classifier_vetoes_a_bare_pick_under_the_fixed_threshold(factory, settings):
    """A bare pick the gate let through below TOOL_THRESHOLD gives way where the packs' classifier is sure no tool
    is needed (the gate is lowered here so that it lets one through)."""
    mixed = factory.router(Registry([*load_packs(settings["PACKS"]), *load_file(BENCH / "probe_mixed_tools.jsonl")]))
    ev = mixed.measure(user("how many calories does an apple have?"))
    assert mixed.decide(ev).selected == ()
    assert mixed.groups[1].decide(ev.parts[1]).selected == ()  # the gate alone already says no tool
    loose = mixed.tuned({"GATE_THRESHOLD": 0.0})
    alone = loose.groups[1].decide(ev.parts[1])
    assert alone.selected and max(c.score for c in alone.candidates) < settings["TOOL_THRESHOLD"]
    decision = loose.decide(ev)
    assert decision.selected == () and decision.decided_by == "mixed_veto" and "MIXED_NONE_VETO" in decision.reason
    assert loose.tuned({"MIXED_NONE_VETO": 1.01}).decide(ev).selected == alone.selected  # no veto: the pick stands


def test_a_bare_pick_over_the_fixed_threshold_stands_whatever_the_written_classifier_says(mixed):
    ev = mixed.measure(user("turn off the kitchen lights"))
    assert ev.parts[0].no_tool[0] >= mixed.settings["MIXED_NONE_VETO"]  # the packs' classifier: no tool of theirs
    assert mixed.decide(ev).selected == ("set_light",)


def test_the_closer_card_by_its_own_words_wins_when_both_groups_pick(mixed):
    ev = mixed.measure(user("what's the temperature in my bedroom right now?"))
    written, bare = (g.decide(e) for g, e in zip(mixed.groups, ev.parts))
    assert written.selected == ("get_weather",) and bare.selected == ("get_indoor_temperature",)
    assert mixed.decide(ev).selected == ("get_indoor_temperature",)
    assert mixed.tuned({"MIXED_MARGIN": 1.0}).decide(ev).selected == ("get_weather",)


def test_the_written_classifier_learns_the_users_bare_cards_as_no_tool_of_its_own(mixed, router):
    """A bare card has no examples, so its own words are what the packs' classifier learns as "none"."""
    def no_tool(r, message):
        return r.groups[0].decide(r.measure(user(message)).parts[0]) if r is mixed else r.select(user(message))

    near = "is it warm inside the living room?"  # the user's get_indoor_temperature, not the packs' get_weather
    assert no_tool(mixed, near).no_tool_probability > no_tool(router, near).no_tool_probability + 0.05
    snow = "Is it going to snow in Helsinki this weekend?"
    beside, alone = no_tool(mixed, snow), no_tool(router, snow)
    assert beside.selected == alone.selected == ("get_weather",)
    assert abs(beside.no_tool_probability - alone.no_tool_probability) < 0.02


def test_a_bare_pick_under_its_cards_threshold_leaves_a_written_pick_standing(factory, settings):
    """Own words mislead where MiniLM reads a message poorly: here a Vietnamese request for the packs' transactions,
    whose closest bare card (an exchange-rate history) the gate chose at a score under the card's threshold."""
    mixed = factory.router(Registry([*load_packs(settings["PACKS"]), *load_file(BENCH / "probe_domains_tools.jsonl")]))
    ev = mixed.measure(user("Tìm các giao dịch Grab tháng này"))
    written, bare = (g.decide(e) for g, e in zip(mixed.groups, ev.parts))
    assert written.selected == ("search_transactions",) and len(bare.selected) == 1
    pick = next(c for c in bare.candidates if c.selected)
    assert pick.score < pick.threshold
    assert ev.own_words(pick.name) - ev.own_words("search_transactions") >= settings["MIXED_MARGIN"]
    assert mixed.decide(ev).selected == ("search_transactions",)


def test_a_users_card_that_requires_a_pack_tool_brings_it_on_a_first_turn(factory, settings):
    walk = {"name": "plan_walk", "description": "Plan a walking route through places found nearby",
            "requires": ["search_pois"]}
    router = factory.router(Registry([*load_packs(["trip"]), *load_cards([walk])]))
    first = router.select(user("use plan_walk for a stroll through Lisbon's old town"))
    assert first.selected == ("search_pois", "plan_walk")
    assert {c.name for c in first.candidates if c.selected} == {"search_pois", "plan_walk"}
    later = router.select([*user("find me sights in Lisbon"), {"role": "assistant", "content": "Here are five."},
                           *user("use plan_walk for a stroll through them")])
    assert later.selected == ("plan_walk",)


def test_a_mixed_router_offers_what_every_router_does(mixed, factory):
    """One interface (router.Routing) for single and mixed registries: calibration and the service use either."""
    from funes.selection.router import Router, Routing

    assert isinstance(mixed, Routing) and isinstance(mixed.groups[1], Router) and isinstance(mixed.groups[1], Routing)
    assert len(mixed.thresholds) == len(mixed.tools)
    user = mixed.groups[1]
    own = dict(zip((t.name for t in user.tools), user.thresholds))
    assert all(mixed.thresholds[i] == own[t.name] for i, t in enumerate(mixed.tools) if t.name in own)
