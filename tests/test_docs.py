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


def test_docs_routing_holds_the_rules_table_the_code_makes():
    from funes.cli.routing import rules_table

    assert rules_table() in (ROOT / "docs" / "routing.md").read_text(encoding="utf-8"), \
        "docs/routing.md: paste `python -m funes rules` over its rules table"


def test_docs_routing_names_every_decided_by_value_and_no_other():
    from funes.selection.policy import DECIDERS

    text = (ROOT / "docs" / "routing.md").read_text(encoding="utf-8")
    listed = text[text.index("one\nof `policy.DECIDERS`:"):].split("), `reason`")[0]
    assert re.findall(r"`(\w+)`", listed) == list(DECIDERS)


# docs/architecture.md: "each layer imports only the ones below it"; what each lower layer must not import.
ABOVE = {"build", "service", "tool_loop", "web", "proxy", "mcp", "cli", "eval", "training"}
NOT_IMPORTED = {
    "tools": ABOVE | {"selection", "store", "cards", "llm"},
    "memory": ABOVE | {"selection", "store", "cards", "llm", "tools"},
    "llm": ABOVE | {"selection", "store", "cards"},
    "selection": ABOVE | {"store", "cards", "llm"},
    "store": ABOVE | {"cards", "llm"},
}


def test_each_layer_imports_only_the_ones_below_it():
    import ast

    wrong = []
    for layer, banned in NOT_IMPORTED.items():
        folder = ROOT / layer if layer == "memory" else ROOT / "funes" / layer
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
                wrong += [f"{path.relative_to(ROOT)} imports {n}" for n in names
                          if n.startswith("funes.") and n.split(".")[1] in banned]
    assert wrong == []
