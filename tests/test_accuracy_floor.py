"""The accuracy floor: every row of docs/results.md's floor table, measured now, at most 0.02 below what it states
(one case, on a row of fewer than 50).

A change that costs routing quality fails here, not silently in a later measurement. Rows and their kinds
(the packs, bare cards alone, a user's cards served beside the packs) are funes/eval/rows.py's; after a change
that moves them, `bench/rows.py --markdown` prints the table to put in docs/results.md.
"""
import json
import re
from pathlib import Path

import pytest

from funes.eval import rows
from tests.conftest import SHARED_EVAL

SLACK = 0.02
RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results.md"


def stated() -> dict[str, tuple[float, float]]:
    """Each row's (lenient, first) from the table under "## Accuracy floor" in docs/results.md."""
    text = RESULTS.read_text(encoding="utf-8").split("## Accuracy floor", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"^\| ([a-z0-9_]+ (?:packs|bare|served)) \| \d+ \| ([0-9.]+) \| ([0-9.]+) \|", text, re.M)
    return {name: (float(lenient), float(first)) for name, lenient, first in found}


def test_the_floor_table_has_every_row():
    assert set(stated()) == {name for name, *_ in rows.ROWS}


@pytest.fixture(scope="module")
def parts(data_dir):
    if not Path(SHARED_EVAL, "seed_dev.jsonl").is_file():
        pytest.skip(f"no labelled data at {SHARED_EVAL}")
    return rows.parts_for({"DATA_DIR": data_dir})


@pytest.mark.parametrize("name,kind,cases,tools", rows.ROWS, ids=[r[0] for r in rows.ROWS])
def test_a_row_stays_within_002_of_what_results_states(parts, name, kind, cases, tools):
    lenient, first = stated()[name]
    got = rows.measure(parts, kind, rows.path(cases, SHARED_EVAL), tools and rows.path(tools, SHARED_EVAL))
    slack = max(SLACK, 1 / got["n"])  # one case of a small row may move with the machine's arithmetic
    assert got["lenient"] >= lenient - slack, f"{name}: lenient {got['lenient']:.3f}, docs/results.md {lenient:.3f}"
    assert got["first"] >= first - slack, f"{name}: right tool first {got['first']:.3f}, docs/results.md {first:.3f}"


def test_a_row_routes_enriched_only_with_every_card_enriched(data_dir, tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([
        {"name": "rows_test_forecast", "description": "Weather forecast for a city",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "rows_test_jot", "description": "Save a short note",
         "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}]))
    settings = {"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db"}
    enriched = rows.parts_for(settings, enriched=True)
    with pytest.raises(rows.NotEnriched, match="tools.json: some bare cards are not enriched yet"):
        rows.registry_for(enriched, "bare", str(tools))
    for tool in rows.load_file(str(tools)):
        enriched.enrichment.cache.done(tool, {"examples": [f"{tool.description}, please {i}" for i in range(6)],
                                              "negatives": [], "keywords": []})
    routed = rows.registry_for(enriched, "bare", str(tools))
    assert [len(t.generated.examples) for t in routed] == [6, 6]
    bare = rows.registry_for(rows.parts_for(settings), "bare", str(tools))  # the same cache, read only when asked
    assert [t.generated for t in bare] == [None, None]
