"""Scoring as in FORMAT.md, and case files' errors."""
import json

import pytest

from funes.errors import BadRequest
from funes.eval.scoring import Tally, _case, lenient_ok, load_cases


def case(expected, acceptable=None, no_tool_ok=False, tags=("t",)):
    data = {"id": "c", "messages": [{"role": "user", "content": "x"}], "expected_tools": expected, "tags": list(tags)}
    if acceptable is not None:
        data["acceptable_tools"] = acceptable
    if no_tool_ok:
        data["no_tool_acceptable"] = True
    return _case(data, "f:1")


@pytest.mark.parametrize("c, picked, ok", [
    (case([]), set(), True),
    (case([]), {"a"}, False),
    (case([], acceptable=["a"]), {"a"}, True),
    (case(["a"]), set(), False),
    (case(["a"], no_tool_ok=True), set(), True),
    (case(["a"]), {"a"}, True),
    (case(["a"]), {"a", "b"}, False),
    (case(["a", "b"]), {"a"}, False),
    (case(["a", "b"], acceptable=["a", "b"]), {"a"}, True),
    (case(["a"], acceptable=["a", "c"]), {"c"}, True),
    (case(["a"], acceptable=["a", "c"]), {"b"}, False),
])
def test_lenient(c, picked, ok):
    assert lenient_ok(c, picked) is ok


def test_tally_report():
    tally = Tally()
    tally.add(case(["a"], tags=("x",)), {"a"}, ["a", "b"], 2.0)
    tally.add(case(["a", "b"], tags=("x", "multi")), {"a"}, ["a", "c", "d", "b"], 4.0)
    tally.add(case([]), set(), ["a"], 6.0)
    tally.add(case([]), {"b"}, ["b"], 8.0)
    r = tally.report()
    assert r["n"] == 4 and r["strict_accuracy"] == 0.5 and r["lenient_accuracy"] == 0.5
    assert r["no_tool"] == {"precision": 1.0, "recall": 0.5, "f1": 0.6667}
    assert r["recall_at"] == {"1": 0.75, "3": 0.75, "5": 1.0}
    assert r["latency_ms"] == {"p50": 5.0, "p95": 7.7}
    assert r["by_tag"]["x"] == {"n": 2, "lenient_accuracy": 0.5}
    assert r["by_tag"]["multi"] == {"n": 1, "lenient_accuracy": 0.0}


@pytest.mark.parametrize("line, message", [
    ("{oops", "cases.jsonl:2: invalid JSON"),
    ('{"id": "b", "messages": []}', "cases.jsonl:2: case field 'expected_tools'"),
    ('[1]', "cases.jsonl:2: a case must be a JSON object"),
])
def test_bad_case_lines_name_file_and_line(tmp_path, line, message):
    good = json.dumps({"id": "a", "messages": [{"role": "user", "content": "hi"}], "expected_tools": []})
    path = tmp_path / "cases.jsonl"
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(BadRequest, match=message):
        load_cases(str(path))


def test_missing_cases_file():
    with pytest.raises(BadRequest, match="not found"):
        load_cases("/nonexistent/cases.jsonl")
