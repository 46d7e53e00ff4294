"""The word-level BM25 signal: it orders the candidates of bare cards and never changes what is selected."""
import numpy as np
import pytest

from funes.selection.index import card_texts
from funes.selection.bm25 import WordIndex, plain_words
from funes.tools.loaders import load_cards

CARDS = [
    {"name": "get_weather", "description": "Current weather and forecast for a city."},
    {"name": "calculate_triangle_area", "description": "Area of a triangle from its base and height."},
    {"name": "convert_currency", "description": "Convert an amount of money from one currency to another."},
    {"name": "lookup_isbn", "description": "Find a book from its ISBN code."},
    {"name": "search_books", "description": "Search books in the library catalogue by title or author."},
]


def user(text):
    return [{"role": "user", "content": text}]


def words_of(cards, k1=1.2, b=0.3):
    registry = load_cards(cards)
    texts = card_texts(registry)
    return [t.name for t in registry], WordIndex(texts, len(registry.names), k1, b)


def test_plain_words_split_names_and_fold_accents():
    assert plain_words("getWeather in Zürich") == "get weather in zurich"
    assert plain_words("math.factorial") == "math factorial"


def test_a_rare_shared_word_ranks_its_card_first():
    names, index = words_of(CARDS)
    scores = index.tool_scores(["I have the ISBN 978-0141439518, which book is it?"])[0]
    assert names[int(np.argmax(scores))] == "lookup_isbn"
    assert scores.max() == pytest.approx(1.0) and scores.min() >= 0.0


def test_a_name_written_as_code_matches_its_card():
    names, index = words_of(CARDS)
    scores = index.tool_scores(["call convertCurrency for 10 euros"])[0]
    assert names[int(np.argmax(scores))] == "convert_currency"


def test_no_shared_word_scores_zero():
    _, index = words_of(CARDS)
    assert not index.tool_scores(["zzz qqq"]).any()


def test_empty_registry_has_no_word_signal():
    _, index = words_of([])
    assert index.tool_scores(["hello there"]).shape == (1, 0)


def test_bare_cards_order_candidates_by_words_but_select_the_same(factory):
    router = factory.router(load_cards(CARDS))
    assert router.classifier is None and router.words is not None
    wordy = router.tuned({"WORD_WEIGHT": 5.0})
    plain = router.tuned({"WORD_WEIGHT": 0.0, "CLAUSE_ALIGN": 1.0, "CLAUSE_PENALTY": 0.0})
    for message in ("Which novel has ISBN 9780141439518?", "What's the area of a triangle with base 6 and height 4?",
                    "Convert 20 dollars to yen and also tell me the weather in Lima", "Who painted the Mona Lisa?"):
        ev = router.measure(user(message))
        assert set(wordy.decide(ev).selected) == set(plain.decide(ev).selected) == set(router.decide(ev).selected)
    decision = wordy.select(user("Which novel has ISBN 9780141439518?"))
    assert decision.candidates[0].name == "lookup_isbn"
    assert decision.candidates[0].signals["words"] == pytest.approx(1.0)


def test_classifier_registries_ignore_word_settings(router):
    assert router.classifier is not None and router.words is None
    other = router.tuned({"WORD_WEIGHT": 5.0, "CLAUSE_ALIGN": 0.0, "CLAUSE_PENALTY": 1.0})
    for message in ("Is it raining in Oslo?", "What's the forecast for Madrid, and what time is it there now?",
                    "list the Lidl receipts on my card"):
        ev = router.measure(user(message))
        assert ev.words is None
        before, after = router.decide(ev), other.decide(ev)
        assert before.selected == after.selected
        assert [c.name for c in before.candidates] == [c.name for c in after.candidates]
        assert before.candidates[0].signals["words"] is None


def test_scores_are_the_binary_bag_of_words_times_the_bm25_weights():
    from funes.selection.bm25 import _bm25_weights
    from funes.selection.index import group_max

    registry = load_cards(CARDS)
    texts = card_texts(registry)
    index = WordIndex(texts, len(registry.names), 1.2, 0.3)
    queries = ["the weather weather in Zürich", "book by ISBN or title", "nothing here qq", "convert money, money!"]
    present = index._vectorizer.transform(queries)
    present.data[:] = 1.0
    weights = _bm25_weights(index._vectorizer.transform(texts.texts), 1.2, 0.3)
    raw = group_max((present @ weights.T).toarray(), texts.owner, len(registry.names), fill=0.0)
    expected = raw / np.maximum(raw.max(axis=1, keepdims=True), 1e-30)
    np.testing.assert_allclose(index.tool_scores(queries), expected, rtol=1e-5, atol=1e-7)
    assert index.tool_scores(queries)[2].max() == 0.0  # no shared word: no score
