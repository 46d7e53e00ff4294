"""The Jaipur trip planner pack: place search, day-by-day itineraries, city guidance and clarifying questions.

Places come from an OpenStreetMap extract (`import_pois`), guidance from Markdown guide text (`import_guide`);
`load_sample` fills both from the project's own sample files when the tables are empty.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from funes.errors import ToolError
from funes.tools.context import ImportReport, ToolContext
from funes.packs.trip.itinerary import schedule
from funes.tools.loaders import tool
from funes.packs.trip.catalog import BUDGETS, INTERESTS, labels, resolve_interest
from funes.packs.trip.data import count_rows, find_poi, guide_chunks, import_pois, metadata, pois, query_pois
from funes.packs.trip.guide import import_guide, retrieve
from funes.packs.trip.osm import haversine_km
from funes.packs.trip.sample import GUIDE_SOURCE, write_sample

__all__ = ["Pack", "metadata", "write_sample", "load_sample", "import_pois", "import_guide"]

MAX_RESULTS = 100   # most places one search returns
MAX_TOP_K = 10      # most guide passages one retrieval returns
# The longest visit a pace leaves room for: a packed day has no slot for a three-hour theme park.
PACE_MAX_VISIT_MINUTES = {"relaxed": None, "moderate": 180, "packed": 120}
CONSTRAINTS = ("budget", "pace", "indoor_only", "accessibility")
_EXAMPLE_KINDS = "fort, palace, museum, temple, market, bazaar, restaurant, cafe, street food, garden, viewpoint"


class Pack:
    """Handlers of the trip cards, over the pack's tables and the sentence encoder."""

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx
        self.center = tuple(ctx.settings["TRIP_CENTER"])

    @tool(name="search_pois", cache_ttl="POI_CACHE_TTL")
    def search_pois(self, interests: list[str], constraints: dict | None = None,
                    max_results: int = 20) -> list[dict]:
        """Find stored places matching the interests and constraints, most relevant then nearest first."""
        wanted = resolve_interests(interests)
        filters = constraint_filters(constraints)
        if isinstance(max_results, bool) or not isinstance(max_results, int) or not 1 <= max_results <= MAX_RESULTS:
            raise ToolError(f"max_results must be a whole number from 1 to {MAX_RESULTS}, got {max_results!r}")
        if count_rows(self.ctx.engine, pois) == 0:
            raise ToolError("no places are stored yet; import an OpenStreetMap extract or the sample data first")
        scored = []
        for row in query_pois(self.ctx.engine, **filters):
            have = labels(row["category"], row["interests"])
            relevance = sum(1 for want in wanted if want & have)
            if relevance:
                place = self.place(row)
                scored.append((-relevance, place["distance_km"], place["name"], place))
        scored.sort(key=lambda item: item[:3])
        return [place for *_, place in scored[:max_results]]

    @tool(name="build_itinerary")
    def build_itinerary(self, candidate_pois: list[dict], duration_days: int, pace: str,
                        start_time: str = "09:00") -> dict:
        """Arrange places into morning, afternoon and evening stops over 1-7 days with travel times."""
        if not isinstance(candidate_pois, list):
            raise ToolError("candidate_pois must be a list of the place objects search_pois returned")
        settings = self.ctx.settings
        return schedule([self.complete(poi) for poi in candidate_pois], duration_days, pace, start_time,
                        home=self.center, speed_kmh=float(settings["TRIP_SPEED_KMH"]),
                        buffer_minutes=int(settings["TRIP_BUFFER_MINUTES"]))

    @tool(name="retrieve_city_guidance", cache_ttl="GUIDE_CACHE_TTL")
    def retrieve_city_guidance(self, query: str, top_k: int = 3) -> list[dict]:
        """Return the guide passages closest to the query, with source, URL, section and score."""
        if not isinstance(query, str) or not query.strip():
            raise ToolError("query must be a non-empty question or topic about Jaipur")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise ToolError(f"top_k must be a whole number from 1 to {MAX_TOP_K}, got {top_k!r}")
        hits = retrieve(self.ctx.engine, self.ctx.embed, query.strip(), top_k)
        if not hits:
            raise ToolError("no city guide text is stored yet; import a guide or the sample data first")
        return hits

    @tool(name="ask_clarifying_question")
    def ask_clarifying_question(self, question: str, context: str | None = None) -> str:
        """Return the question to put to the user; the turn ends with it."""
        if not isinstance(question, str) or not question.strip():
            raise ToolError("question must be the non-empty text to ask the user")
        return question.strip()

    def place(self, row: dict) -> dict:
        """The public form of a stored place, with its distance from the trip centre."""
        return {"id": row["id"], "name": row["name"], "location": {"lat": row["lat"], "lon": row["lon"]},
                "category": row["category"], "visit_duration_minutes": row["visit_minutes"],
                "distance_km": round(haversine_km(*self.center, row["lat"], row["lon"]), 2),
                "source": row["source"], "source_url": row["source_url"]}

    def complete(self, poi: Any) -> Any:
        """Fill a place given only by id or name (no location or visit length) from the stored places."""
        if not isinstance(poi, dict) or (isinstance(poi.get("location"), dict) and poi.get("visit_duration_minutes")):
            return poi
        row = find_poi(self.ctx.engine, poi.get("id"), poi.get("name"))
        if row is None:
            return poi
        full = self.place(row)
        return {**full, **poi, "location": full["location"], "visit_duration_minutes": full["visit_duration_minutes"]}


def resolve_interests(interests: Any) -> list[set[str]]:
    """The label sets of the user's interests; unknown ones are an error listing the known ones."""
    terms = [interests] if isinstance(interests, str) else interests
    if not isinstance(terms, list) or not terms or not all(isinstance(t, str) and t.strip() for t in terms):
        raise ToolError(f"interests must be a non-empty list of words such as {', '.join(INTERESTS[:5])}")
    resolved = {term: resolve_interest(term) for term in terms}
    unknown = [term for term, found in resolved.items() if found is None]
    if unknown:
        raise ToolError(f"unknown interest(s): {', '.join(map(repr, unknown))}; known interests are "
                        f"{', '.join(INTERESTS)}, or a kind of place ({_EXAMPLE_KINDS})")
    return list(resolved.values())


def constraint_filters(constraints: Any) -> dict:
    """Query filters for the constraints object; budget is a ceiling (mid-range includes budget places)."""
    if constraints is None:
        return {}
    if not isinstance(constraints, dict):
        raise ToolError(f"constraints must be an object with any of {', '.join(CONSTRAINTS)}")
    unknown = sorted(set(constraints) - set(CONSTRAINTS))
    if unknown:
        raise ToolError(f"unknown constraint(s) {', '.join(unknown)}; use {', '.join(CONSTRAINTS)}")
    budget, pace = constraints.get("budget"), constraints.get("pace")
    if budget is not None and budget not in BUDGETS:
        raise ToolError(f"budget must be one of {', '.join(BUDGETS)}, got {budget!r}")
    if pace is not None and pace not in PACE_MAX_VISIT_MINUTES:
        raise ToolError(f"pace must be one of {', '.join(PACE_MAX_VISIT_MINUTES)}, got {pace!r}")
    return {"budgets": list(BUDGETS[:BUDGETS.index(budget) + 1]) if budget else None,
            "indoor_only": bool(constraints.get("indoor_only")),
            "accessible_only": bool(constraints.get("accessibility")),
            "max_minutes": PACE_MAX_VISIT_MINUTES[pace] if pace else None}


def load_sample(ctx: ToolContext) -> list[ImportReport]:
    """Write the sample files into DATA_DIR/sample and import each one whose table is still empty."""
    pois_path, guide_path = write_sample(Path(ctx.data_dir) / "sample")
    reports = []
    if count_rows(ctx.engine, pois) == 0:
        reports.append(import_pois(ctx, pois_path))
    if count_rows(ctx.engine, guide_chunks) == 0:
        reports.append(import_guide(ctx, guide_path, source=GUIDE_SOURCE))
    return reports
