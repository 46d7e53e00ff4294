"""Tool cards: built-in packs, decorated functions, JSON files, and their errors."""
import json
import os
from typing import Literal

import pytest

from funes.errors import RegistryError, ToolNotRunnable
from funes.tools.loaders import from_function, load_cards, load_file, load_packs, parse_docstring, tool
from funes.tools.registry import Registry, Tool
from tests.conftest import SHARED_EVAL

SEED_TOOLS = {
    "finance": {"search_transactions", "analyze_by_category", "get_spending_summary"},
    "trip": {"search_pois", "build_itinerary", "retrieve_city_guidance", "ask_clarifying_question"},
    "assistant": {"get_weather", "get_datetime"},
    "watch_history": {"get_recent_videos", "get_video_details", "get_statistics", "get_channel_info",
                      "search_videos_by_topic", "find_similar_videos"},
    "knowledge": {"search_online", "get_application_information", "respond"},
}


def test_builtin_packs_hold_the_eighteen_seed_tools(settings):
    registry = load_packs(settings["PACKS"])
    assert len(registry) == 18
    for pack, names in SEED_TOOLS.items():
        assert {t.name for t in registry if t.pack == pack} == names
    for card in registry:
        assert len(card.examples) >= 30 and card.negatives and card.keywords
        assert not card.runnable


def test_builtin_cards_speak_the_users_languages(settings):
    texts = " ".join(e for t in load_packs(settings["PACKS"]) for e in t.examples).lower()
    for word in ("¿", "thời tiết", "kitna", "kya"):
        assert word in texts


@pytest.mark.skipif(not os.path.exists(os.path.join(SHARED_EVAL, "seed_tools.jsonl")), reason="no shared eval data")
def test_builtin_parameters_match_the_seed_registry(settings):
    seed = {json.loads(l)["name"]: json.loads(l) for l in open(os.path.join(SHARED_EVAL, "seed_tools.jsonl"))}
    for card in load_packs(settings["PACKS"]):
        assert card.parameters == seed[card.name]["parameters"]


@pytest.mark.skipif(not os.path.exists(os.path.join(SHARED_EVAL, "seed_dev.jsonl")), reason="no shared eval data")
def test_no_dev_message_is_copied_into_a_card(settings):
    dev = {json.loads(l)["messages"][-1]["content"].strip().lower() for l in open(os.path.join(SHARED_EVAL, "seed_dev.jsonl"))}
    texts = {e.strip().lower() for t in load_packs(settings["PACKS"]) for e in (*t.examples, *t.negatives)}
    assert not texts & dev


def test_card_without_handler_says_so():
    card = Tool(name="client_side", description="Runs in the client.")
    with pytest.raises(ToolNotRunnable, match="client_side"):
        card.run()


@tool(pack="demo", examples=["convert 3 miles"])
def convert_distance(value: float, unit: Literal["km", "mi"] = "km", note: str | None = None) -> str:
    """Convert a distance between kilometres and miles.

    Args:
        value: The distance to convert.
        unit (str): Unit of `value`;
            km or mi.
        note: Free text kept with the result.

    Returns:
        The converted distance.
    """
    return f"{value} {unit}"


def test_card_from_decorated_function():
    card = from_function(convert_distance)
    assert card.name == "convert_distance" and card.pack == "demo"
    assert card.description == "Convert a distance between kilometres and miles."
    assert card.examples == ("convert 3 miles",)
    props = card.parameters["properties"]
    assert props["value"] == {"type": "number", "description": "The distance to convert."}
    assert props["unit"] == {"type": "string", "enum": ["km", "mi"], "default": "km",
                             "description": "Unit of `value`; km or mi."}
    assert props["note"]["type"] == "string"
    assert card.parameters["required"] == ["value"]
    assert card.run(value=2) == "2 km"


def test_parse_docstring_stops_at_returns():
    summary, args = parse_docstring(convert_distance.__doc__)
    assert set(args) == {"value", "unit", "note"}
    assert "converted" not in " ".join(args.values())


def test_json_and_jsonl_files_load_unchanged(tmp_path):
    cards = [{"name": "a_tool", "description": "A.", "parameters": {"type": "object", "properties": {}}, "pack": "x"},
             {"name": "b_tool", "description": "B.", "parameters": {"type": "object", "properties": {}}, "pack": "x"}]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(c) for c in cards) + "\n")
    (tmp_path / "t.json").write_text(json.dumps(cards, indent=2))
    assert load_file(tmp_path / "t.jsonl").names == load_file(tmp_path / "t.json").names == ["a_tool", "b_tool"]


@pytest.mark.parametrize("text, suffix, message", [
    ('{"name": "a", "description": "A"}\n{"name": "a", "description": "A2"}\n', "jsonl", r"t.jsonl:2: duplicate tool 'a'"),
    ('{"name": "a", "description": "A"}\n{"name": \n', "jsonl", r"t.jsonl:2: invalid JSON"),
    ('[\n  {"name": "a", "description": "A"},\n  {"description": "no name"}\n]', "json", r"t.json:3: card needs"),
    ('[\n  {"name": "a", "description": "A", "examples": "one"}\n]', "json", r"t.json:2: card 'a': 'examples'"),
    ('[{"name": "a", "description": "A", "colour": "red"}]', "json", r"unknown card field"),
    ('[{"name": "a", "description": "A", "examples": ["ok", " "]}]', "json", r"'examples' must be a list of non-empty"),
    ('[{"name": "a", "description": "A", "pack": 5}]', "json", r"card 'a': 'pack' must be a string"),
    ('[{"name": "' + "n" * 129 + '", "description": "A"}]', "json", r"'name' is longer than 128 characters"),
    ('{"name": "a", "description": "A", "parameters": {"type": "object", "properties": []}}\n', "jsonl",
     r"t.jsonl:1: card 'a': invalid JSON Schema at properties: \[\] is not of type 'object'"),
    ('{"name": "a", "description": "A", "parameters": {"properties": {"city": "text"}}}\n', "jsonl",
     r"t.jsonl:1: card 'a': invalid JSON Schema at properties/city: 'text' is not of type"),
])
def test_malformed_cards_fail_with_file_and_line(tmp_path, text, suffix, message):
    path = tmp_path / f"t.{suffix}"
    path.write_text(text)
    with pytest.raises(RegistryError, match=message):
        load_file(path)


def test_missing_file_and_unknown_pack():
    with pytest.raises(RegistryError, match="not found"):
        load_file("/nonexistent/tools.jsonl")
    with pytest.raises(RegistryError, match="unknown pack 'nope'"):
        load_packs(["nope"])


def test_ids_keep_same_named_tools_apart():
    registry = load_cards([{"name": "area", "description": "circle", "id": "t1"},
                           {"name": "area", "description": "square", "id": "t2"}])
    assert len(registry) == 2 and registry.names == ["area", "area"]
    with pytest.raises(RegistryError, match="duplicate"):
        Registry([Tool("x", "1"), Tool("x", "2")])


def test_bind_attaches_a_handler():
    registry = Registry([Tool("ping", "Reply pong.")])
    registry.bind("ping", lambda: "pong")
    assert registry["ping"].run() == "pong"
    with pytest.raises(RegistryError):
        registry.bind("missing", lambda: None)
