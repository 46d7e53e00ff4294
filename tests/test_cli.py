"""The command line: route, eval, calibrate, and one-line errors."""
import json

import pytest

from funes.cli import cli

TOOLS = [
    {"name": "get_weather", "description": "Current weather and forecast for a city.", "pack": "demo",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    {"name": "convert_currency", "description": "Convert an amount of money from one currency to another.",
     "pack": "demo", "parameters": {"type": "object", "properties": {"amount": {"type": "number"}}}},
]
CASES = [
    ("Will it rain in Leeds tomorrow?", ["get_weather"]),
    ("How hot will it be in Cairo on Friday?", ["get_weather"]),
    ("Change 50 dollars into yen", ["convert_currency"]),
    ("How many euros is 200 pounds?", ["convert_currency"]),
    ("Who wrote Pride and Prejudice?", []),
    ("Tell me a joke", []),
    ("What's the capital of Peru?", []),
    ("Explain photosynthesis simply", []),
]


@pytest.fixture
def files(tmp_path):
    tools = tmp_path / "tools.jsonl"
    tools.write_text("\n".join(json.dumps(t) for t in TOOLS) + "\n")
    cases = tmp_path / "cases.jsonl"
    rows = [{"id": f"c{i}", "messages": [{"role": "user", "content": m}], "expected_tools": e,
             "tags": ["no_tool"] if not e else ["demo"]} for i, (m, e) in enumerate(CASES)]
    cases.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    inline = tmp_path / "inline.jsonl"
    inline.write_text("\n".join(json.dumps({**r, "tools": TOOLS}) for r in rows) + "\n")
    return tools, cases, inline


def test_route_prints_the_decision(runner):
    result = runner.invoke(cli, ["route", "What's the weather in Lima?"])
    assert result.exit_code == 0, result.output
    decision = json.loads(result.stdout)
    assert decision["selected"] == ["get_weather"]
    assert decision["candidates"][0]["signals"]["embedding"] > 0


def test_route_with_history_and_own_tools(runner, files, tmp_path):
    tools, _, _ = files
    history = tmp_path / "history.json"
    history.write_text(json.dumps([{"role": "user", "content": "Convert 10 dollars to euros"},
                                   {"role": "assistant", "content": "10 USD is 9.2 EUR."}]))
    result = runner.invoke(cli, ["route", "and to pounds?", "--tools", str(tools), "--history", str(history)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["selected"] == ["convert_currency"]


def test_eval_json_is_one_object(runner, files):
    tools, cases, inline = files
    for args in (["--cases", str(cases), "--tools", str(tools)], ["--cases", str(inline)]):
        result = runner.invoke(cli, ["eval", *args, "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        assert set(report) == {"n", "strict_accuracy", "lenient_accuracy", "no_tool", "recall_at", "latency_ms", "by_tag"}
        assert report["n"] == len(CASES)
        # the gate misses the weather questions over these two cards (docs/results.md, known misses)
        assert report["lenient_accuracy"] >= 0.6 and report["by_tag"]["no_tool"]["lenient_accuracy"] == 1.0
        assert set(report["recall_at"]) == {"1", "3", "5"}
        assert set(report["by_tag"]) == {"demo", "no_tool"}


def test_eval_served_scores_a_users_tools_beside_the_packs(runner, tmp_path):
    tools = tmp_path / "home.jsonl"
    tools.write_text(json.dumps({"name": "set_light", "description": "Turn a light on or off, or dim it",
                                 "parameters": {"type": "object", "properties": {"room": {"type": "string"}}}}) + "\n")
    cases = tmp_path / "mixed.jsonl"
    rows = [("turn off the kitchen lights", ["set_light"]), ("dim the bedroom light please", ["set_light"]),
            ("How much did I spend on groceries last month?", ["analyze_by_category"])]
    cases.write_text("".join(json.dumps({"id": f"m{i}", "messages": [{"role": "user", "content": m}],
                                         "expected_tools": e, "tags": ["mixed"]}) + "\n" for i, (m, e) in enumerate(rows)))
    alone = runner.invoke(cli, ["eval", "--cases", str(cases), "--tools", str(tools), "--json"])
    assert alone.exit_code == 1 and "unknown tool name(s) analyze_by_category" in alone.output  # no packs alone
    served = runner.invoke(cli, ["eval", "--cases", str(cases), "--tools", str(tools), "--served", "--json"])
    assert served.exit_code == 0, served.output
    assert json.loads(served.stdout)["lenient_accuracy"] == 1.0


def test_bench_times_each_registry_beside_the_packs_and_one_encode(runner, files):
    tools, cases, _ = files
    result = runner.invoke(cli, ["bench", "--cases", str(cases), "--tools", str(tools), "--repeat", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    routed = [name for name in report if name not in ("settings", "encode")]
    assert routed[0] == "builtin" and len(routed) == 2 and report[routed[1]]["tools"] == len(TOOLS)
    assert report["encode"]["n"] == report["builtin"]["n"] == len(CASES)
    for name in routed:  # each ratio is its p50 over the encode's
        assert report[name]["p50_ratio_to_encode"] == pytest.approx(report[name]["p50"] / report["encode"]["p50"],
                                                                    rel=0.01)


def test_eval_text_report(runner, files):
    tools, cases, _ = files
    result = runner.invoke(cli, ["eval", "--cases", str(cases), "--tools", str(tools)])
    assert result.exit_code == 0
    assert "lenient accuracy" in result.output and "no_tool" in result.output


def test_calibrate_writes_a_config_that_route_reads(runner, files, tmp_path):
    tools, cases, _ = files
    out = tmp_path / "calibrated.json"
    result = runner.invoke(cli, ["calibrate", "--cases", str(cases), "--tools", str(tools), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "held-out" in result.output
    fitted = json.loads(out.read_text())
    assert "TOOL_THRESHOLD" in fitted and "TOOL_THRESHOLDS" in fitted
    fitted["TOOL_THRESHOLD"] = 5.0  # impossible to reach: route must obey the file
    fitted["KEYWORD_MIN_SCORE"] = 9.0
    out.write_text(json.dumps(fitted))
    result = runner.invoke(cli, ["--config", str(out), "route", "Will it rain in Leeds?", "--tools", str(tools)])
    decision = json.loads(result.stdout)
    assert decision["selected"] == [] and decision["thresholds"]["TOOL_THRESHOLD"] == 5.0


@pytest.mark.parametrize("args, message", [
    (["eval", "--cases", "/nonexistent.jsonl"], "/nonexistent.jsonl: cases file not found"),
    (["route", "hi", "--tools", "/nonexistent.jsonl"], "/nonexistent.jsonl: tools file not found"),
    (["route", "hi", "--tools", "/tmp"], "/tmp: tools file expected, not a folder"),
    (["route", "hi", "--history", "/nonexistent.json"], "history file not found"),
    (["--config", "/nonexistent.json", "route", "hi"], "config file not found"),
    (["route", "   "], "non-empty user message"),
])
def test_errors_are_one_line(runner, args, message):
    result = runner.invoke(cli, args)
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


def test_unknown_tool_in_a_case_names_the_line(runner, files, tmp_path):
    tools, _, _ = files
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "messages": [{"role": "user", "content": "hi"}],
                               "expected_tools": ["get_wether"]}) + "\n")
    result = runner.invoke(cli, ["eval", "--cases", str(bad), "--tools", str(tools)])
    assert result.exit_code == 1
    assert f"{bad}:1: unknown tool name(s) get_wether" in result.output


def test_the_scripts_ignore_a_config_or_mcp_module_in_the_callers_directory(tmp_path, data_dir):
    import os
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "scripts" / "funes"
    for name in ("config", "mcp"):  # a user's own files, named like Funes' settings module and the MCP SDK
        (tmp_path / f"{name}.py").write_text(f"open({str(tmp_path / (name + '.ran'))!r}, 'w').close()\n")
    (tmp_path / "mymod.py").write_text('from funes import tool\n\n\n@tool\ndef ping_me() -> str:\n'
                                       '    """Answer pong."""\n    return "pong"\n')
    env = {**os.environ, "FUNES_DATA_DIR": str(data_dir), "FUNES_TOOL_MODULES": '["mymod"]', "FUNES_PACKS": "[]"}
    done = subprocess.run([str(script), "tools"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "ping_me" in done.stdout and "module:mymod" in done.stdout  # a module named from there still loads
    assert not list(tmp_path.glob("*.ran"))


def test_calibrate_served_fits_thresholds_beside_the_packs(runner, tmp_path):
    """A mixed registry (the packs and a user's cards) calibrates as it is served: thresholds over both groups."""
    tools = tmp_path / "home.jsonl"
    tools.write_text("".join(json.dumps({"name": n, "description": d, "parameters": {
        "type": "object", "properties": {"room": {"type": "string"}}}}) + "\n" for n, d in [
        ("set_light", "Turn a light on or off, or dim it"), ("lock_door", "Lock or unlock a door of the house")]))
    rows = [("turn off the kitchen lights", ["set_light"]), ("dim the bedroom light please", ["set_light"]),
            ("lock the front door", ["lock_door"]), ("is the back door locked? lock it", ["lock_door"]),
            ("How much did I spend on groceries last month?", ["analyze_by_category"]),
            ("tell me a joke", []), ("what is a lumen?", [])] * 2
    cases = tmp_path / "mixed.jsonl"
    cases.write_text("".join(json.dumps({"id": f"m{i}", "messages": [{"role": "user", "content": m}],
                                         "expected_tools": e, "tags": ["mixed"]}) + "\n" for i, (m, e) in enumerate(rows)))
    out = tmp_path / "fitted.json"
    result = runner.invoke(cli, ["calibrate", "--cases", str(cases), "--tools", str(tools), "--served",
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "TOOL_THRESHOLD" in json.loads(out.read_text())
