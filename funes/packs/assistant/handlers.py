"""The assistant pack: weather from Open-Meteo, and the date and time anywhere, resolved offline.

`get_weather` geocodes a place name, then asks for the current conditions and a three-day forecast;
network failures are `TransientError`s the runner retries. `get_datetime` resolves a time zone from an
IANA name, a city in the tz database, a big city it does not name (a small alias table) or a UTC offset.
"""
from __future__ import annotations

import os
import unicodedata
import zoneinfo
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from datetime import timezone as dt_timezone
from functools import cache
from typing import Any

import httpx
import regex

from funes.errors import ToolError
from funes.tools.context import ToolContext, TransientError
from funes.tools.loaders import tool

UNREACHABLE = "the weather service could not be reached (is this machine offline?)"
CURRENT_FIELDS = "temperature_2m,relative_humidity_2m,apparent_temperature,precipitation,weather_code,wind_speed_10m"
DAILY_FIELDS = "temperature_2m_max,temperature_2m_min,precipitation_probability_max,weather_code"

# WMO weather interpretation codes, as Open-Meteo documents them.
WMO_CODES = {
    0: "clear sky", 1: "mainly clear", 2: "partly cloudy", 3: "overcast", 45: "fog", 48: "freezing fog",
    51: "light drizzle", 53: "drizzle", 55: "dense drizzle", 56: "light freezing drizzle",
    57: "dense freezing drizzle", 61: "light rain", 63: "rain", 65: "heavy rain", 66: "light freezing rain",
    67: "heavy freezing rain", 71: "light snow", 73: "snow", 75: "heavy snow", 77: "snow grains",
    80: "light rain showers", 81: "rain showers", 82: "violent rain showers", 85: "light snow showers",
    86: "heavy snow showers", 95: "thunderstorm", 96: "thunderstorm with light hail",
    99: "thunderstorm with heavy hail",
}

# Big cities, countries and abbreviations the tz database does not name, folded as `_fold` folds.
ZONE_ALIASES = {
    **dict.fromkeys(["jaipur", "delhi", "new delhi", "mumbai", "bombay", "bangalore", "bengaluru", "chennai",
                     "hyderabad", "pune", "ahmedabad", "india", "ist"], "Asia/Kolkata"),
    **dict.fromkeys(["beijing", "shenzhen", "guangzhou", "china"], "Asia/Shanghai"),
    **dict.fromkeys(["hanoi", "saigon", "ho chi minh city", "da nang", "vietnam", "viet nam"], "Asia/Ho_Chi_Minh"),
    **dict.fromkeys(["san francisco", "seattle", "san diego", "las vegas", "california", "pst", "pdt"],
                    "America/Los_Angeles"),
    **dict.fromkeys(["washington", "washington dc", "boston", "philadelphia", "miami", "atlanta", "nyc",
                     "new york city", "est", "edt"], "America/New_York"),
    **dict.fromkeys(["houston", "dallas", "austin", "new orleans", "cdt"], "America/Chicago"),
    **dict.fromkeys(["mst", "mdt", "salt lake city"], "America/Denver"),
    **dict.fromkeys(["manchester", "edinburgh", "glasgow", "birmingham", "liverpool", "uk", "united kingdom",
                     "england", "scotland", "britain", "bst"], "Europe/London"),
    **dict.fromkeys(["barcelona", "seville", "valencia", "spain"], "Europe/Madrid"),
    **dict.fromkeys(["milan", "florence", "venice", "naples", "italy"], "Europe/Rome"),
    **dict.fromkeys(["munich", "frankfurt", "hamburg", "cologne", "germany"], "Europe/Berlin"),
    **dict.fromkeys(["lyon", "marseille", "nice", "france"], "Europe/Paris"),
    **dict.fromkeys(["porto", "faro"], "Europe/Lisbon"),
    **dict.fromkeys(["osaka", "kyoto", "jst"], "Asia/Tokyo"),
    **dict.fromkeys(["rio de janeiro", "rio", "brasilia", "brazil"], "America/Sao_Paulo"),
    **dict.fromkeys(["canberra", "aest"], "Australia/Sydney"),
    "abu dhabi": "Asia/Dubai", "geneva": "Europe/Zurich", "cape town": "Africa/Johannesburg",
    "marrakech": "Africa/Casablanca", "netherlands": "Europe/Amsterdam", "thailand": "Asia/Bangkok",
    "indonesia": "Asia/Jakarta", "philippines": "Asia/Manila", "south korea": "Asia/Seoul",
    "korea": "Asia/Seoul", "new zealand": "Pacific/Auckland",
}
_OFFSET = regex.compile(r"(?:utc|gmt)?\s*([+-])\s*(\d{1,2})(?::?(\d{2}))?", regex.I)


class Pack:
    """The assistant pack's handlers; `now` returns an aware datetime (tests fix it)."""

    def __init__(self, ctx: ToolContext, now: Callable[[], datetime] | None = None):
        self.ctx = ctx
        self.now = now or (lambda: datetime.now(dt_timezone.utc))

    @tool(name="get_weather", cache_ttl="WEATHER_CACHE_TTL")
    def get_weather(self, location: str) -> dict[str, Any]:
        """Current weather and a three-day forecast for a named place."""
        place = self._geocode(location)
        forecast = self._get_json(self.ctx.settings["WEATHER_FORECAST_URL"], {
            "latitude": place["latitude"], "longitude": place["longitude"], "current": CURRENT_FIELDS,
            "daily": DAILY_FIELDS, "forecast_days": 3, "timezone": "auto"})
        return weather_report(place, forecast)

    @tool(name="get_datetime")
    def get_datetime(self, timezone: str | None = None) -> dict[str, Any]:
        """The current date, time and weekday, locally or in a time zone or city."""
        zone, name = resolve_zone(timezone)
        now = self.now()
        here = now.astimezone(zone) if zone is not None else now.astimezone()
        name = name or _local_zone_name(here)
        offset = _format_offset(here.utcoffset() or timedelta(0))
        where = f"in {name}" if zone is not None else f"local time ({name})"
        where += "" if name.startswith("UTC") else f", UTC{offset}"
        return {"timezone": name, "iso": here.isoformat(timespec="seconds"), "date": here.date().isoformat(),
                "time": here.strftime("%H:%M"), "weekday": here.strftime("%A"), "utc_offset": offset,
                "summary": f"It is {here:%A} {here.day} {here:%B %Y}, {here:%H:%M} {where}."}

    def _geocode(self, location: str) -> dict[str, Any]:
        """The best Open-Meteo match for 'Place' or 'Place, Region or Country'."""
        name, _, qualifier = (part.strip() for part in location.partition(","))
        if not name:
            raise ToolError("get_weather needs a place name, e.g. 'Oslo, Norway'")
        reply = self._get_json(self.ctx.settings["WEATHER_GEOCODING_URL"], {
            "name": name, "count": 10 if qualifier else 1, "language": "en", "format": "json"})
        results = reply.get("results") or []
        if qualifier:
            results = [r for r in results if _qualifies(r, qualifier)] or results
        if not results:
            raise ToolError(f"no place called {location!r} was found; try a city name such as 'Oslo, Norway'")
        return results[0]

    def _get_json(self, url: str, params: dict[str, Any]) -> dict[str, Any]:
        """GET a JSON object; network failures and 5xx are transient, other refusals final."""
        try:
            response = httpx.get(url, params=params, timeout=self.ctx.settings["HTTP_TIMEOUT"])
        except httpx.TransportError as e:  # connect errors, timeouts, broken connections
            raise TransientError(f"{UNREACHABLE}: {type(e).__name__}: {e}") from None
        if response.status_code >= 500 or response.status_code == 429:
            raise TransientError(f"{UNREACHABLE}: it answered HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise TransientError(f"{UNREACHABLE}: its reply was not JSON") from None
        if response.status_code >= 400:
            reason = data.get("reason", "") if isinstance(data, dict) else ""
            raise ToolError(f"the weather service refused the request (HTTP {response.status_code}) {reason}")
        return data


def weather_report(place: dict[str, Any], forecast: dict[str, Any]) -> dict[str, Any]:
    """Shape Open-Meteo's geocoding match and forecast into what a reply needs, with a one-line summary."""
    cur, daily = forecast.get("current") or {}, forecast.get("daily") or {}
    current = {"time": cur.get("time"), "conditions": describe(cur.get("weather_code")),
               "temperature_c": cur.get("temperature_2m"), "feels_like_c": cur.get("apparent_temperature"),
               "humidity_pct": cur.get("relative_humidity_2m"), "precipitation_mm": cur.get("precipitation"),
               "wind_kmh": cur.get("wind_speed_10m")}
    columns = [daily.get(k) or [] for k in ("time", "weather_code", "temperature_2m_min",
                                           "temperature_2m_max", "precipitation_probability_max")]
    days = [{"date": d, "conditions": describe(code), "min_c": low, "max_c": high, "precipitation_chance_pct": p}
            for d, code, low, high, p in zip(*columns)]
    report = {"place": place.get("name"), "country": place.get("country"), "region": place.get("admin1"),
              "latitude": place.get("latitude"), "longitude": place.get("longitude"),
              "timezone": forecast.get("timezone") or place.get("timezone"), "current": current, "days": days}
    report["summary"] = _summary(report)
    return report


def describe(code: Any) -> str:
    """The words for a WMO weather code."""
    return WMO_CODES.get(code, f"unknown conditions (code {code})") if code is not None else "unknown conditions"


def _summary(report: dict[str, Any]) -> str:
    where = ", ".join(p for p in (report["place"], report["country"]) if p)
    c = report["current"]
    line = (f"{where}: {c['conditions']}, {_n(c['temperature_c'])} °C (feels like {_n(c['feels_like_c'])} °C), "
            f"humidity {_n(c['humidity_pct'])}%, wind {_n(c['wind_kmh'])} km/h")
    days = [f"{d['date']} {d['conditions']} {_n(d['min_c'])}–{_n(d['max_c'])} °C, "
            f"{_n(d['precipitation_chance_pct'])}% chance of rain" for d in report["days"]]
    return line + (". Next days: " + "; ".join(days) if days else "") + "."


def _n(value: Any) -> str:
    return "?" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _qualifies(result: dict[str, Any], qualifier: str) -> bool:
    """Whether a geocoding result lies in the region or country the user named."""
    wanted = {_fold(q) for q in qualifier.split(",") if q.strip()}
    fields = ("country", "country_code", "admin1", "admin2")
    return bool(wanted & {_fold(str(result[f])) for f in fields if result.get(f)})


def _fold(text: str) -> str:
    """Lower case, accents dropped, spaces, underscores and hyphens folded to one space."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return regex.sub(r"[\s_\-]+", " ", plain.casefold()).strip()


@cache
def _zone_index() -> dict[str, str]:
    """Folded names → IANA zone: cities of the tz database, then whole names, then aliases."""
    names = sorted(zoneinfo.available_timezones(),
                   key=lambda n: (n.startswith(("Etc/", "SystemV/", "US/")), n.count("/"), n))
    index: dict[str, str] = {}
    for name in names:
        if not name.startswith("Etc/"):  # Etc/GMT+5 is UTC-5: reachable only by its full name
            index.setdefault(_fold(name.rsplit("/", 1)[-1]), name)
    index.update({_fold(name): name for name in names})
    index.update(ZONE_ALIASES)
    return index


def resolve_zone(text: str | None) -> tuple[tzinfo | None, str]:
    """The zone an IANA name, city or UTC offset names; (None, "") means local time."""
    text = (text or "").strip()
    if _fold(text) in ("", "local", "here", "localtime"):
        return None, ""
    if match := _OFFSET.fullmatch(text):
        sign, hours, minutes = match.groups()
        delta = timedelta(hours=int(hours), minutes=int(minutes or 0)) * (-1 if sign == "-" else 1)
        return dt_timezone(delta), f"UTC{_format_offset(delta)}"
    index = _zone_index()
    name = index.get(_fold(text)) or index.get(_fold(text.split(",")[0]))
    if name is None:
        raise ToolError(f"unknown time zone or city {text!r}; give an IANA name such as 'Europe/Paris' "
                        "or 'America/New_York'")
    return zoneinfo.ZoneInfo(name), name


def _format_offset(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _local_zone_name(here: datetime) -> str:
    """The IANA name of this machine's zone when it can be told, else its abbreviation."""
    name = os.environ.get("TZ", "").lstrip(":")
    if name in zoneinfo.available_timezones():
        return name
    target = os.path.realpath("/etc/localtime")
    if "zoneinfo/" in target:
        return target.split("zoneinfo/", 1)[1]
    return here.tzname() or "local"
