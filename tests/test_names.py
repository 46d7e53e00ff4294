"""Loose tool names, from users and from LLMs."""
import pytest

from funes.selection.mentions import asked_about, mentions
from funes.tools.names import NameResolver, humanize

NAMES = ["get_weather", "get_datetime", "get_spending_summary", "search_transactions", "build_itinerary",
         "get_statistics", "respond"]


@pytest.fixture
def resolver():
    return NameResolver(NAMES, fuzzy_cutoff=86)


@pytest.mark.parametrize("given, expected", [
    ("get_weather", "get_weather"),
    ("GET_WEATHER", "get_weather"),
    ("weather", "get_weather"),
    ("get_build_itinerary", "build_itinerary"),
    ("getSpendingSummary", "get_spending_summary"),
    ("spending-summary", "get_spending_summary"),
    ("search transactions", "search_transactions"),
    ("get_wether", "get_weather"),
    ("serch_transactions", "search_transactions"),
    ("get_stock_price", None),
    ("delete_everything", None),
    ("", None),
])
def test_resolve(resolver, given, expected):
    assert resolver.resolve(given) == expected


@pytest.mark.parametrize("message, expected", [
    ("run get weather for Oslo", {"get_weather"}),
    ("getStatistics please", {"get_statistics"}),
    ("use the spending-summary tool", {"get_spending_summary"}),
    ("call build_itinerary with 3 days", {"build_itinerary"}),
    ("use the respond tool to wrap up", {"respond"}),
    ("please run the serch transactions tool", {"search_transactions"}),
    ("What does a get_weather function return?", set()),
    ("How's the weather in Oslo?", set()),
    ("I need to respond to my landlord", set()),
])
def test_mentions(resolver, message, expected):
    assert set(mentions(resolver, message)) == expected


@pytest.mark.parametrize("message, expected", [
    ("Help me find a hotel in Paris, please", set()),
    ("please help me with my taxes, use whatever works", set()),
    ("use help_me for this please", {"help_me"}),
    ("run help me", {"help_me"}),
    ("try the help me tool", {"help_me"}),
])
def test_common_word_names_need_to_read_as_names(message, expected):
    resolver = NameResolver(["help_me", "find_hotel"], fuzzy_cutoff=86)
    assert set(mentions(resolver, message)) == expected


def test_humanize():
    assert humanize("getWeather") == humanize("get-weather") == humanize("get_weather") == "get weather"
    assert humanize("requests.get") == "requests get"


@pytest.mark.parametrize("message, expected", [
    ("what arguments does find_similar_videos take, and what does it return?", True),
    ("How does getStatistics work?", True),
    ("What does a get_weather function usually return in a weather API?", True),
    ("call get_weather for Oslo and tell me what it returns", False),
    ("what does the weather look like in Oslo?", False),
    ("How does my data_random_forest model work?", False),
    ("use the app info tool to explain how the transaction search works", False),
])
def test_asked_about(message, expected):
    resolver = NameResolver(NAMES + ["find_similar_videos", "random_forest.train"], fuzzy_cutoff=86)
    assert asked_about(resolver, message) is expected
