"""The assistant pack: weather against a tiny real HTTP server speaking Open-Meteo's JSON, run through the
tool runner (cache, retries), and the date and time in zones named every way a user names them."""
import inspect
from collections import Counter
from datetime import datetime, timezone

import pytest
from sqlalchemy import create_engine

from funes.errors import ToolError
from funes.packs.assistant import Pack
from funes.tools.context import ToolContext, bind_handlers
from funes.tools.loaders import load_packs
from funes.tools.runner import ToolRunner
from tests.wire import JsonServer, closed_port

LISBON = {"id": 2267057, "name": "Lisbon", "latitude": 38.71667, "longitude": -9.13333, "country_code": "PT",
          "country": "Portugal", "admin1": "Lisbon", "timezone": "Europe/Lisbon"}
PARIS_FR = {"id": 2988507, "name": "Paris", "latitude": 48.85341, "longitude": 2.3488, "country_code": "FR",
            "country": "France", "admin1": "Île-de-France", "timezone": "Europe/Paris"}
PARIS_TX = {"id": 4717560, "name": "Paris", "latitude": 33.66094, "longitude": -95.55551, "country_code": "US",
            "country": "United States", "admin1": "Texas", "timezone": "America/Chicago"}
PLACES = {"lisbon": [LISBON], "paris": [PARIS_FR, PARIS_TX]}
FORECAST = {
    "latitude": 38.72, "longitude": -9.14, "timezone": "Europe/Lisbon", "timezone_abbreviation": "WEST",
    "current_units": {"temperature_2m": "°C", "relative_humidity_2m": "%", "wind_speed_10m": "km/h"},
    "current": {"time": "2025-06-02T13:30", "interval": 900, "temperature_2m": 18.3, "relative_humidity_2m": 72,
                "apparent_temperature": 17.1, "precipitation": 0.0, "weather_code": 2, "wind_speed_10m": 11.2},
    "daily_units": {"temperature_2m_max": "°C", "precipitation_probability_max": "%"},
    "daily": {"time": ["2025-06-02", "2025-06-03", "2025-06-04"], "weather_code": [2, 61, 95],
              "temperature_2m_max": [21.4, 19.0, 17.5], "temperature_2m_min": [14.2, 13.8, 12.9],
              "precipitation_probability_max": [10, 80, 95]},
}
NOW = datetime(2025, 6, 2, 12, 30, tzinfo=timezone.utc)  # a Monday


class FakeOpenMeteo(JsonServer):
    """Open-Meteo's geocoding and forecast endpoints, counting requests by path."""

    def __init__(self, status: int = 200):
        self.status = status
        super().__init__(self._respond)

    @property
    def hits(self) -> Counter:
        return Counter(r["path"] for r in self.requests)

    @property
    def queries(self) -> list[dict]:
        return [r["query"] for r in self.requests]

    def _respond(self, request: dict) -> tuple[int, object]:
        if self.status != 200:
            return self.status, {"error": True}
        if request["path"] == "/v1/search":  # Open-Meteo leaves "results" out when nothing matches
            found = PLACES.get(request["query"]["name"].lower(), [])[: int(request["query"]["count"])]
            return 200, ({"results": found, "generationtime_ms": 0.4} if found else {"generationtime_ms": 0.4})
        return 200, FORECAST


@pytest.fixture
def open_meteo():
    server = FakeOpenMeteo()
    yield server
    server.close()


def make_ctx(settings, tmp_path, base_url):
    cfg = dict(settings, HTTP_TIMEOUT=2.0, WEATHER_GEOCODING_URL=f"{base_url}/v1/search",
               WEATHER_FORECAST_URL=f"{base_url}/v1/forecast")
    return ToolContext(create_engine(f"sqlite:///{tmp_path / 'funes.db'}"), embed=None, data_dir=tmp_path,
                       settings=cfg)


def run_tool(ctx, name, arguments):
    """Run one call the way the service does: cards, bound handlers, the runner with a short backoff."""
    registry = load_packs(["assistant"])
    bind_handlers(registry, ["assistant"], ctx)
    runner = ToolRunner(timeout_s=10, retries=3, backoff_s=0.01)
    return runner, registry, runner.run(registry.get(name), arguments)


def test_weather_is_read_from_open_meteo(settings, tmp_path, open_meteo):
    _, _, call = run_tool(make_ctx(settings, tmp_path, open_meteo.url), "get_weather", {"location": "Lisbon"})
    assert call.error is None
    weather = call.result
    assert (weather["place"], weather["country"], weather["timezone"]) == ("Lisbon", "Portugal", "Europe/Lisbon")
    assert weather["current"]["temperature_c"] == 18.3
    assert weather["current"]["feels_like_c"] == 17.1
    assert weather["current"]["conditions"] == "partly cloudy"
    assert [d["conditions"] for d in weather["days"]] == ["partly cloudy", "light rain", "thunderstorm"]
    assert weather["days"][1] == {"date": "2025-06-03", "conditions": "light rain", "min_c": 13.8, "max_c": 19.0,
                                  "precipitation_chance_pct": 80}
    assert "Lisbon, Portugal: partly cloudy, 18.3 °C" in weather["summary"]
    forecast_query = open_meteo.queries[-1]
    assert forecast_query["latitude"] == "38.71667" and forecast_query["forecast_days"] == "3"
    assert forecast_query["timezone"] == "auto" and "weather_code" in forecast_query["current"]


def test_second_identical_call_is_served_from_cache(settings, tmp_path, open_meteo):
    runner, registry, first = run_tool(make_ctx(settings, tmp_path, open_meteo.url), "get_weather",
                                       {"location": "Lisbon"})
    second = runner.run(registry.get("get_weather"), {"location": "Lisbon"})
    assert second.result == first.result
    assert open_meteo.hits == {"/v1/search": 1, "/v1/forecast": 1}


def test_region_after_a_comma_picks_the_right_place(settings, tmp_path, open_meteo):
    _, _, call = run_tool(make_ctx(settings, tmp_path, open_meteo.url), "get_weather", {"location": "Paris, Texas"})
    assert (call.result["place"], call.result["region"]) == ("Paris", "Texas")
    assert open_meteo.queries[0]["name"] == "Paris"


def test_unknown_place_is_a_clear_error_without_retries(settings, tmp_path, open_meteo):
    _, _, call = run_tool(make_ctx(settings, tmp_path, open_meteo.url), "get_weather", {"location": "Atlantis"})
    assert "no place called 'Atlantis'" in call.error
    assert open_meteo.hits == {"/v1/search": 1}


def test_unreachable_service_is_retried_then_reported(settings, tmp_path):
    url = f"http://127.0.0.1:{closed_port()}"
    _, _, call = run_tool(make_ctx(settings, tmp_path, url), "get_weather", {"location": "Lisbon"})
    assert "failed after 3 attempts" in call.error
    assert "the weather service could not be reached" in call.error


def test_server_errors_are_retried_then_reported(settings, tmp_path):
    server = FakeOpenMeteo(status=503)
    try:
        _, _, call = run_tool(make_ctx(settings, tmp_path, server.url), "get_weather", {"location": "Lisbon"})
    finally:
        server.close()
    assert "the weather service could not be reached" in call.error and "HTTP 503" in call.error
    assert server.hits == {"/v1/search": 3}


@pytest.mark.parametrize("zone, name, time, offset", [
    ("Europe/Lisbon", "Europe/Lisbon", "13:30", "+01:00"),
    ("lisbon", "Europe/Lisbon", "13:30", "+01:00"),
    ("EUROPE/LISBON", "Europe/Lisbon", "13:30", "+01:00"),
    ("Jaipur", "Asia/Kolkata", "18:00", "+05:30"),
    ("new york", "America/New_York", "08:30", "-04:00"),
    ("São Paulo", "America/Sao_Paulo", "09:30", "-03:00"),
    ("Hanoi", "Asia/Ho_Chi_Minh", "19:30", "+07:00"),
    ("UTC+2", "UTC+02:00", "14:30", "+02:00"),
])
def test_datetime_in_a_zone_or_city(zone, name, time, offset):
    now = Pack(ToolContext(None, None, None, {}), now=lambda: NOW).get_datetime(zone)
    assert (now["timezone"], now["time"], now["utc_offset"]) == (name, time, offset)
    assert (now["date"], now["weekday"]) == ("2025-06-02", "Monday")
    assert time in now["summary"] and "Monday" in now["summary"]


def test_local_datetime_needs_no_zone():
    now = Pack(ToolContext(None, None, None, {}), now=lambda: NOW).get_datetime()
    assert datetime.fromisoformat(now["iso"]) == NOW
    assert "local time" in now["summary"]


def test_unknown_zone_suggests_an_iana_name():
    with pytest.raises(ToolError, match="IANA name such as 'Europe/Paris'"):
        Pack(ToolContext(None, None, None, {})).get_datetime("Atlantis")


def test_handlers_take_exactly_the_card_parameters():
    registry = load_packs(["assistant"])
    bind_handlers(registry, ["assistant"], ToolContext(None, None, None, {"WEATHER_CACHE_TTL": 600}))
    for card in registry:
        params = inspect.signature(card.handler).parameters.values()
        assert [p.name for p in params] == list(card.parameters["properties"])
        assert [p.name for p in params if p.default is p.empty] == card.parameters.get("required", [])
