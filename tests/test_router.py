"""Routing behaviour with the real MiniLM model over the built-in packs."""
import dataclasses

import pytest

from funes.errors import BadRequest
from funes.selection import policy
from funes.selection.closing import is_closing
from funes.selection.policy import DECIDERS
from funes.tools.loaders import load_cards
from funes.tools.registry import Generated, Registry


def user(text):
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("message, expected", [
    ("Is it going to snow in Helsinki this weekend?", {"get_weather"}),
    ("what's the local time in Auckland right now", {"get_datetime"}),
    ("list the Lidl receipts on my card", {"search_transactions"}),
    ("How much went on restaurants between February and April?", {"analyze_by_category"}),
    ("Give me an overview of everything I spent in the past three months", {"get_spending_summary"}),
    ("How many hours of YouTube have I watched in total?", {"get_statistics"}),
    ("What is the etiquette for visiting temples in Jaipur?", {"retrieve_city_guidance"}),
    ("How does the budget jar feature of this app work?", {"get_application_information"}),
])
def test_routes_plain_requests(router, message, expected):
    assert set(router.select(user(message)).selected) == expected


@pytest.mark.parametrize("message", [
    "What is the population of Lagos?",
    "Tell me about the history of Vienna",
    "Write a limerick about a cat",
    "What is 45 divided by 9?",
    "Hello, how are you today?",
])
def test_no_tool_when_nothing_fits(router, message):
    decision = router.select(user(message))
    assert decision.selected == ()
    assert decision.decided_by in ("veto", "none") and decision.reason.startswith("no tool: ")


@pytest.mark.parametrize("message, expected", [
    ("¿Qué tiempo hará mañana en Sevilla?", {"get_weather"}),
    ("Thời tiết ở Đà Nẵng hôm nay thế nào?", {"get_weather"}),
    ("pichle mahine mera total kharcha kitna hua?", {"get_spending_summary"}),
    ("whats the wheather in berln", {"get_weather"}),
])
def test_other_languages_and_typos(router, message, expected):
    assert set(router.select(user(message)).selected) == expected


def test_two_requests_in_one_message_select_two_tools(router):
    decision = router.select(user("What's the forecast for Madrid, and what time is it there now?"))
    assert set(decision.selected) == {"get_weather", "get_datetime"}


def test_followup_uses_history(router):
    history = [{"role": "user", "content": "What's the weather like in Prague?"},
               {"role": "assistant", "content": "Prague: 11°C and light rain."},
               {"role": "user", "content": "and in Budapest?"}]
    decision = router.select(history)
    assert decision.selected == ("get_weather",)
    assert decision.history_used == ("What's the weather like in Prague?",)
    assert router.select(user("and in Budapest?")).selected == ()


@pytest.mark.parametrize("closing", ["thanks!", "perfect, thank you", "cool, thanks", "great, that's all",
                                     "gracias, eso es todo", "Cảm ơn nhé, vậy là đủ rồi.", "theek hai, shukriya",
                                     "nice one"])
def test_a_closing_after_a_tool_turn_selects_nothing(router, closing):
    turn = [{"role": "user", "content": "How much did I spend on groceries last month?"},
            {"role": "assistant", "content": "You spent $441.98 on groceries in October."}]
    decision = router.select(turn + [{"role": "user", "content": closing}])
    assert decision.selected == () and decision.decided_by == "closing" and "says goodbye" in decision.reason
    assert router.select(turn + [{"role": "user", "content": "thanks, and in September?"}]).selected == (
        "analyze_by_category",)  # a thanks that asks for more is a follow-up


@pytest.mark.parametrize("message, closing", [
    ("thank you so much!", True), ("ok bye for now", True), ("that helped a lot, thanks", True),
    ("muchas gracias", True), ("cam on ban nhieu", True),
    ("ok", False), ("sounds good", False), ("yes please", False),  # may say "go ahead" to a proposed action
    ("thanks, what about Sydney?", False), ("ok book the cheaper one", False),
    ("Thanks! Should I wear a heavy coat then?", False), ("thanks " * 11, False)])
def test_closings_are_thanks_or_goodbyes_asking_nothing_else(message, closing):
    assert is_closing(message) is closing


def test_named_tool_is_selected_by_name(router):
    decision = router.select(user("please run get_statistics"))
    assert decision.selected == ("get_statistics",)
    assert decision.decided_by == "name"


def test_question_about_a_tool_does_not_run_it(router):
    assert router.select(user("What does the get_datetime function return in Python libraries?")).selected == ()
    decision = router.select(user("what arguments does find_similar_videos take, and what does it return?"))
    assert decision.selected == () and decision.decided_by == "about_tool" and "how a tool works" in decision.reason


def test_plan_with_details_brings_the_search_it_needs(router):
    decision = router.select(user("Make me a 3-day Jaipur itinerary at a relaxed pace, forts and food"))
    assert set(decision.selected) == {"build_itinerary", "search_pois"}


def test_decision_explains_itself(router):
    decision = router.select(user("Is it raining in Oslo?"))
    data = decision.to_dict()
    assert data["decided_by"] in DECIDERS
    top = data["candidates"][0]
    assert top["name"] == "get_weather" and top["selected"]
    assert {"embedding", "lexical", "negative", "classifier", "keyword", "name"} <= set(top["signals"])
    assert top["score"] >= top["threshold"]
    assert all(not c["selected"] for c in data["candidates"][1:])
    assert data["thresholds"]["CLASSIFIER_THRESHOLD"] == router.settings["CLASSIFIER_THRESHOLD"]
    assert set(data["timings_ms"]) == {"embed", "search", "decide", "total"}


def test_logged_scores_are_the_measured_ones_to_four_places(router):
    import numpy as np

    ev = router.measure(user("Is it raining in Oslo, and how much is 20 pounds in euros?"))
    decision = router.decide(ev)
    scores, position = router.combined(ev).max(axis=0), {t.name: i for i, t in enumerate(router.tools)}
    for c in decision.candidates:
        i = position[c.name]
        assert c.score == round(float(scores[i]), 4) and c.threshold == round(float(router.thresholds[i]), 4)
        assert c.signals["embedding"] == round(float(ev.embedding[:, i].max()), 4)
        assert c.signals["classifier"] == round(float(np.asarray(ev.classifier)[:, i].max()), 4)


def test_words_are_read_beside_the_model_and_measure_the_same(router, monkeypatch):
    import threading

    import numpy as np

    from funes.selection.scorers import Scorers

    threads, original = [], Scorers._words
    monkeypatch.setattr(Scorers, "_words", lambda self, *a: threads.append(threading.current_thread().name)
                        or original(self, *a))
    message = user("convert 250 dollars to yen and then tell me whether it snows in Sapporo")
    router.encoder.clear_cache()
    beside = router.measure(message)  # the model runs: the words are read by a worker meanwhile
    alone = router.measure(message)   # a cache hit: nothing to wait for, read here
    assert threads[0].startswith("funes-text") and threads[1:] == [threading.current_thread().name]
    for name in ("embedding", "lexical", "negative", "classifier", "no_tool", "none"):
        np.testing.assert_allclose(getattr(alone, name), getattr(beside, name), atol=1e-6)
    assert (alone.keyword_hits, alone.named, alone.closing) == (beside.keyword_hits, beside.named, beside.closing)
    assert router.decide(beside).selected == router.decide(alone).selected != ()


def test_thresholds_come_from_settings(router):
    strict = router.tuned({"CLASSIFIER_THRESHOLD": 0.999, "KEYWORD_MIN_SCORE": 9.0})
    assert strict.select(user("Is it raining in Oslo?")).selected == ()
    per_tool = router.tuned({"TOOL_THRESHOLDS": {"get_weather": 0.999}, "KEYWORD_MIN_SCORE": 9.0})
    decision = per_tool.select(user("Is it raining in Oslo?"))
    assert "get_weather" not in decision.selected
    assert decision.candidates[0].threshold == pytest.approx(0.999)


@pytest.mark.parametrize("messages", [
    [], "  ", [{"role": "user"}], [{"role": "bot", "content": "hi"}],
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
])
def test_bad_messages_are_rejected(router, messages):
    with pytest.raises(BadRequest):
        router.select(messages)


def test_cards_without_examples_route_by_similarity(factory):
    registry = load_cards([
        {"name": "calculate_triangle_area", "description": "Area of a triangle from its base and height.",
         "parameters": {"type": "object", "properties": {"base": {"type": "number"}, "height": {"type": "number"}}}},
        {"name": "convert_currency", "description": "Convert an amount from one currency to another."},
    ])
    router = factory.router(registry)
    assert router.classifier is None
    assert router.select(user("What's the area of a triangle with base 6 and height 4?")).selected == (
        "calculate_triangle_area",)
    assert router.select(user("Who painted the Mona Lisa?")).selected == ()


# Plain docstrings, as a developer writes them: they embed far from how people ask.
TERSE_CARDS = [{"name": name, "description": description} for name, description in [
    ("get_device_status", "Return the state of a smart-home device."),
    ("create_issue", "Open an issue in a repository."),
    ("search_notes", "Full-text search over saved notes."),
    ("add_task", "Append a task to a to-do list."),
    ("play_track", "Start playback of a track."),
    ("request_ride", "Order a car to a pickup point."),
    ("get_payslip", "Fetch a payslip PDF for a month."),
    ("book_hotel", "Reserve a hotel room."),
    ("open_ticket", "Create a support ticket."),
    ("list_pull_requests", "Enumerate pull requests of a repository."),
    ("set_rate_alert", "Register a threshold notification on an exchange rate."),
    ("lock_door", "Engage a smart lock."),
]]


def test_bare_threshold_is_set_by_the_no_tool_anchors_over_each_registry(factory):
    """Where no gate was fitted over the encoder (see test_gate.py), a similarity threshold decides."""
    import json
    from pathlib import Path

    from funes.selection.router import Router

    anchors = json.loads((Path(__file__).parent.parent / "funes/selection/no_tool.json").read_text())["examples"]
    router = Router(load_cards(TERSE_CARDS), factory.encoder, factory.settings, factory.anchors)
    assert router.classifier is None and router.rules == policy.RULES["bare_ungated"]
    picked = sum(bool(router.select(user(a)).selected) for a in anchors)
    assert picked <= 0.05 * len(anchors) + 1  # what TOOL_THRESHOLD_QUANTILE 0.95 means
    assert router.thresholds[0] < factory.settings["TOOL_THRESHOLD"]  # these cards' scale, not the default's
    asks = {"what's the status of the living room lights?": ("get_device_status",),
            "open a bug in acme/web: login broken": ("create_issue",)}
    for message, tools in asks.items():
        assert router.select(user(message)).selected == tools
    assert router.select(user("Who painted the Mona Lisa?")).selected == ()
    fixed = router.tuned({"TOOL_THRESHOLD_QUANTILE": 0})
    assert list(fixed.thresholds) == [factory.settings["TOOL_THRESHOLD"]] * len(TERSE_CARDS)
    # too few cards to tell their scale: the fixed threshold
    few = Router(load_cards(TERSE_CARDS[:3]), factory.encoder, factory.settings, factory.anchors)
    assert list(few.thresholds) == [factory.settings["TOOL_THRESHOLD"]] * 3
    loose = router.tuned({"TOOL_THRESHOLD_QUANTILE": 0.5})
    assert loose.thresholds[0] < router.thresholds[0]


def test_empty_registry_selects_nothing(factory):
    router = factory.router(load_cards([]))
    decision = router.select(user("What's the weather in Paris?"))
    assert decision.selected == () and decision.candidates == ()


def test_classifier_files_on_disk_are_bounded(tmp_path, monkeypatch):
    import numpy as np
    from scipy.sparse import csr_matrix

    from funes.selection import classifier

    monkeypatch.setattr(classifier, "CACHED_CLASSIFIERS", 2)
    rng = np.random.default_rng(0)
    for c in (0.5, 1.0, 2.0):  # three registries' worth of training: the oldest file goes
        classifier.IntentClassifier.train(["a", "b", "c", "d"], np.array([0, 1, 2, 0]), rng.random((4, 8)),
                                          csr_matrix(rng.random((4, 3))), 2, c, tmp_path, "m")
    assert len(list(tmp_path.glob("classifier-*.joblib"))) == 2


@pytest.mark.parametrize("labels", [[0, 1, 2, 3, 3, 0, 1, 2], [0, 1, 2, 0, 1, 2, 0, 1], [0, 2, 0, 2, 2, 0, 0, 2]])
def test_classifier_probabilities_are_sklearns(labels):
    import numpy as np
    from scipy.sparse import csr_matrix, hstack
    from sklearn.linear_model import LogisticRegression

    from funes.selection.classifier import IntentClassifier

    rng = np.random.default_rng(1)  # three tools (3 = none): with "none", without it, and two classes (a sigmoid)
    vectors, grams = rng.random((8, 6)).astype(np.float32), csr_matrix(rng.random((8, 5)) * (rng.random((8, 5)) > 0.5))
    model = LogisticRegression(C=2.0).fit(hstack([csr_matrix(vectors), grams]).tocsr(), labels)
    tools, none = IntentClassifier(model, 6, 3).proba(vectors[:3], grams[:3].astype(np.float32))
    expected = model.predict_proba(hstack([csr_matrix(vectors[:3]), grams[:3]]).tocsr())
    by_label = dict(zip(model.classes_, expected.T))
    for label in range(3):
        np.testing.assert_allclose(tools[:, label], by_label.get(label, 0.0), atol=1e-5)
    np.testing.assert_allclose(none, by_label.get(3, 0.0), atol=1e-5)


def _unsure(p_tool, p_none):
    """Evidence of a one-line message where a classifier gives two tools `p_tool` and no tool `p_none`."""
    import numpy as np

    from funes.selection.scorers import Evidence

    zeros = np.zeros((1, 2), dtype=np.float32)
    return Evidence(message="msg", history=(), n_segments=1, embedding=zeros, lexical=zeros, negative=zeros,
                    none=np.zeros(1, np.float32), classifier=np.asarray([p_tool], np.float32),
                    no_tool=np.asarray([p_none], np.float32), named={}, about_tool=False, keyword_hits={},
                    embed_ms=0.0, search_ms=0.0)


@pytest.mark.parametrize("p_tool, p_none, floor, gate, picked", [
    ((0.3, 0.2), 0.4, 0.0, -1.0, [0]),      # sure a tool is needed, unsure which: the best generated card stands
    ((0.15, 0.35), 0.45, 0.0, -1.0, [1]),
    ((0.3, 0.2), 0.4, 0.0, 0.0, [0]),       # the message's best similarity (0.0) reaches the gate
    ((0.3, 0.2), 0.4, 0.0, 0.01, []),       # it looks less like any card than the anchors do: none
    ((0.3, 0.2), 0.55, 0.0, -1.0, []),      # P(no tool) at or over GENERATED_FALLBACK: none
    ((0.06, 0.05), 0.3, 0.0, -1.0, [0]),    # however low its P: a floor on it paid nothing
    ((0.3, 0.2), 0.4, float("inf"), -1.0, []),  # written cards never fall back
])
def test_unsure_classifier_over_generated_cards_picks_its_best_tool(p_tool, p_none, floor, gate, picked):
    import numpy as np

    settings = {"CLASSIFIER_MULTI_THRESHOLD": 0.35, "NONE_VETO": 0.6, "CONTEXT_PENALTY": 0.0, "KEYWORD_MIN_SCORE": 0.45,
                "LEXICAL_WEIGHT": 0.0, "NEGATIVE_WEIGHT": 0.0, "GENERATED_FALLBACK": 0.5}
    ev = _unsure(p_tool, p_none)
    chosen, by, _ = policy.choose(ev, ev.classifier, np.full(2, 0.5, np.float32), settings, [[], []],
                                  np.full(2, floor, np.float32), gate)
    assert chosen == picked and by == ("fallback" if picked else "veto" if p_none >= 0.6 else "none")


@pytest.mark.parametrize("weight, picked", [(5.0, [1]), (0.0, [0])])
def test_card_words_settle_which_generated_card_the_classifier_picks(weight, picked):
    import numpy as np

    ev = dataclasses.replace(_unsure((0.55, 0.25), 0.2), card=np.asarray([[0.1, 0.6]], np.float32))
    settings = {"CLASSIFIER_MULTI_THRESHOLD": 0.35, "CARD_WEIGHT": weight}
    chosen, by, _ = policy.choose(ev, ev.classifier, np.full(2, 0.5, np.float32), settings, [[], []],
                                  np.full(2, 0.1, np.float32))
    # 0.55 vs 0.25 is the classifier's lean; the second card's own words are much nearer the message
    assert chosen == picked and by == "classifier"


def test_generated_cards_are_scored_against_their_own_words(factory):
    cards = [{"name": "get_payslip", "description": "Fetch a payslip PDF for a month.",
              "generated": {"model": "m", "prompt": 1, "examples": ["payslip for march", "send my salary slip"] * 3}},
             {"name": "book_hotel", "description": "Reserve a hotel room.",
              "generated": {"model": "m", "prompt": 1, "examples": ["a room in Rome", "hotel for two nights"] * 3}}]
    router = factory.router(load_cards(cards))
    decision = router.select(user("I need my payslip from March"))
    heads = router.encoder.encode_cards(["get payslip: Fetch a payslip PDF for a month.",
                                       "book hotel: Reserve a hotel room."])
    expected = router.encoder.encode_query(["I need my payslip from March"])[0] @ heads.T
    signals = {c.name: c.signals["card"] for c in decision.candidates}
    assert signals == pytest.approx({"get_payslip": expected[0], "book_hotel": expected[1]}, abs=1e-3)
    assert decision.selected == ("get_payslip",) and decision.thresholds["CARD_WEIGHT"] == 5.0
    written = factory.router(load_cards([{**c, "generated": None, "examples": ["a", "b", "c", "d", "e"]}
                                         for c in cards]))
    assert written.select(user("I need my payslip")).candidates[0].signals["card"] is None
    assert written.settings["CARD_WEIGHT"] == 0.0  # logged as in force: written cards are not re-ranked


def test_fallback_gate_is_a_quantile_of_the_anchors_best_similarity_over_generated_cards(factory):
    import numpy as np

    router = factory.router(load_cards(TERSE_CARDS))
    cards = [{**c, "generated": {"model": "m", "prompt": 2, "examples": [c["description"]] * 5}} for c in TERSE_CARDS]
    enriched = factory.router(load_cards(cards))
    best = policy.similarity_of(*enriched.scorers.anchor_signals, enriched.settings).max(axis=1)
    assert np.mean(best < enriched.fallback_gate) == pytest.approx(0.5, abs=1.5 / len(best))  # FALLBACK_QUANTILE 0.5
    assert enriched.tuned({"FALLBACK_QUANTILE": 0.9}).fallback_gate > enriched.fallback_gate
    assert enriched.tuned({"FALLBACK_QUANTILE": 0}).fallback_gate == -np.inf
    assert router.fallback_gate == -np.inf and router.settings["FALLBACK_QUANTILE"] == 0.0  # bare: no fallback


def test_no_tool_keeps_its_share_of_the_training_weight_in_large_registries():
    import numpy as np

    from funes.selection.classifier import class_weights

    def none_share(n_tools, floor):
        labels = np.r_[np.repeat(np.arange(n_tools), 10), np.full(200, n_tools)]
        w = class_weights(labels, n_tools, floor)
        return w[n_tools] * 200 / sum(w[int(c)] for c in labels)

    assert none_share(199, 0.05) == pytest.approx(0.05)
    assert none_share(199, 0.0) == pytest.approx(1 / 200)  # balanced: one class among 200
    assert none_share(9, 0.05) == pytest.approx(1 / 10)    # small registries keep the balanced share


class Reads(dict):
    """Settings that remember which of them were read."""

    def __init__(self, base):
        super().__init__(base)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


ASKED = [[{"role": "user", "content": text}] for text in (
    "What's the weather in Oslo tomorrow and how much did I spend on coffee?", "tell me a joke",
    "run get_weather for Lisbon", "what arguments does get_weather take?", "thanks, bye!")] + [[
    {"role": "user", "content": "How much did I spend on groceries in March?"},
    {"role": "assistant", "content": "You spent 212 EUR."}, {"role": "user", "content": "and in April?"}]]


def test_each_rule_reads_only_the_settings_docs_routing_lists_for_it(factory, router):
    """Rule.settings is what `funes rules` prints into docs/routing.md: a setting a rule reads must be there."""
    import config

    from tests.test_gate import KILN

    enriched = factory.router(Registry(dataclasses.replace(t, generated=Generated(
        examples=tuple(f"{t.description} {n}" for n in range(5)), model="m")) for t in KILN))
    read: dict[str, set[str]] = {}
    for each in (router, factory.router(KILN), enriched):
        for messages in ASKED:
            ev = each.measure(messages)
            scores = each.combined(ev)
            for rule in each.rules:
                s = Reads(each.settings)
                rule.fire(policy.Inputs(ev, scores, each.thresholds, s, each._requires, each.fallback,
                                        each.fallback_gate))
                read.setdefault(rule.name, set()).update(s.read)
    rules = {r.name: r for cascade in policy.RULES.values() for r in cascade}
    assert {name: sorted(keys - set(rules[name].settings)) for name, keys in read.items()} == {n: [] for n in read}
    assert set(read) >= set(rules) - {"similarity"}  # every cascade but the ungated one was run
    assert {s for r in rules.values() for s in r.settings} <= {s.name for s in config.SETTINGS}
