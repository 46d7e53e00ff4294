"""Day-by-day schedules: places grouped by proximity, timed with travel and buffers, within the day's hours."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from funes.errors import ToolError
from funes.packs.trip.osm import haversine_km, valid_point

PACE_STOPS = {"relaxed": (2, 3), "moderate": (3, 4), "packed": (4, 5)}  # (fewest, most) stops a day
MAX_DAYS = 7
DAY_END = 22 * 60          # minutes after midnight by which the last visit ends
PERIODS = ((12 * 60, "morning"), (17 * 60, "afternoon"), (24 * 60, "evening"))  # a stop's block by start time
MAX_VISIT_MINUTES = 600
_TIME = re.compile(r"^\s*(\d{1,2})(?:[:.](\d{2}))?\s*([ap]\.?m\.?)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Stop:
    poi: dict[str, Any]
    lat: float
    lon: float
    minutes: int


def parse_clock(text: str) -> int:
    """Minutes after midnight of `HH:MM` (also `9`, `8am`, `7:30 pm`)."""
    match = _TIME.match(str(text))
    hour, minute = (int(match.group(1)), int(match.group(2) or 0)) if match else (99, 0)
    suffix = (match.group(3) or "").lower()[:1] if match else ""
    if suffix and 1 <= hour <= 12:
        hour = hour % 12 + (12 if suffix == "p" else 0)
    if hour > 23 or minute > 59:
        raise ToolError(f"start_time {text!r} is not a time of day; use HH:MM such as '09:00'")
    if hour * 60 + minute >= DAY_END:
        raise ToolError(f"start_time {text!r} leaves no time before {clock(DAY_END)}; start earlier")
    return hour * 60 + minute


def clock(minutes: int) -> str:
    """`HH:MM` of minutes after midnight."""
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def period(minutes: int) -> str:
    """morning, afternoon or evening for a start time."""
    return next(name for end, name in PERIODS if minutes < end)


def travel_minutes(a: Stop, b: Stop, speed_kmh: float) -> int:
    """Whole minutes to go from one stop to the next at the average city speed."""
    return math.ceil(haversine_km(a.lat, a.lon, b.lat, b.lon) / speed_kmh * 60)


def to_stop(index: int, poi: Any) -> Stop:
    """Check a place object has what scheduling needs, naming what is missing."""
    if not isinstance(poi, dict):
        raise ToolError(f"candidate_pois[{index}] must be a place object as returned by search_pois")
    name = poi.get("name")
    location = poi.get("location") if isinstance(poi.get("location"), dict) else poi
    lat, lon, minutes = _number(location.get("lat")), _number(location.get("lon")), _number(
        poi.get("visit_duration_minutes"))
    missing = []
    if not isinstance(name, str) or not name.strip():
        missing.append("a name")
    if not valid_point(lat, lon):
        missing.append("location {lat, lon} in degrees")
    if minutes is None or not 1 <= minutes <= MAX_VISIT_MINUTES:
        missing.append(f"visit_duration_minutes between 1 and {MAX_VISIT_MINUTES}")
    if missing:
        label = f" ({name})" if isinstance(name, str) and name else ""
        raise ToolError(f"candidate_pois[{index}]{label} needs {', '.join(missing)}; "
                        "pass the place objects search_pois returned")
    return Stop(poi, lat, lon, math.ceil(minutes))


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def schedule(candidate_pois: list, duration_days: int, pace: str, start_time: str = "09:00", *,
                    home: tuple[float, float], speed_kmh: float, buffer_minutes: int) -> dict[str, Any]:
    """Schedule places over 1-7 days at a pace, nearest first from `home`; the rest are listed as unscheduled."""
    if isinstance(duration_days, bool) or not isinstance(duration_days, int) or not 1 <= duration_days <= MAX_DAYS:
        raise ToolError(f"duration_days must be a whole number from 1 to {MAX_DAYS}, got {duration_days!r}; "
                        f"for a longer trip plan the first {MAX_DAYS} days")
    if pace not in PACE_STOPS:
        raise ToolError(f"pace must be one of {', '.join(PACE_STOPS)}, got {pace!r}")
    start = parse_clock(start_time)
    if not candidate_pois:
        raise ToolError("candidate_pois is empty; call search_pois first and pass the places it returns")
    stops, unscheduled = _unique(candidate_pois)
    per_day = min(PACE_STOPS[pace][1], math.ceil(len(stops) / duration_days))
    chosen = stops[:per_day * duration_days]
    reason = f"a {pace} pace fits {per_day} stops a day over {duration_days} day(s)"
    unscheduled += [{"poi": s.poi, "reason": reason} for s in stops[len(chosen):]]
    days = []
    for number, group in enumerate(_split(_route(chosen, Stop({}, *home, 0)), duration_days), 1):
        activities, late = schedule_day(group, start, speed_kmh, buffer_minutes)
        days.append({"day": number, "activities": activities})
        unscheduled += [{"poi": s.poi, "reason": f"would end after {clock(DAY_END)} on day {number}"} for s in late]
    return {"days": days, "unscheduled": unscheduled}


def _unique(candidate_pois: list) -> tuple[list[Stop], list[dict]]:
    """Valid stops in the given order; a place listed twice is kept once."""
    stops, seen, repeated = [], set(), []
    for index, poi in enumerate(candidate_pois):
        stop = to_stop(index, poi)
        key = str(poi.get("id") or stop.poi["name"].strip().lower())
        if key in seen:
            repeated.append({"poi": poi, "reason": "listed more than once"})
        else:
            seen.add(key)
            stops.append(stop)
    return stops, repeated


def _route(stops: list[Stop], home: Stop) -> list[Stop]:
    """Nearest-neighbour order starting from home, so consecutive stops are close together."""
    left, route, here = list(stops), [], home
    while left:
        here = min(left, key=lambda s: haversine_km(here.lat, here.lon, s.lat, s.lon))
        left.remove(here)
        route.append(here)
    return route


def _split(route: list[Stop], days: int) -> list[list[Stop]]:
    """Cut the route into `days` consecutive runs whose sizes differ by at most one (longer runs first)."""
    size, extra = divmod(len(route), days)
    runs, at = [], 0
    for day in range(days):
        length = size + (1 if day < extra else 0)
        runs.append(route[at:at + length])
        at += length
    return runs


def schedule_day(stops: list[Stop], start: int, speed_kmh: float, buffer_minutes: int) -> tuple[list, list]:
    """Time one day's stops back to back (buffer plus travel between them); stops ending after DAY_END are left out."""
    activities, late, previous, free_at = [], [], None, start
    for stop in stops:
        travel = travel_minutes(previous, stop, speed_kmh) if previous else 0
        begin = free_at + buffer_minutes + travel if previous else start
        end = begin + stop.minutes
        if end > DAY_END:
            late.append(stop)
            continue
        activities.append({"time_period": period(begin), "start_time": clock(begin), "end_time": clock(end),
                           "poi": stop.poi, "travel_time_minutes": travel})
        previous, free_at = stop, end
    return activities, late
