"""Finance pack: bank transactions in the project's database, and the three tools of the Money Minder seed.

Amounts are stored as integer cents, money out positive: a purchase is +, a refund is - (it nets against
its category), and rows in the "Income" category are money in, left out of every spending total.
Periods end today (ctx.today()) and include both ends: last_week is the 7 days ending today; last_month
runs from the day after the same date a month ago (2025-05-16..2025-06-15); last_3_months likewise over
three months; all_time is every stored transaction.
"""
from __future__ import annotations

import calendar
import logging
from collections import defaultdict
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import regex
from rapidfuzz import fuzz, process, utils
from sqlalchemy import BigInteger, Column, Date, Integer, LargeBinary, MetaData, String, Table, Text, insert, select

from funes.errors import ToolError
from funes.tools.context import ImportReport, ToolContext
from funes.packs.finance.data import INCOME, match_category, parse_cents, read_csv, write_sample
from funes.tools.loaders import tool

__all__ = ["metadata", "transactions", "Pack", "import_file", "load_sample", "write_sample"]
log = logging.getLogger(__name__)

PERIODS = ("last_week", "last_month", "last_3_months", "all_time")
# words of a search query that name no merchant ("my Amazon orders last month" searches "amazon")
_FILLER = frozenset("my me i the a an all any every at from to for in on of with show find search list pull up look "
                    "did made bought paid transactions transaction purchases purchase payments payment charges "
                    "charge orders order last this month week year recent recently".split())
_QUERY_AMOUNT = regex.compile(r"\$?\d[\d,]*\.\d{2}\b")

metadata = MetaData()
transactions = Table(
    "finance_transactions", metadata,
    Column("id", Integer, primary_key=True),
    Column("day", Date, nullable=False, index=True),
    Column("description", Text, nullable=False),
    Column("merchant", Text, nullable=False),
    Column("category", Text, nullable=False, index=True),
    Column("cents", BigInteger, nullable=False),                    # money out positive; refunds, income negative
    Column("fingerprint", String(40), nullable=False, index=True),  # date, description, amount: finds re-imports
    Column("source", Text, nullable=False),  # free text from the file: no length PostgreSQL could refuse
    Column("vector", LargeBinary, nullable=False),                  # float32 unit vector of Row.embed_text
)
_COLUMNS = [transactions.c[n] for n in ("id", "day", "description", "merchant", "category", "cents")]


def import_file(ctx: ToolContext, path: str | Path) -> ImportReport:
    """Import a bank CSV (date, description, amount, optional category and merchant) into the database."""
    parsed = read_csv(path, ctx.settings["FINANCE_AMOUNT_SIGN"])
    report = ImportReport(str(path), skipped=list(parsed.skipped))
    days = [r.day for r in parsed.rows]
    with ctx.engine.connect() as conn:
        stored = set(conn.scalars(select(transactions.c.fingerprint).where(
            transactions.c.day.between(min(days), max(days))))) if days else set()
    new = [r for r in parsed.rows if r.fingerprint not in stored]
    report.skipped += [(r.line, "already imported") for r in parsed.rows if r.fingerprint in stored]
    report.skipped.sort()
    if new:
        vectors = np.asarray(ctx.embed([r.embed_text for r in new]), np.float32)
        with ctx.engine.begin() as conn:
            conn.execute(insert(transactions), [
                {"day": r.day, "description": r.description, "merchant": r.merchant, "category": r.category,
                 "cents": r.cents, "fingerprint": r.fingerprint, "source": Path(path).name[:255],
                 "vector": v.tobytes()} for r, v in zip(new, vectors)])
    report.imported = len(new)
    log.info("finance import %s: %d imported, %d skipped", path, report.imported, len(report.skipped))
    return report


def load_sample(ctx: ToolContext) -> list[ImportReport]:
    """Write the sample CSV into DATA_DIR/sample and import it, only while no transaction is stored."""
    with ctx.engine.connect() as conn:
        if conn.execute(select(transactions.c.id).limit(1)).first() is not None:
            return []
    return [import_file(ctx, p) for p in write_sample(Path(ctx.data_dir) / "sample", _today(ctx))]


def _today(ctx: ToolContext) -> date:
    today = ctx.today()
    return today.date() if isinstance(today, datetime) else today


def _money(cents: int) -> float:
    return round(cents / 100, 2)


def _dollars(cents: int) -> str:
    return f"{'-' if cents < 0 else ''}${abs(cents) / 100:,.2f}"


def _item(row, score: float | None = None, matched_by: str | None = None) -> dict[str, Any]:
    item = {"date": row.day.isoformat(), "description": row.description, "merchant": row.merchant,
            "category": row.category, "amount": _money(row.cents)}
    if score is not None:
        item.update(score=round(float(score), 3), matched_by=matched_by)
    return item


def _groups(rows, key: str, top: int | None = None) -> list[dict[str, Any]]:
    """Totals and counts per value of `key`, largest total first."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        totals[getattr(row, key)][0] += row.cents
        totals[getattr(row, key)][1] += 1
    ordered = sorted(totals.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    return [{key: name, "total": _money(cents), "count": n} for name, (cents, n) in ordered]


def _span(rows, start: date | None, end: date | None) -> tuple[str | None, str | None]:
    """The first and last day of a period as text; open ends become the oldest and newest row (newest first)."""
    first, last = start or (rows[-1].day if rows else None), end or (rows[0].day if rows else None)
    return first and first.isoformat(), last and last.isoformat()


def _day(value: str | None, name: str) -> date | None:
    """A YYYY-MM-DD argument as a date (None when absent)."""
    if value is None or value == "":
        return None
    try:
        return datetime.strptime(str(value), "%Y-%m-%d").date()
    except ValueError:
        raise ToolError(f"{name} must be a date as YYYY-MM-DD, got {value!r}") from None


def _months_before(day: date, months: int) -> date:
    year, month = divmod(day.year * 12 + day.month - 1 - months, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def period_range(period: str, today: date) -> tuple[date | None, date | None]:
    """First and last day of a named period ending today; (None, None) for all_time."""
    if period not in PERIODS:
        raise ToolError(f"unknown period {period!r}; use one of: {', '.join(PERIODS)}")
    if period == "all_time":
        return None, None
    if period == "last_week":
        return today - timedelta(days=6), today
    return _months_before(today, 1 if period == "last_month" else 3) + timedelta(days=1), today


class Pack:
    """The finance tools over the transactions stored in the project's database."""

    def __init__(self, ctx: ToolContext):
        self.ctx, self.settings = ctx, ctx.settings

    def _select(self, *where, start: date | None = None, end: date | None = None, vectors: bool = False):
        columns = _COLUMNS + [transactions.c.vector] if vectors else _COLUMNS
        query = select(*columns).where(*where).order_by(transactions.c.day.desc(), transactions.c.id.desc())
        if start is not None:
            query = query.where(transactions.c.day >= start)
        if end is not None:
            query = query.where(transactions.c.day <= end)
        with self.ctx.engine.connect() as conn:
            return conn.execute(query).all()

    @tool(name="search_transactions")
    def search_transactions(self, query: str, limit: int = 10) -> dict[str, Any]:
        """Find transactions by merchant or description (typos allowed) and by meaning, best first."""
        if not isinstance(query, str) or not query.strip():
            raise ToolError("query must be a non-empty text, such as a merchant ('Starbucks') or a kind ('coffee')")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ToolError(f"limit must be a whole number of at least 1, got {limit!r}")
        rows = self._select(vectors=True)
        scores = self._text_scores(query, rows)
        for i, score in self._meaning_scores(query, rows).items():
            text, how = scores.get(i, (0.0, None))
            scores[i] = (max(text, score), f"{how}+meaning" if how else "meaning")
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1][0], -rows[kv[0]].day.toordinal(), kv[0]))
        matches = [rows[i] for i, _ in ranked]
        shown = ranked[:min(limit, self.settings["FINANCE_MAX_RESULTS"])]
        total = sum(r.cents for r in matches)
        summary = (f"{len(matches)} transactions match {query!r}, totalling {_dollars(total)}; "
                   f"the best {len(shown)} are listed." if matches else
                   f"No transactions match {query!r}." if rows else "No transactions are stored yet.")
        return {"query": query, "matches": len(matches), "total": _money(total),
                "by_merchant": _groups(matches, "merchant", self.settings["FINANCE_TOP_N"]),
                "transactions": [_item(rows[i], score, how) for i, (score, how) in shown], "summary": summary}

    def _text_scores(self, query: str, rows) -> dict[int, tuple[float, str]]:
        """0-1 per row: query words against merchant and description words (typos allowed), or the exact amount."""
        cutoff = self.settings["FINANCE_FUZZY_CUTOFF"]
        words = [w for w in utils.default_process(query).split() if w not in _FILLER]
        texts = [set(utils.default_process(f"{r.merchant} {r.description}").split()) for r in rows]
        vocabulary = sorted(set().union(*texts))
        close = [{v: score for v, score, _ in process.extract(w, vocabulary, scorer=fuzz.ratio, score_cutoff=cutoff,
                                                              limit=None)} for w in words]
        amounts = {abs(c) for c in map(parse_cents, _QUERY_AMOUNT.findall(query)) if c is not None}
        scores = {}
        for i, (row, text) in enumerate(zip(rows, texts)):
            if abs(row.cents) in amounts:
                scores[i] = (1.0, "amount")
                continue
            per_word = [max((c.get(t, 0.0) for t in text), default=0.0) for c in close]
            # the best word counts half and the share of words found the other half ("starbucks coffee")
            score = (max(per_word) + sum(per_word) / len(per_word)) / 2 if any(per_word) else 0.0
            # a name written as one word ("ubereats" for "Uber Eats")
            score = max(score, fuzz.ratio(" ".join(words), utils.default_process(row.merchant), score_cutoff=cutoff))
            if score:
                scores[i] = (score / 100, "text")
        return scores

    def _meaning_scores(self, query: str, rows) -> dict[int, float]:
        """Cosine per row close to the query in meaning: above a floor and near the best one."""
        if not rows:
            return {}
        matrix = np.frombuffer(b"".join(r.vector for r in rows), np.float32).reshape(len(rows), -1)
        cosines = matrix @ np.asarray(self.ctx.embed([query]), np.float32)[0]
        best, gap = float(cosines.max()), self.settings["FINANCE_SEARCH_GAP"]
        floor = max(self.settings["FINANCE_SEARCH_MIN_SCORE"], best - gap)
        return {int(i): float(cosines[i]) for i in np.flatnonzero(cosines >= floor)}

    @tool(name="analyze_by_category")
    def analyze_by_category(self, category: str, start_date: str | None = None,
                            end_date: str | None = None) -> dict[str, Any]:
        """Total, count, average, largest items and merchants of one category, optionally between two dates."""
        start, end = _day(start_date, "start_date"), _day(end_date, "end_date")
        if start and end and start > end:
            raise ToolError(f"start_date {start} is after end_date {end}; swap them or widen the range")
        name = self._category(category)
        rows = self._select(transactions.c.category == name, start=start, end=end)
        sign = -1 if name == INCOME else 1  # income is reported as money received, a positive number
        total, count, top = sign * sum(r.cents for r in rows), len(rows), self.settings["FINANCE_TOP_N"]
        largest = sorted(rows, key=lambda r: (-sign * r.cents, r.day))[:top]
        first, last = _span(rows, start, end)
        span = f"from {first} to {last}" if rows or start and end else "so far"
        summary = (f"You {'received' if sign < 0 else 'spent'} {_dollars(total)} {'as' if sign < 0 else 'on'} "
                   f"{name} in {count} transactions {span} (average {_dollars(round(total / count))}); the largest "
                   f"was {_dollars(sign * largest[0].cents)} at {largest[0].merchant} on {largest[0].day}."
                   if rows else f"No {name} transactions {span}.")
        return {"category": name, "requested": category, "period": {"start": first, "end": last},
                "total": _money(total), "count": count, "average": _money(total / count) if count else 0.0,
                "largest": [_item(r) for r in largest], "by_merchant": _groups(rows, "merchant", top),
                "summary": summary}

    def _category(self, requested: str) -> str:
        """The stored category the user means, or a ToolError listing the known ones."""
        with self.ctx.engine.connect() as conn:
            known = sorted(conn.scalars(select(transactions.c.category).distinct()))
        if not known:
            raise ToolError("no transactions are stored yet; import a bank CSV first")
        name = match_category(str(requested), known, self.settings["FINANCE_CATEGORY_CUTOFF"])
        if name is None:
            raise ToolError(f"unknown category {requested!r}; known categories: {', '.join(known)}")
        return name

    @tool(name="get_spending_summary")
    def get_spending_summary(self, period: str = "last_month") -> dict[str, Any]:
        """Spending over a period ending today: total, count, average, categories and top merchants."""
        start, end = period_range(period, _today(self.ctx))
        rows = self._select(start=start, end=end)
        spending = [r for r in rows if r.category != INCOME]
        total, count = sum(r.cents for r in spending), len(spending)
        by_category = _groups(spending, "category")
        for group in by_category:
            group["share"] = round(100 * group["total"] / _money(total), 1) if total > 0 else 0.0
        first, last = _span(rows, start, end)
        span = f"From {first} to {last}" if first else "So far"
        summary = (f"{span} you spent {_dollars(total)} in {count} transactions (average "
                   f"{_dollars(round(total / count))}); the biggest category was {by_category[0]['category']} "
                   f"(${by_category[0]['total']:,.2f})." if count else f"{span} no spending is recorded.")
        return {"period": {"name": period, "start": first, "end": last}, "total_spent": _money(total),
                "count": count, "average": _money(total / count) if count else 0.0,
                "income": _money(-sum(r.cents for r in rows if r.category == INCOME)), "by_category": by_category,
                "top_merchants": _groups(spending, "merchant", self.settings["FINANCE_TOP_N"]), "summary": summary}
