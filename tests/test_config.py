"""Settings: defaults, file, FUNES_* environment, overrides. (That each is documented: tests/test_docs.py.)"""
import json
import subprocess

import pytest

import config
from funes.cli import cli


def test_layers_in_order(tmp_path, monkeypatch):
    path = tmp_path / "funes.json"
    path.write_text(json.dumps({"TOOL_THRESHOLD": 0.4, "MAX_TOOLS": 2}))
    monkeypatch.setenv("FUNES_MAX_TOOLS", "5")
    monkeypatch.setenv("FUNES_DATA_DIR", "/var/funes")
    cfg = config.load({"HISTORY_TURNS": 0}, path=str(path))
    assert cfg["TOOL_THRESHOLD"] == 0.4          # file
    assert cfg["MAX_TOOLS"] == 5                 # environment beats file, parsed as JSON
    assert cfg["DATA_DIR"] == "/var/funes"       # not JSON: kept as a string
    assert cfg["HISTORY_TURNS"] == 0             # explicit override wins
    assert cfg["NONE_VETO"] == config.DEFAULTS["NONE_VETO"]


def test_config_file_from_environment(tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    path.write_text('{"TOOL_THRESHOLDS": {"get_weather": 0.3}}')
    monkeypatch.setenv("FUNES_CONFIG_FILE", str(path))
    assert config.load()["TOOL_THRESHOLDS"] == {"get_weather": 0.3}


@pytest.mark.parametrize("text, message", [
    ("{not json", "c.json:1: invalid JSON"),
    ("[1, 2]", "one JSON object"),
    ('{"TOOL_TRESHOLD": 0.5}', "c.json: TOOL_TRESHOLD is not a Funes setting; did you mean TOOL_THRESHOLD\\?$"),
    ('{"TOOL_TRESHOLD": 0.5, "ZZZ": 1}', "TOOL_THRESHOLD\\? \\(also unknown: ZZZ\\)$"),
    ('{"TOOL_THRESHOLD": "abc"}', 'c.json: TOOL_THRESHOLD: expected a number, got "abc"$'),
    ('{"MAX_TOOLS": true}', "c.json: MAX_TOOLS: expected an integer, got true$"),
    ('{"TOOL_THRESHOLD": NaN}', "c.json: TOOL_THRESHOLD: expected a finite number, got NaN$"),
])
def test_bad_config_files(tmp_path, text, message):
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        config.load(path=str(path))
    with pytest.raises(ValueError, match="not found"):
        config.load(path=str(tmp_path / "missing.json"))


@pytest.mark.parametrize("name, text, message", [
    ("TOOL_THRESHOLD", "abc", "FUNES_TOOL_THRESHOLD: expected a number, got 'abc'"),
    ("MAX_TOOLS", "true", "FUNES_MAX_TOOLS: expected an integer, got 'true'"),
    ("MAX_TOOLS", "2.5", "FUNES_MAX_TOOLS: expected an integer, got '2.5'"),
    ("TOOL_THRESHOLD", "Infinity", "FUNES_TOOL_THRESHOLD: expected a finite number, got 'Infinity'"),
    ("TOOL_THRESHOLD", "1e999", "FUNES_TOOL_THRESHOLD: expected a finite number, got '1e999'"),
    ("VECTOR_CACHE", "1", "FUNES_VECTOR_CACHE: expected true or false, got '1'"),
    ("PACKS", "finance", "FUNES_PACKS: expected a JSON list, got 'finance'"),
    ("TOOL_THRESHOLDS", "[0.3]", "FUNES_TOOL_THRESHOLDS: expected a JSON object, got '[0.3]'"),
])
def test_a_wrong_type_in_the_environment_fails_at_load_naming_the_variable(monkeypatch, name, text, message):
    monkeypatch.setenv(f"FUNES_{name}", text)
    with pytest.raises(ValueError) as raised:
        config.load()
    assert str(raised.value) == message


@pytest.mark.parametrize("overrides, message", [
    ({"MAX_TOOLS": True}, "MAX_TOOLS: expected an integer, got True"),
    ({"TOOL_THRESHOLD": "0.5"}, "TOOL_THRESHOLD: expected a number, got '0.5'"),
    ({"TOOL_THRESHOLD": float("nan")}, "TOOL_THRESHOLD: expected a finite number, got nan"),
    ({"DATA_DIR": None}, "DATA_DIR: expected a string, got None"),
])
def test_a_wrong_type_from_code_fails_at_load(overrides, message):
    with pytest.raises(ValueError) as raised:
        config.load(overrides)
    assert str(raised.value) == message


def test_numbers_are_accepted_as_their_settings_mean_them(monkeypatch):
    monkeypatch.setenv("FUNES_NAME_FUZZY_CUTOFF", "85.5")  # a 0-100 ratio whose default is a whole number
    monkeypatch.setenv("FUNES_OPENAI_API_KEY", "12345")    # a string setting takes the text as it is
    cfg = config.load({"TOOL_THRESHOLD": 1, "CONTEXT_PENALTY": 0, "POI_CACHE_TTL": 0.5})  # ints where floats are
    assert cfg["NAME_FUZZY_CUTOFF"] == 85.5 and cfg["OPENAI_API_KEY"] == "12345"
    assert cfg["TOOL_THRESHOLD"] == 1 and cfg["CONTEXT_PENALTY"] == 0 and cfg["POI_CACHE_TTL"] == 0.5


def test_every_default_has_its_settings_type():
    for setting in config.SETTINGS:
        assert config.load({setting.name: setting.default})[setting.name] == setting.default


def test_an_unknown_environment_name_is_a_warning_naming_the_closest_setting(monkeypatch, caplog):
    monkeypatch.setattr(config, "_warned", set())
    monkeypatch.setenv("FUNES_TOOL_TRESHOLD", "0.4")
    monkeypatch.setenv("FUNES_QWERTYUIOP", "1")
    monkeypatch.setenv("FUNES_CONFIG_FIEL", "c.json")
    monkeypatch.setenv("FUNES_CONFIG_FILE", "")  # read by load, not a setting
    with caplog.at_level("WARNING", logger="config"):
        cfg = config.load()
        config.load()  # reported once per process, not per load
    assert cfg["TOOL_THRESHOLD"] == config.DEFAULTS["TOOL_THRESHOLD"]
    assert [r.getMessage() for r in caplog.records] == [
        "FUNES_CONFIG_FIEL is not a Funes setting; did you mean FUNES_CONFIG_FILE?",
        "FUNES_QWERTYUIOP is not a Funes setting",
        "FUNES_TOOL_TRESHOLD is not a Funes setting; did you mean FUNES_TOOL_THRESHOLD?",
    ]


def test_a_retired_setting_is_ignored_with_a_warning_in_a_config_file_and_the_environment(tmp_path, monkeypatch,
                                                                                           caplog):
    """A config file `funes calibrate` wrote before a setting was removed still starts the service."""
    monkeypatch.setattr(config, "_warned", set())
    monkeypatch.setenv("FUNES_NONE_MARGIN", "-0.2")
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"MULTI_GAP": 0.06, "TOOL_THRESHOLD": 0.5}))
    with caplog.at_level("WARNING", logger="config"):
        cfg = config.load(path=str(path))
    assert cfg["TOOL_THRESHOLD"] == 0.5 and "MULTI_GAP" not in cfg and "NONE_MARGIN" not in cfg
    assert [r.getMessage() for r in caplog.records] == [
        "FUNES_NONE_MARGIN: NONE_MARGIN was removed on 2026-11-29 (it no longer paid; docs/changelog.md): ignored",
        f"{path}: MULTI_GAP was removed on 2026-11-29 (it no longer paid; docs/changelog.md): ignored",
    ]


@pytest.mark.parametrize("command", [["route", "hi"], ["serve"], ["decisions"]])
def test_the_cli_reports_a_bad_setting_in_one_line(runner, monkeypatch, command):
    monkeypatch.setenv("FUNES_MAX_TOOLS", "true")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("serve went on to `prepare`"))
    result = runner.invoke(cli, command)
    assert result.exit_code == 1
    assert result.output.splitlines() == ["Error: FUNES_MAX_TOOLS: expected an integer, got 'true'"]


@pytest.mark.parametrize("command", [["route", "hi"], ["serve"], ["decisions"]])
def test_a_short_api_key_is_refused_before_anything_starts(runner, monkeypatch, command):
    monkeypatch.setenv("FUNES_API_KEYS", '{"k-ana-123": "ana"}')  # a started service answered 500 to everything
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("serve went on to `prepare`"))
    result = runner.invoke(cli, command)
    assert result.exit_code == 1
    assert result.output.splitlines() == ["Error: API_KEYS: every key must be at least 16 characters long"]


@pytest.mark.parametrize("option, value", [("--port", "70000"), ("--port", "-1"), ("--workers", "0"),
                                           ("--threads", "0")])
def test_serve_refuses_ports_and_counts_out_of_range(runner, monkeypatch, option, value):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("serve went on to `prepare`"))
    result = runner.invoke(cli, ["serve", option, value])
    assert result.exit_code == 2 and f"Invalid value for '{option}'" in result.output


def test_prepare_reports_a_broken_tool_module_in_one_line(runner, monkeypatch, tmp_path, data_dir):
    (tmp_path / "broken.py").write_text("def broken(:\n    pass\n")
    monkeypatch.setenv("FUNES_DATA_DIR", str(data_dir))
    monkeypatch.setenv("FUNES_TOOL_MODULES", json.dumps([str(tmp_path / "broken.py")]))
    monkeypatch.setenv("FUNES_SAMPLE_DATA", "false")
    result = runner.invoke(cli, ["prepare"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.splitlines()[-1].startswith(f"Error: TOOL_MODULES: {tmp_path / 'broken.py'} failed to import:")
