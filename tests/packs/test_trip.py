"""The Jaipur trip pack: importing OSM extracts and guide text, searching places, scheduling days, retrieval."""
import json
from itertools import pairwise

import pytest
from sqlalchemy import create_engine

from funes.errors import BadRequest, ToolError
from funes.tools.context import ToolContext, bind_handlers
from funes.tools.loaders import load_packs
from funes.tools.runner import ToolRunner
from funes.packs.trip import Pack, import_guide, import_pois, load_sample, metadata, write_sample
from funes.packs.trip.osm import haversine_km

CENTER = (26.9124, 75.7873)

GEOJSON = {"type": "FeatureCollection", "features": [
    {"type": "Feature", "id": "node/1", "properties": {"name": "Hawa Mahal", "tourism": "attraction",
     "historic": "palace", "fee": "yes"}, "geometry": {"type": "Point", "coordinates": [75.8267, 26.9239]}},
    {"type": "Feature", "properties": {"@id": "way/2", "name": "Albert Hall Museum", "tourism": "museum",
     "wheelchair": "yes"}, "geometry": {"type": "Polygon", "coordinates": [[
         [75.8190, 26.9110], [75.8200, 26.9110], [75.8200, 26.9120], [75.8190, 26.9120], [75.8190, 26.9110]]]}},
    {"type": "Feature", "id": "node/3", "properties": {"amenity": "cafe"},
     "geometry": {"type": "Point", "coordinates": [75.81, 26.91]}},
    {"type": "Feature", "id": "node/4", "properties": {"name": "Ajmeri Gate stop", "highway": "bus_stop"},
     "geometry": {"type": "Point", "coordinates": [75.81, 26.91]}},
    {"type": "Feature", "id": "node/5", "properties": {"name": "Moon Museum", "tourism": "museum"},
     "geometry": {"type": "Point", "coordinates": [75.81, 126.91]}},
    {"type": "Feature", "id": "node/6", "properties": {"name": "Pink Pearl Hotel", "tourism": "hotel"},
     "geometry": {"type": "Point", "coordinates": [75.80, 26.92]}},
]}

OSM_XML = """<?xml version='1.0' encoding='UTF-8'?>
<osm version="0.6" generator="test">
  <node id="1" lat="26.9239" lon="75.8267"><tag k="name" v="Hawa Mahal"/><tag k="historic" v="palace"/></node>
  <node id="10" lat="26.9110" lon="75.8190"/>
  <node id="11" lat="26.9110" lon="75.8200"/>
  <node id="12" lat="26.9120" lon="75.8200"/>
  <node id="13" lat="26.9120" lon="75.8190"/>
  <node id="2" lat="26.92" lon="75.82"><tag k="amenity" v="cafe"/></node>
  <node id="3" lat="26.92" lon="75.82"><tag k="highway" v="bus_stop"/><tag k="name" v="MI Road"/></node>
  <node id="4" lat="95.0" lon="75.82"><tag k="name" v="Nowhere Museum"/><tag k="tourism" v="museum"/></node>
  <way id="20"><nd ref="10"/><nd ref="11"/><nd ref="12"/><nd ref="13"/><nd ref="10"/>
    <tag k="name" v="Albert Hall Museum"/><tag k="tourism" v="museum"/><tag k="wheelchair" v="yes"/></way>
  <way id="21"><nd ref="99"/><tag k="name" v="Lost Garden"/><tag k="leisure" v="garden"/></way>
  <relation id="30"><member type="way" ref="20" role="outer"/>
    <tag k="name" v="Big Park"/><tag k="leisure" v="park"/></relation>
</osm>
"""


@pytest.fixture
def ctx(database_url, tmp_path, text_encoder, settings):
    engine = create_engine(database_url)
    metadata.create_all(engine)
    return ToolContext(engine, text_encoder.embed, tmp_path, settings)


@pytest.fixture
def sample(ctx):
    """A pack over the project's sample Jaipur places and guide."""
    load_sample(ctx)
    return Pack(ctx)


def place(name, lat, lon, minutes, ident=None):
    return {"id": ident or name, "name": name, "location": {"lat": lat, "lon": lon},
            "visit_duration_minutes": minutes}


def grid(n, minutes=60):
    """n places a few hundred metres apart around the centre."""
    return [place(f"Stop {i}", CENTER[0] + 0.003 * (i % 5), CENTER[1] + 0.003 * (i // 5), minutes) for i in range(n)]


def minutes_of(hhmm):
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


# --- importing places ---

def test_geojson_import_counts_places_and_says_why_others_were_skipped(ctx, tmp_path):
    path = tmp_path / "jaipur.geojson"
    path.write_text(json.dumps(GEOJSON))
    report = import_pois(ctx, path)
    assert report.imported == 2
    assert dict(report.skipped) == {
        3: "node/3: no name (cafe)",
        4: "node/4: unsupported tags (highway=bus_stop)",
        5: "node/5: bad coordinates (Point geometry)",
        6: "node/6: unsupported tags (tourism=hotel)",
    }
    found = {p["name"]: p for p in Pack(ctx).search_pois(["history", "museums"])}
    assert found["Hawa Mahal"]["source_url"] == "https://www.openstreetmap.org/node/1"
    assert found["Albert Hall Museum"]["source_url"] == "https://www.openstreetmap.org/way/2"
    assert found["Albert Hall Museum"]["location"] == {"lat": 26.9115, "lon": 75.8195}  # the polygon's centroid
    assert found["Albert Hall Museum"]["source"] == "openstreetmap"


def test_osm_xml_import_places_ways_at_their_centroid(ctx, tmp_path):
    path = tmp_path / "jaipur.osm"
    path.write_text(OSM_XML)
    report = import_pois(ctx, path)
    assert report.imported == 2
    reasons = sorted(why for _, why in report.skipped)
    assert reasons == ["node/2: no name (cafe)",
                       "node/3: unsupported tags (highway=bus_stop)",
                       "node/4: bad coordinates (95.0, 75.82)",
                       "relation/30: relations are not supported (only nodes and ways)",
                       "way/21: bad coordinates (none of the way's nodes are in the extract)"]
    museum, = Pack(ctx).search_pois(["museum"])
    assert museum["id"] == "way/20" and museum["source_url"].endswith("/way/20")
    assert museum["location"] == {"lat": 26.9115, "lon": 75.8195}
    assert museum["visit_duration_minutes"] == 90


def test_reimporting_replaces_places_instead_of_duplicating(ctx, tmp_path):
    path = tmp_path / "jaipur.geojson"
    path.write_text(json.dumps(GEOJSON))
    import_pois(ctx, path)
    import_pois(ctx, path)
    assert len(Pack(ctx).search_pois(["history", "museum"])) == 2


def test_unreadable_files_are_clear_errors(ctx, tmp_path):
    (tmp_path / "broken.osm").write_text("<osm><node id='1'")
    (tmp_path / "places.csv").write_text("name,lat,lon\n")
    with pytest.raises(BadRequest, match="not valid OSM XML"):
        import_pois(ctx, tmp_path / "broken.osm")
    with pytest.raises(BadRequest, match="unsupported file type"):
        import_pois(ctx, tmp_path / "places.csv")
    with pytest.raises(BadRequest, match="not found"):
        import_pois(ctx, tmp_path / "missing.geojson")


def test_sample_data_loads_once(ctx):
    first = load_sample(ctx)
    assert [r.imported > 25 if r.path.endswith(".geojson") else r.imported > 5 for r in first] == [True, True]
    assert all(not r.skipped for r in first)
    assert load_sample(ctx) == []


# --- searching places ---

def test_indoor_only_returns_only_indoor_places(sample):
    results = sample.search_pois(["history", "art", "shopping", "food"], {"indoor_only": True}, max_results=100)
    categories = {p["category"] for p in results}
    assert {"museum", "restaurant", "mall"} <= categories
    assert categories <= {"museum", "gallery", "restaurant", "cafe", "bar", "shop", "craft_shop", "mall"}
    assert "Amber Fort" not in {p["name"] for p in results}


def test_results_rank_by_relevance_then_distance(sample):
    results = sample.search_pois(["history", "art"], max_results=100)
    assert results[0]["category"] == "museum"  # matches both interests
    for p in results:
        assert p["distance_km"] == round(haversine_km(*CENTER, p["location"]["lat"], p["location"]["lon"]), 2)
    history_only = [p["distance_km"] for p in results if p["category"] in ("fort", "palace", "monument")]
    assert history_only == sorted(history_only)
    assert set(results[0]) == {"id", "name", "location", "category", "visit_duration_minutes", "distance_km",
                               "source", "source_url"}


def test_accessibility_and_budget_constraints_filter(sample):
    accessible = {p["name"] for p in sample.search_pois(["history"], {"accessibility": True})}
    assert accessible == {"Albert Hall Museum", "Jantar Mantar"}
    cheap = {p["name"] for p in sample.search_pois(["food"], {"budget": "budget"})}
    assert "Lassiwala" in cheap and "Suvarna Mahal" not in cheap
    upscale = {p["name"] for p in sample.search_pois(["food"], {"budget": "luxury"})}
    assert "Suvarna Mahal" in upscale
    packed = {p["category"] for p in sample.search_pois(["family"], {"pace": "packed"})}
    assert "cinema" not in packed  # a three-hour film does not fit a packed day


def test_interests_are_matched_tolerantly(sample):
    assert {p["name"] for p in sample.search_pois(["Forts"])} == {"Amber Fort", "Jaigarh Fort", "Nahargarh Fort"}
    assert sample.search_pois(["histroy"]) == sample.search_pois(["history"])
    assert {p["category"] for p in sample.search_pois(["street food"])} <= {"street_food", "sweet_shop"}
    assert len(sample.search_pois(["history"], max_results=3)) == 3


def test_unknown_interest_lists_the_known_ones(sample):
    with pytest.raises(ToolError, match=r"unknown interest\(s\): 'quantum physics'.*history, culture"):
        sample.search_pois(["history", "quantum physics"])
    with pytest.raises(ToolError, match="unknown constraint"):
        sample.search_pois(["history"], {"kid_friendly": True})


def test_search_before_any_import_says_what_to_do(ctx):
    with pytest.raises(ToolError, match="no places are stored yet"):
        Pack(ctx).search_pois(["history"])


# --- itineraries ---

def test_itinerary_times_visits_buffers_and_travel(ctx):
    north = 0.045  # degrees of latitude: 5.0 km, 17 minutes at 18 km/h
    pois = [place("A", *CENTER, 90), place("B", CENTER[0] + north, CENTER[1], 60),
            place("C", CENTER[0] + 2 * north, CENTER[1], 45)]
    plan = Pack(ctx).build_itinerary(pois, 1, "packed")
    timing = [(a["time_period"], a["start_time"], a["end_time"], a["travel_time_minutes"], a["poi"]["name"])
              for a in plan["days"][0]["activities"]]
    assert timing == [("morning", "09:00", "10:30", 0, "A"),     # 90-minute visit
                      ("morning", "11:02", "12:02", 17, "B"),    # 10:30 + 15 buffer + 17 travel
                      ("afternoon", "12:34", "13:19", 17, "C")]  # 12:02 + 15 + 17
    assert plan["unscheduled"] == []


@pytest.mark.parametrize("pace, per_day", [("relaxed", 3), ("moderate", 4), ("packed", 5)])
def test_pace_sets_stops_per_day(ctx, pace, per_day):
    plan = Pack(ctx).build_itinerary(grid(20), 3, pace)
    assert [len(d["activities"]) for d in plan["days"]] == [per_day] * 3
    assert len(plan["unscheduled"]) == 20 - 3 * per_day
    assert "fits" in plan["unscheduled"][0]["reason"]


def test_too_few_places_are_spread_over_the_days(ctx):
    plan = Pack(ctx).build_itinerary(grid(7), 2, "moderate")
    assert [len(d["activities"]) for d in plan["days"]] == [4, 3]
    assert [d["day"] for d in plan["days"]] == [1, 2]


def test_no_overlaps_and_nothing_after_ten_pm(ctx):
    plan = Pack(ctx).build_itinerary(grid(40, minutes=120), 7, "packed", start_time="08:30")
    for day in plan["days"]:
        acts = day["activities"]
        assert acts[0]["start_time"] == "08:30"
        for a in acts:
            assert minutes_of(a["end_time"]) - minutes_of(a["start_time"]) == 120
            assert minutes_of(a["end_time"]) <= 22 * 60
        for before, after in pairwise(acts):
            assert minutes_of(after["start_time"]) == (minutes_of(before["end_time"]) + 15
                                                       + after["travel_time_minutes"])
    scheduled = [a["poi"]["name"] for d in plan["days"] for a in d["activities"]]
    assert len(scheduled) == len(set(scheduled)) == 35


def test_stops_that_would_run_past_ten_pm_are_unscheduled(ctx):
    plan = Pack(ctx).build_itinerary(grid(2, minutes=120), 1, "relaxed", start_time="18:00")
    assert [a["start_time"] for a in plan["days"][0]["activities"]] == ["18:00"]
    assert plan["days"][0]["activities"][0]["time_period"] == "evening"
    assert plan["unscheduled"][0]["reason"] == "would end after 22:00 on day 1"


def test_nearby_places_share_a_day(ctx):
    old_city = [place(f"Old city {i}", 26.924 + 0.001 * i, 75.826, 60) for i in range(3)]
    amer = [place(f"Amer {i}", 26.985 + 0.001 * i, 75.851, 60) for i in range(3)]
    plan = Pack(ctx).build_itinerary([old_city[0], amer[0], old_city[1], amer[1], old_city[2], amer[2]],
                                     2, "relaxed")
    days = [{a["poi"]["name"].split()[0] for a in d["activities"]} for d in plan["days"]]
    assert sorted(map(sorted, days)) == [["Amer"], ["Old"]]


def test_places_given_by_id_are_completed_from_the_database(sample):
    hawa = sample.search_pois(["palace"])[0]
    plan = sample.build_itinerary([{"id": hawa["id"], "name": hawa["name"]}], 1, "relaxed")
    assert plan["days"][0]["activities"][0]["poi"]["location"] == hawa["location"]


@pytest.mark.parametrize("args, message", [
    ({"duration_days": 8}, "duration_days must be a whole number from 1 to 7"),
    ({"duration_days": 0}, "duration_days must be"),
    ({"pace": "leisurely"}, "pace must be one of relaxed, moderate, packed"),
    ({"start_time": "25:00"}, "not a time of day"),
    ({"start_time": "22:30"}, "leaves no time"),
    ({"candidate_pois": []}, "call search_pois first"),
    ({"candidate_pois": [{"name": "Hawa Mahal"}]}, r"candidate_pois\[0\] \(Hawa Mahal\) needs location"),
])
def test_bad_itinerary_arguments_are_tool_errors(ctx, args, message):
    call = {"candidate_pois": grid(3), "duration_days": 1, "pace": "relaxed", **args}
    with pytest.raises(ToolError, match=message):
        Pack(ctx).build_itinerary(**call)


def test_start_time_accepts_common_spellings(ctx):
    for spelled in ("8am", "8:00", "08.00"):
        plan = Pack(ctx).build_itinerary(grid(1), 1, "relaxed", start_time=spelled)
        assert plan["days"][0]["activities"][0]["start_time"] == "08:00"


# --- city guidance ---

def test_dress_code_question_retrieves_etiquette_with_its_citation(ctx, tmp_path):
    _, guide = write_sample(tmp_path / "sample")
    report = import_guide(ctx, guide, source="Jaipur notes", url="https://example.org/jaipur")
    assert report.imported >= 6 and not report.skipped
    hits = Pack(ctx).retrieve_city_guidance("Is there a dress code for visiting temples?")
    assert len(hits) == 3
    assert hits[0]["section"] == "Etiquette" and hits[0]["section_anchor"] == "etiquette"
    assert hits[0]["source"] == "Jaipur notes" and hits[0]["url"] == "https://example.org/jaipur"
    assert "shoulders" in hits[0]["text"]
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


@pytest.mark.parametrize("question, section", [
    ("Why is Jaipur called the Pink City?", "History"),
    ("Is Jaipur safe for a woman travelling alone?", "Safety"),
    ("When is the best season to visit Jaipur?", "Best time to visit"),
    ("How do I get to Amber Fort from the old city?", "Getting around"),
    ("Which local dishes should I try?", "Food"),
])
def test_guidance_finds_the_section_that_answers(sample, question, section):
    assert sample.retrieve_city_guidance(question, top_k=1)[0]["section"] == section


def test_guide_is_split_by_section_then_size(ctx, tmp_path):
    long_section = "\n\n".join(f"Paragraph {i} about the bazaars and their crafts. " * 6 for i in range(8))
    path = tmp_path / "notes.md"
    path.write_text(f"# Jaipur\n\n## Shopping tips\n\n{long_section}\n\n## Empty heading\n\n## Money\n\nCarry cash.\n")
    report = import_guide(ctx, path)
    assert report.skipped == [(7 + long_section.count("\n"), "section 'Empty heading' has no text")]
    assert report.imported > 3
    hit, = Pack(ctx).retrieve_city_guidance("Should I carry cash?", top_k=1)
    assert (hit["section"], hit["section_anchor"], hit["source"]) == ("Money", "money", "notes")
    assert hit["url"] == path.resolve().as_uri()


def test_guidance_arguments_are_checked(sample, ctx):
    with pytest.raises(ToolError, match="top_k must be"):
        sample.retrieve_city_guidance("history", top_k=0)
    with pytest.raises(ToolError, match="non-empty"):
        sample.retrieve_city_guidance("  ")


# --- the pack behind the cards ---

def test_clarifying_question_is_returned_as_plain_text(ctx):
    asked = Pack(ctx).ask_clarifying_question("How many days will you spend in Jaipur?", context="no duration")
    assert asked == "How many days will you spend in Jaipur?"


def test_cards_run_through_the_runner(sample, ctx):
    registry = load_packs(["trip"])
    bind_handlers(registry, ["trip"], ctx)
    assert all(card.runnable for card in registry)
    assert registry["search_pois"].cache_ttl == ctx.settings["POI_CACHE_TTL"]
    assert registry["retrieve_city_guidance"].cache_ttl == ctx.settings["GUIDE_CACHE_TTL"]
    assert registry["ask_clarifying_question"].ends_turn
    runner = ToolRunner(timeout_s=60)
    found = runner.run(registry["search_pois"], {"interests": ["forts"], "constraints": {"budget": "mid-range"}})
    assert found.error is None and {p["category"] for p in found.result} == {"fort"}
    plan = runner.run(registry["build_itinerary"], {"candidate_pois": found.result, "duration_days": 1,
                                                    "pace": "relaxed"})
    assert plan.error is None and len(plan.result["days"][0]["activities"]) == 3
    guide = runner.run(registry["retrieve_city_guidance"], {"query": "Is bargaining expected in the bazaars?"})
    assert guide.error is None and guide.result[0]["section"] == "Etiquette"
    asked = runner.run(registry["ask_clarifying_question"], {"question": "How many days?"})
    assert asked.result == "How many days?"


@pytest.mark.parametrize("tool, arguments, message", [
    ("search_pois", {"interests": "history"}, "interests: 'history' is not of type 'array'"),
    ("search_pois", {"interests": ["history"], "constraints": {"budget": "cheap"}}, "constraints/budget"),
    ("build_itinerary", {"candidate_pois": [], "duration_days": 8, "pace": "relaxed"}, "duration_days"),
    ("build_itinerary", {"candidate_pois": [{}], "duration_days": 2}, "'pace' is a required property"),
    ("retrieve_city_guidance", {"top_k": 2}, "'query' is a required property"),
    ("ask_clarifying_question", {"question": 5}, "question: 5 is not of type 'string'"),
])
def test_schema_invalid_arguments_are_errors_the_llm_can_read(sample, ctx, tool, arguments, message):
    registry = load_packs(["trip"])
    bind_handlers(registry, ["trip"], ctx)
    result = ToolRunner(timeout_s=60).run(registry[tool], arguments)
    assert result.result is None
    assert result.error.startswith(f"invalid arguments for {tool}") and message in result.error


def test_handler_errors_reach_the_llm_as_text(sample, ctx):
    registry = load_packs(["trip"])
    bind_handlers(registry, ["trip"], ctx)
    result = ToolRunner(timeout_s=60).run(registry["search_pois"], {"interests": ["quantum physics"]})
    assert result.error.startswith("unknown interest(s)")
