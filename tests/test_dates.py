"""Relative time resolved by code, and handed to the model and the decision log."""
from datetime import date

import pytest

from funes.dates import resolve
from tests.ollama_wire import reply

TODAY = date(2026, 11, 23)  # a Monday


@pytest.mark.parametrize("message, spans", [
    ("How much did I spend on groceries last month?", [("last month", "2026-10-01", "2026-10-31")]),
    ("¿Cuánto gasté en los últimos 3 meses?", [("los últimos 3 meses", "2026-08-24", "2026-11-23")]),
    ("gastos del año pasado", [("año pasado", "2025-01-01", "2025-12-31")]),
    ("what did I watch yesterday and last week", [("yesterday", "2026-11-22", "2026-11-22"),
                                                  ("last week", "2026-11-16", "2026-11-22")]),
    ("spending in the last 10 days", [("in the last 10 days", "2026-11-14", "2026-11-23")]),
    ("Find the cooking videos I watched in March", [("in March", "2026-03-01", "2026-03-31")]),
    ("anything in December?", [("in December", "2025-12-01", "2025-12-31")]),
    ("this year so far", [("this year", "2026-01-01", "2026-11-23")]),
    ("Can I budget monthly? What may help?", []),
])
def test_phrases_resolve_to_exact_ranges(message, spans):
    assert [(s.phrase, s.start.isoformat(), s.end.isoformat()) for s in resolve(message, TODAY)] == spans


def test_march_31_minus_one_month_stays_in_february():
    (span,) = resolve("the last 1 month", date(2026, 3, 31))
    assert (span.start, span.end) == (date(2026, 3, 1), date(2026, 3, 31))


def test_the_model_gets_the_ranges_and_the_decision_logs_them(app, client, ollama):
    ran = []
    app.extensions["funes"].router.registry.bind("analyze_by_category", lambda **kw: ran.append(kw) or {"total": 212.4})
    wrong = {"category": "groceries", "start_date": "2026-10-01", "end_date": "2026-11-25"}  # the 1st to today
    ollama.script = [reply(tool_calls=[("analyze_by_category", wrong)]), reply("212.40 EUR.")]
    body = client.post("/chat", json={"message": "How much did I spend on groceries last month?"}).json
    system = ollama.requests[0]["messages"][0]["content"]
    today = date.today()
    first = today.replace(day=1)
    previous = date.fromordinal(first.toordinal() - 1)
    assert f'"last month" means {previous.replace(day=1).isoformat()} to {previous.isoformat()}' in system
    logged = client.get(f"/decisions/{body['decision_id']}").json
    assert logged["dates"] == [{"phrase": "last month", "start": previous.replace(day=1).isoformat(),
                                "end": previous.isoformat()}]
    # the tool ran on the resolved range, whatever dates the model wrote
    assert ran == [{"category": "groceries", "start_date": previous.replace(day=1).isoformat(),
                    "end_date": previous.isoformat()}]
    assert body["tool_calls"][0]["arguments"]["end_date"] == previous.isoformat()


@pytest.mark.parametrize("parameters, spans, filled", [
    ({"properties": {"from_date": {"type": "string", "format": "date"},
                     "to_date": {"type": "string", "format": "date"}}}, 1, True),
    ({"properties": {"start_date": {"type": "string", "format": "date"}}}, 1, False),  # no end to pair it with
    ({"properties": {"start_date": {"type": "string"}, "end_date": {"type": "string"}}}, 1, False),  # not dates
    ({"properties": {"start_date": {"type": "string", "format": "date"},
                     "end_date": {"type": "string", "format": "date"}}}, 2, False),  # two phrases: the model decides
])
def test_a_date_range_is_filled_only_when_both_ends_and_one_phrase_are_clear(parameters, spans, filled):
    from funes.dates import fill_range

    span = {"phrase": "last week", "start": "2026-11-16", "end": "2026-11-22"}
    got = fill_range({"q": "x"}, parameters, [span] * spans)
    assert (got != {"q": "x"}) == filled
    if filled:
        assert got == {"q": "x", "from_date": "2026-11-16", "to_date": "2026-11-22"}
