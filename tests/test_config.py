"""Settings: defaults, file, FUNES_* environment, overrides; every one documented."""
import json
import os

import pytest

import config

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


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
    ('{"TOOL_TRESHOLD": 0.5}', "unknown setting"),
])
def test_bad_config_files(tmp_path, text, message):
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        config.load(path=str(path))
    with pytest.raises(ValueError, match="not found"):
        config.load(path=str(tmp_path / "missing.json"))


def test_every_setting_has_help_and_is_in_the_readme():
    readme = open(README, encoding="utf-8").read()
    for setting in config.SETTINGS:
        assert setting.help.strip(), setting.name
        assert f"`FUNES_{setting.name}`" in readme, f"README does not document {setting.name}"
