"""The tool runner: lenient argument coercion, schema errors, timeout, retries and the TTL cache."""
import threading

import pytest

from funes.tools.context import TransientError
from funes.tools.registry import Tool
from funes.tools.runner import ToolRunner

PARAMETERS = {"type": "object", "required": ["city"], "properties": {
    "city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7},
    "radius_km": {"type": "number"}, "unit": {"type": "string", "enum": ["c", "f"]}}}


def forecast(city, days=1, radius_km=5.0, unit="c"):
    return {"city": city, "days": days, "radius_km": radius_km, "unit": unit}


@pytest.fixture
def runner():
    return ToolRunner(timeout_s=2, backoff_s=0.01)


def tool(handler=forecast, **extra):
    return Tool(name="forecast", description="Weather forecast.", parameters=PARAMETERS, handler=handler, **extra)


@pytest.mark.parametrize("arguments, expected", [
    ({"city": "Oslo", "days": 3.0}, {"days": 3}),
    ({"city": "Oslo", "days": "4"}, {"days": 4}),
    ({"city": "Oslo", "radius_km": "2.5"}, {"radius_km": 2.5}),
    ({"city": "Oslo", "unit": None, "days": None}, {"unit": "c", "days": 1}),
    ({"city": "Oslo", "type": "object", "properties": {}}, {"city": "Oslo"}),  # the schema written as arguments
])
def test_small_model_habits_are_forgiven(runner, arguments, expected):
    call = runner.run(tool(), arguments)
    assert call.error is None
    assert {k: (call.result[k], type(call.result[k])) for k in expected} == {k: (v, type(v)) for k, v in expected.items()}


@pytest.mark.parametrize("arguments, message", [
    ({"city": "Oslo", "days": 2.5}, "days: 2.5 is not of type 'integer'"),
    ({"city": "Oslo", "days": "three"}, "days: 'three' is not of type 'integer'"),
    ({"city": "Oslo", "radius_km": "nan"}, "radius_km: 'nan' is not of type 'number'"),
    ({"city": "Oslo", "days": 9}, "days: 9 is greater than the maximum of 7"),
    ({"city": None}, "city: None is not of type 'string'"),
    ({}, "'city' is a required property"),
])
def test_what_cannot_be_forgiven_is_named_for_the_llm(runner, arguments, message):
    call = runner.run(tool(), arguments)
    assert call.result is None and message in call.error


def test_every_problem_is_named_at_once(runner):
    call = runner.run(tool(), {"days": "three", "radius_km": "far"})
    assert call.error.count("; ") == 2  # three problems, in the schema's order of arguments
    for problem in ("'city' is a required property", "days: 'three' is not of type", "radius_km: 'far' is not of type"):
        assert problem in call.error


def test_undeclared_keys_stay_when_the_schema_allows_them(runner):
    open_tool = Tool(name="echo", description="Echo.", handler=lambda **kw: kw,
                     parameters={"type": "object", "properties": {}, "additionalProperties": True})
    assert runner.run(open_tool, {"anything": 1}).result == {"anything": 1}


def test_arguments_that_are_not_an_object_are_an_error(runner):
    assert runner.run(tool(), ["Oslo"]).error == "arguments must be a JSON object"


def test_a_slow_handler_times_out(runner):
    release = threading.Event()
    call = runner.run(tool(handler=lambda city: release.wait(10)), {"city": "Oslo"})
    release.set()
    assert call.error == "tool 'forecast' did not answer within 2 s" and 1900 <= call.ms < 5000


def test_transient_errors_are_retried_then_reported(runner):
    attempts = []

    def flaky(city):
        attempts.append(city)
        if len(attempts) < 3:
            raise TransientError("upstream 503")
        return "sunny"

    assert runner.run(tool(handler=flaky), {"city": "Oslo"}).result == "sunny" and len(attempts) == 3


def test_transient_errors_that_persist_are_reported_after_the_last_attempt(runner):
    attempts = []

    def down(city):
        attempts.append(city)
        raise TransientError("upstream 503")

    call = runner.run(tool(handler=down), {"city": "Oslo"})
    assert call.error == "forecast failed after 3 attempts: upstream 503" and len(attempts) == 3


def test_a_handler_bug_becomes_an_error_not_an_exception(runner):
    call = runner.run(tool(handler=lambda city: 1 / 0), {"city": "Oslo"})
    assert call.error == "ZeroDivisionError: division by zero"


def test_results_are_cached_per_arguments_within_the_ttl(runner):
    calls = []
    cached = tool(handler=lambda city, days=1: calls.append((city, days)) or len(calls), cache_ttl=60)
    assert [runner.run(cached, a).result for a in ({"city": "Oslo"}, {"city": "Oslo"}, {"city": "Rome"})] == [1, 1, 2]
    uncached = tool(handler=lambda city: calls.append(city) or len(calls))
    assert runner.run(uncached, {"city": "Oslo"}).result != runner.run(uncached, {"city": "Oslo"}).result


def test_a_hung_tool_holds_only_its_own_threads():
    runner = ToolRunner(timeout_s=0.3, workers=2, retries=1)
    release = threading.Event()
    hung = Tool(name="weather", description="Hangs.", parameters={"type": "object", "properties": {}},
                handler=lambda: release.wait(30))
    for _ in range(4):  # more hung calls than the pool has threads
        assert "did not answer within 0.3 s" in runner.run(hung, {}).error
    clock = Tool(name="clock", description="Answers at once.", parameters={"type": "object", "properties": {}},
                 handler=lambda: "12:00")
    assert runner.run(clock, {}).result == "12:00"
    release.set()
