"""Finance pack: CSV import and its report, the three tools' numbers, and running them through the registry."""
from datetime import date

import pytest
import sqlalchemy

import config
from funes.errors import BadRequest, ToolError
from funes.packs.finance import handlers as finance
from funes.tools.context import ToolContext, bind_handlers
from funes.tools.loaders import load_packs
from funes.tools.runner import ToolRunner

TODAY = date(2025, 6, 15)
CSV = """Date,Description,AMOUNT,category,Merchant
2025-06-14,STARBUCKS STORE #1234,5.75,,
2025-06-10,BLUE BOTTLE COFFEE SF,6.25,Food & Dining,Blue Bottle Coffee
2025-06-09,SHELL OIL 5744,45.00,,
2025-06-09,NETFLIX.COM,15.49,,
06/01/2025,WHOLE FOODS MKT #102,"$1,234.56",Groceries,
2025-05-20,CHIPOTLE 0912,12.50,food & dining,
2025-05-16,AMAZON MKTPLACE 1,40.00,Shopping,Amazon
2025-05-15,AMAZON MKTPLACE 2,60.00,Shopping,Amazon
2025-05-15,AMAZON REFUND,-20.00,Shopping,Amazon
2025-06-01,ACME CORP PAYROLL,-3000.00,Income,ACME Corp
2025-06-09,TARGET T-100,12.x,Shopping,Target
2025-13-01,TARGET T-200,9.99,Shopping,Target
2025-06-02,,10.00,,
2025-06-14,Starbucks  store #1234,5.75,,
2025-06-12,CORNER SHOP 77,8.00,,
"""


def make_context(url, tmp_path, text_encoder) -> ToolContext:
    engine = sqlalchemy.create_engine(url)
    finance.metadata.create_all(engine)
    return ToolContext(engine, text_encoder.embed, tmp_path, config.load(), today=lambda: TODAY)


@pytest.fixture
def ctx(database_url, tmp_path, text_encoder):
    return make_context(database_url, tmp_path, text_encoder)


@pytest.fixture
def pack(ctx, tmp_path):
    path = tmp_path / "bank.csv"
    path.write_text(CSV, encoding="utf-8")
    finance.import_file(ctx, path)
    return finance.Pack(ctx)


def test_import_reports_every_skipped_line_with_its_reason(ctx, tmp_path):
    path = tmp_path / "bank.csv"
    path.write_text(CSV, encoding="utf-8")
    report = finance.import_file(ctx, path)
    assert report.imported == 11
    assert report.skipped == [(12, "bad amount '12.x'"), (13, "bad date '2025-13-01' (use YYYY-MM-DD)"),
                              (14, "empty description"), (15, "duplicate of line 2")]
    again = finance.import_file(ctx, path)
    assert again.imported == 0
    assert [why for _, why in again.skipped].count("already imported") == 11


def test_import_fills_merchant_and_category(pack, ctx):
    with ctx.engine.connect() as conn:
        rows = {r.description: r for r in conn.execute(sqlalchemy.select(finance.transactions))}
    starbucks = rows["STARBUCKS STORE #1234"]
    assert (starbucks.merchant, starbucks.category) == ("Starbucks", "Food & Dining")
    assert rows["SHELL OIL 5744"].category == "Transportation"
    assert rows["NETFLIX.COM"].category == "Entertainment"
    assert rows["WHOLE FOODS MKT #102"].merchant == "Whole Foods"
    assert rows["CHIPOTLE 0912"].category == "Food & Dining"
    corner = rows["CORNER SHOP 77"]
    assert (corner.merchant, corner.category) == ("Corner Shop", "Other")
    assert rows["WHOLE FOODS MKT #102"].day == date(2025, 6, 1)
    assert rows["WHOLE FOODS MKT #102"].cents == 123456


@pytest.mark.parametrize("sign, spent", [("auto", 13.0), ("spending_negative", 13.0), ("spending_positive", -13.0)])
def test_bank_export_with_debits_negative_is_flipped(ctx, tmp_path, sign, spent):
    ctx.settings["FINANCE_AMOUNT_SIGN"] = sign
    path = tmp_path / "export.csv"
    path.write_text('DATE,DESCRIPTION,AMOUNT\n2025-06-10,"UBER *TRIP, AIRPORT",-10.00\n2025-06-11,LYFT RIDE,-5.00\n'
                    "2025-06-12,UBER REFUND,2.00\n", encoding="utf-8")
    assert finance.import_file(ctx, path).imported == 3
    summary = finance.Pack(ctx).get_spending_summary("last_week")
    assert (summary["total_spent"], summary["count"]) == (spent, 3)


def test_an_empty_database_answers_plainly(ctx):
    pack = finance.Pack(ctx)
    assert pack.search_transactions("coffee")["summary"] == "No transactions are stored yet."
    assert pack.get_spending_summary("all_time")["total_spent"] == 0.0
    with pytest.raises(ToolError, match="import a bank CSV first"):
        pack.analyze_by_category("food")


def test_import_refuses_a_file_without_the_needed_columns(ctx, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("when,what\n2025-06-10,x\n", encoding="utf-8")
    with pytest.raises(BadRequest, match="no date, description, amount column"):
        finance.import_file(ctx, path)


def test_summary_periods_end_today_and_exclude_income(pack):
    week = pack.get_spending_summary("last_week")
    assert week["period"] == {"name": "last_week", "start": "2025-06-09", "end": "2025-06-15"}
    assert (week["total_spent"], week["count"]) == (80.49, 5)
    month = pack.get_spending_summary()
    assert month["period"]["start"] == "2025-05-16"  # the 40.00 on 05-16 is in, the 60.00 on 05-15 is not
    assert (month["total_spent"], month["count"], month["average"], month["income"]) == (1367.55, 8, 170.94, 3000.0)
    assert [c["category"] for c in month["by_category"]] == [
        "Groceries", "Transportation", "Shopping", "Food & Dining", "Entertainment", "Other"]
    assert month["top_merchants"][0] == {"merchant": "Whole Foods", "total": 1234.56, "count": 1}
    assert "$1,367.55" in month["summary"]
    everything = pack.get_spending_summary("all_time")
    assert (everything["total_spent"], everything["count"]) == (1407.55, 10)  # the refund nets against Shopping
    assert everything["period"]["start"] == "2025-05-15"


def test_summary_rejects_an_unknown_period(pack):
    with pytest.raises(ToolError, match="use one of: last_week, last_month, last_3_months, all_time"):
        pack.get_spending_summary("yesterday")


def test_category_analysis_matches_loosely_spelt_names(pack):
    food = pack.analyze_by_category("food")
    assert (food["category"], food["total"], food["count"], food["average"]) == ("Food & Dining", 24.5, 3, 8.17)
    assert [i["merchant"] for i in food["largest"]] == ["Chipotle", "Blue Bottle Coffee", "Starbucks"]
    assert pack.analyze_by_category("groceries")["category"] == "Groceries"
    assert pack.analyze_by_category("GROCERY")["category"] == "Groceries"
    assert pack.analyze_by_category("entertanment")["category"] == "Entertainment"
    shopping = pack.analyze_by_category("Shoping")
    assert (shopping["category"], shopping["total"], shopping["count"]) == ("Shopping", 80.0, 3)


def test_category_analysis_between_dates_includes_both_ends(pack):
    june = pack.analyze_by_category("food", "2025-06-01", "2025-06-14")
    assert (june["total"], june["count"]) == (12.0, 2)
    assert june["period"] == {"start": "2025-06-01", "end": "2025-06-14"}
    assert pack.analyze_by_category("food", "2025-06-15")["count"] == 0


@pytest.mark.parametrize("args, message", [
    ({"category": "pets"}, "unknown category 'pets'; known categories: Entertainment, Food & Dining, Groceries, "
                           "Income, Other, Shopping, Transportation"),
    ({"category": "food", "start_date": "June 1"}, "start_date must be a date as YYYY-MM-DD, got 'June 1'"),
    ({"category": "food", "end_date": "2025-02-30"}, "end_date must be a date as YYYY-MM-DD"),
    ({"category": "food", "start_date": "2025-06-10", "end_date": "2025-06-01"}, "start_date 2025-06-10 is after"),
])
def test_category_analysis_errors_say_what_to_fix(pack, args, message):
    with pytest.raises(ToolError) as e:
        pack.analyze_by_category(**args)
    assert message in str(e.value)


def test_search_finds_coffee_by_meaning(pack):
    found = pack.search_transactions("coffee")
    assert {t["merchant"] for t in found["transactions"][:2]} == {"Starbucks", "Blue Bottle Coffee"}
    assert {m["merchant"] for m in found["by_merchant"]} == {"Starbucks", "Blue Bottle Coffee"}
    assert found["total"] == 12.0


def test_search_tolerates_typos_and_orders_best_then_newest(pack):
    assert pack.search_transactions("netflx")["transactions"][0]["merchant"] == "Netflix"
    amazon = pack.search_transactions("amazon orders", limit=2)
    assert (len(amazon["transactions"]), amazon["matches"], amazon["total"]) == (2, 3, 80.0)
    assert [t["date"] for t in amazon["transactions"]] == ["2025-05-16", "2025-05-15"]
    shell = pack.search_transactions("the $45.00 charge")["transactions"][0]
    assert (shell["merchant"], shell["amount"], shell["score"]) == ("Shell", 45.0, 1.0)


def test_search_rejects_empty_queries(pack):
    with pytest.raises(ToolError, match="query must be a non-empty text"):
        pack.search_transactions("  ")


def test_sample_is_deterministic_and_loads_once(ctx, tmp_path):
    first = finance.write_sample(tmp_path / "a", TODAY)[0].read_bytes()
    assert first == finance.write_sample(tmp_path / "b", TODAY)[0].read_bytes()
    [report] = finance.load_sample(ctx)
    assert 230 <= report.imported <= 270
    assert [why.split(" ")[0] for _, why in report.skipped] == ["bad", "bad", "empty", "duplicate"]
    assert finance.load_sample(ctx) == []
    month = finance.Pack(ctx).get_spending_summary("last_month")
    assert month["count"] > 20 and month["income"] > 0


def test_tools_run_through_the_registry_and_runner(pack, ctx):
    registry = load_packs(["finance"])
    bind_handlers(registry, ["finance"], ctx)
    runner = ToolRunner(timeout_s=30)
    ok = runner.run(registry["search_transactions"], {"query": "starbucks", "limit": 1})
    assert ok.error is None and ok.result["transactions"][0]["merchant"] == "Starbucks"
    assert runner.run(registry["analyze_by_category"], {"category": "food"}).result["total"] == 24.5
    assert runner.run(registry["get_spending_summary"], {}).result["count"] == 8
    cases = [("search_transactions", {"query": "x", "limit": 0}, "limit: 0 is less than the minimum of 1"),
             ("search_transactions", {}, "'query' is a required property"),
             ("analyze_by_category", {"category": 5}, "category: 5 is not of type 'string'"),
             ("analyze_by_category", {"category": "food", "start_date": "June 1"}, "start_date must be a date"),
             ("get_spending_summary", {"period": "yesterday"}, "'yesterday' is not one of")]
    for name, args, message in cases:
        assert message in runner.run(registry[name], args).error
