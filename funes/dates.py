"""Relative time in a message ("last month", "ayer", "últimos 3 meses") resolved by code to exact date ranges.

A 1.5B model turns "last month" into 2026-10-01..2026-11-23; code does not. The service hands the ranges
to the model in its system prompt and logs them with the decision. English and Spanish phrases.
"""
from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import regex

MONTHS = {name: i for i, names in enumerate(
    [(), ("january", "enero"), ("february", "febrero"), ("march", "marzo"), ("april", "abril"), ("may", "mayo"),
     ("june", "junio"), ("july", "julio"), ("august", "agosto"), ("september", "septiembre", "setiembre"),
     ("october", "octubre"), ("november", "noviembre"), ("december", "diciembre")]) for name in names}
UNITS = {"day": "day", "days": "day", "día": "day", "días": "day", "dias": "day", "week": "week", "weeks": "week",
         "semana": "week", "semanas": "week", "month": "month", "months": "month", "mes": "month", "meses": "month",
         "year": "year", "years": "year", "año": "year", "años": "year"}
_FIXED = [  # (pattern, what it names)
    (r"\btoday\b|\bhoy\b", "today"), (r"\byesterday\b|\bayer\b", "yesterday"),
    (r"\bthis week\b|\besta semana\b", "this week"), (r"\blast week\b|\bsemana pasada\b", "last week"),
    (r"\bthis month\b|\beste mes\b", "this month"), (r"\blast month\b|\bmes pasado\b", "last month"),
    (r"\bthis year\b|\beste año\b", "this year"), (r"\blast year\b|\baño pasado\b", "last year"),
]
_ROLLING = regex.compile(r"\b(?:(?:in )?the )?(?:last|past|(?:los |las )?últim[oa]s)\s+(\d{1,3})\s+(\p{L}+)\b", regex.I)
_MONTH = regex.compile(r"\b(?:in|during|en|durante)\s+(" + "|".join(MONTHS) + r")\b", regex.I)


@dataclass(frozen=True)
class Span:
    """A phrase of the message and the dates it means, both ends included."""

    phrase: str
    start: date
    end: date

    def to_dict(self) -> dict[str, str]:
        return {"phrase": self.phrase, "start": self.start.isoformat(), "end": self.end.isoformat()}


def _month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _months_back(day: date, months: int) -> date:
    year, month = divmod(day.year * 12 + day.month - 1 - months, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _fixed(name: str, today: date) -> tuple[date, date]:
    monday = today - timedelta(days=today.weekday())
    first = today.replace(day=1)
    previous = first - timedelta(days=1)
    return {"today": (today, today), "yesterday": (today - timedelta(days=1),) * 2,
            "this week": (monday, today), "last week": (monday - timedelta(days=7), monday - timedelta(days=1)),
            "this month": (first, today), "last month": (previous.replace(day=1), previous),
            "this year": (date(today.year, 1, 1), today),
            "last year": (date(today.year - 1, 1, 1), date(today.year - 1, 12, 31))}[name]


def _rolling(n: int, unit: str, today: date) -> tuple[date, date]:
    """The last n units up to today: "last 3 months" on 23 Nov is 24 Aug to 23 Nov."""
    if unit == "day":
        return today - timedelta(days=n - 1), today
    if unit == "week":
        return today - timedelta(days=7 * n - 1), today
    months = n if unit == "month" else 12 * n
    return _months_back(today, months) + timedelta(days=1), today


def resolve(text: str, today: date) -> list[Span]:
    """Every relative time phrase in `text` with its dates, in the order they appear."""
    found = []
    for pattern, name in _FIXED:
        for m in regex.finditer(pattern, text, flags=regex.I):
            found.append((m.start(), Span(m.group(0), *_fixed(name, today))))
    for m in _ROLLING.finditer(text):
        unit = UNITS.get(m.group(2).casefold())
        if unit and 0 < int(m.group(1)):
            found.append((m.start(), Span(m.group(0), *_rolling(int(m.group(1)), unit, today))))
    for m in _MONTH.finditer(text):
        month = MONTHS[m.group(1).casefold()]
        year = today.year if month <= today.month else today.year - 1  # the latest such month, this one included
        found.append((m.start(), Span(m.group(0), date(year, month, 1), min(_month_end(year, month), today))))
    return [span for _, span in sorted(found, key=lambda f: f[0])]


def prompt_line(spans: list[Span]) -> str:
    """How the spans read in the system prompt."""
    return " ".join(f'In the user\'s message, "{s.phrase}" means {s.start.isoformat()} to {s.end.isoformat()}.'
                    for s in spans)


_STARTS, _ENDS = {"start", "from", "after", "since", "begin"}, {"end", "to", "until", "before"}


def range_arguments(parameters: dict) -> tuple[str, str] | None:
    """A schema's (start, end) date arguments ("start_date", "end_date"), when it has exactly one such pair."""
    props = parameters.get("properties") if isinstance(parameters, dict) else None
    dated = [k for k, v in (props or {}).items() if isinstance(v, dict) and v.get("format") == "date"]
    starts = [k for k in dated if set(k.casefold().split("_")) & _STARTS]
    ends = [k for k in dated if set(k.casefold().split("_")) & _ENDS]
    return (starts[0], ends[0]) if len(starts) == len(ends) == 1 else None


def fill_range(arguments: dict, parameters: dict, spans: list[dict[str, str]]) -> dict:
    """`arguments` with the tool's date range set to the message's one relative time phrase, if it has both.

    The model is told the exact dates and still writes others ("last month" as the 1st to today)."""
    names = range_arguments(parameters)
    if names is None or len(spans) != 1:
        return arguments
    return {**arguments, names[0]: spans[0]["start"], names[1]: spans[0]["end"]}


def today(time_zone: str) -> date:
    """Today in `time_zone` (an IANA name), or in the server's own zone when it is empty."""
    try:
        return datetime.now(ZoneInfo(time_zone)).date() if time_zone else date.today()
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"TIME_ZONE {time_zone!r} is not an IANA time zone (e.g. Europe/Lisbon)") from None
