"""The documentation: every setting in docs/settings.md, and every relative link in README.md and docs/ resolves."""
import json
import re
from pathlib import Path

import pytest

import config

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
ROW = re.compile(r"^\| `FUNES_(\w+)` \| `(.*?)` \|", re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")  # [text](target): Markdown inline links


def settings_rows() -> dict[str, str]:
    return dict(ROW.findall((ROOT / "docs" / "settings.md").read_text(encoding="utf-8")))


def test_every_setting_has_help_and_a_row_with_its_default_in_docs_settings():
    rows = settings_rows()
    for setting in config.SETTINGS:
        assert setting.help.strip(), setting.name
        assert setting.name in rows, f"docs/settings.md does not document {setting.name} (python -m funes settings)"
        assert rows[setting.name] == json.dumps(setting.default), f"docs/settings.md: {setting.name}'s default"


def test_docs_settings_names_no_setting_that_is_gone():
    assert sorted(set(settings_rows()) - {s.name for s in config.SETTINGS}) == []


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_an_existing_file(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)  # code is not links
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # http(s), mailto, an anchor on the same page
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            broken.append(target)
    assert broken == [], f"{page.name} links to missing files"
