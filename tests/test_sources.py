"""Where tools come from: tools files in three shapes, Python modules, installed plugins, and their errors."""
import json
import subprocess
import sys
import textwrap

import pytest

import config
from funes.errors import RegistryError
from funes.proxy.filter import cards_of
from funes.tools.loaders import load_cards, load_file, read_cards
from funes.tools.sources import configured

LIGHTS = {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"]}
OPENAI = [{"type": "function", "function": {"name": "lights_off", "description": "Turn off the lights in a room.",
                                            "parameters": LIGHTS}},
          {"type": "function", "function": {"name": "lock_door", "description": "Lock a door of the house."}}]
MCP_TOOLS = [{"name": "lights_off", "title": "Lights off", "description": "Turn off the lights in a room.",
              "inputSchema": LIGHTS, "outputSchema": {"type": "object"}, "annotations": {"destructiveHint": False}},
             {"name": "lock_door", "title": "Lock the door", "inputSchema": {"type": "object", "properties": {}}}]
FUNES = [{"name": "lights_off", "description": "Turn off the lights in a room.", "parameters": LIGHTS,
          "examples": ["kitchen lights off"]},
         {"name": "lock_door", "description": "Lock a door of the house."}]

TWO_TOOLS = '''
from funes import tool


@tool(examples=["switch the kitchen lights off"])
def set_lights(room: str, on: bool = False) -> str:
    """Switch the lights of a room on or off.

    Args:
        room: The room, e.g. kitchen.
        on: True to switch them on.
    """
    return f"{room} lights {'on' if on else 'off'}"


@tool(name="thermostat")
def set_temperature(celsius: float) -> str:
    """Set the thermostat."""
    return f"{celsius:g} C"


def helper():
    """Not a tool: not decorated."""
'''


def settings(**overrides):
    return config.load({"PACKS": [], "TOOLS_FILES": [], "TOOL_MODULES": [], **overrides})


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return str(path)


@pytest.mark.parametrize("shape, text", [
    ("openai list", json.dumps(OPENAI, indent=2)),
    ("openai jsonl", "\n".join(json.dumps(t) for t in OPENAI)),
    ("mcp tools/list result", json.dumps({"tools": MCP_TOOLS, "nextCursor": None}, indent=2)),
    ("mcp json-rpc response", json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": MCP_TOOLS}})),
    ("mcp list", json.dumps(MCP_TOOLS, indent=2)),
    ("funes cards in a tools object", json.dumps({"tools": FUNES}, indent=2)),
])
def test_every_file_shape_loads_as_cards_that_cannot_run_here(tmp_path, shape, text):
    path = tmp_path / ("t.jsonl" if "jsonl" in shape else "t.json")
    path.write_text(text)
    registry = load_file(path)
    assert registry.names == ["lights_off", "lock_door"]
    lights = registry["lights_off"]
    assert lights.description == "Turn off the lights in a room." and lights.parameters == LIGHTS
    assert registry["lock_door"].parameters["type"] == "object"
    assert {t.source for t in registry} == {f"file:{path}"} and not any(t.runnable for t in registry)
    assert lights.to_dict()["source"] == f"file:{path}" and lights.to_dict()["runnable"] is False


def test_an_mcp_tool_without_a_description_is_described_by_its_title(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"tools": MCP_TOOLS}))
    assert load_file(path)["lock_door"].description == "Lock the door"


def test_tools_keep_their_lines_inside_an_mcp_result(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{\n  "tools": [\n    {"name": "a", "inputSchema": {"type": "object"}},\n'
                    '    {"name": "b", "inputSchema": {"type": "object", "properties": []}}\n  ]\n}\n')
    assert [where for where, _ in read_cards(path)] == [f"{path}:3", f"{path}:4"]
    with pytest.raises(RegistryError, match=rf"t.json:4: card 'b': invalid JSON Schema at properties"):
        load_file(path)


@pytest.mark.parametrize("card, message", [
    ({"type": "function", "function": {"description": "no name"}}, r't.json:2 must be \{"type": "function"'),
    ({"type": "function", "function": {"name": "x", "parameters": "text"}}, r"t.json:2: card 'x': 'parameters' must"),
    ({"name": "x", "inputSchema": {"type": "array"}}, r"t.json:2: card 'x': 'parameters' must be a JSON Schema"),
    ({"name": 3, "inputSchema": {"type": "object"}}, r"t.json:2: an MCP tool needs a string 'name'"),
    ({"name": "x", "description": "A", "title": "X"}, r"t.json:2: unknown card field\(s\): title"),
])
def test_a_malformed_tool_of_any_shape_names_its_file_and_line(tmp_path, card, message):
    path = tmp_path / "t.json"
    path.write_text(json.dumps([card], indent=2))
    with pytest.raises(RegistryError, match=message):
        load_file(path)


def test_a_request_may_bring_openai_or_mcp_tools_and_the_proxy_reads_them_the_same_way():
    assert load_cards(OPENAI).names == load_cards(MCP_TOOLS).names == ["lights_off", "lock_door"]
    assert load_cards(OPENAI)["lights_off"].source == "request"
    assert cards_of(OPENAI) == [
        {"name": "lights_off", "description": "Turn off the lights in a room.", "parameters": LIGHTS},
        {"name": "lock_door", "description": "Lock a door of the house."}]
    with pytest.raises(RegistryError, match=r"tools\[1\] must be"):
        cards_of([OPENAI[0], {"type": "function"}])


def test_a_source_is_not_part_of_the_cards_hash(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(OPENAI))
    assert load_file(path).hash() == load_cards(OPENAI).hash()


def test_decorated_functions_of_a_py_file_become_runnable_tools(tmp_path):
    path = write(tmp_path / "mytools.py", TWO_TOOLS)
    registry = configured(settings(TOOL_MODULES=[path]))
    assert registry.names == ["set_lights", "thermostat"]  # the undecorated helper is not a tool
    lights = registry["set_lights"]
    assert lights.runnable and lights.source == f"module:{path}"
    assert lights.examples == ("switch the kitchen lights off",)
    assert lights.parameters["properties"]["room"] == {"type": "string", "description": "The room, e.g. kitchen."}
    assert lights.parameters["required"] == ["room"]
    assert lights.run(room="hall") == "hall lights off" and registry["thermostat"].run(celsius=21) == "21 C"


def test_a_module_name_on_the_path_loads_beside_packs_and_files(tmp_path, monkeypatch):
    write(tmp_path / "house_tools_mod.py", TWO_TOOLS)
    monkeypatch.syspath_prepend(str(tmp_path))
    tools_file = tmp_path / "tools.json"
    tools_file.write_text(json.dumps(OPENAI))
    registry = configured(settings(PACKS=["assistant"], TOOLS_FILES=[str(tools_file)],
                                   TOOL_MODULES=["house_tools_mod"]))
    sources = {t.name: t.source for t in registry}
    assert sources == {"get_weather": "pack:assistant", "get_datetime": "pack:assistant",
                       "lights_off": f"file:{tools_file}", "lock_door": f"file:{tools_file}",
                       "set_lights": "module:house_tools_mod", "thermostat": "module:house_tools_mod"}


def _dist(tmp_path, name, entry_point, module_text):
    """A package as pip would leave it: its module and a dist-info whose entry_points.txt names a funes.tools entry."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[funes.tools]\n{entry_point}\n")
    module = entry_point.split("=")[1].strip().split(":")[0]
    write(site / f"{module}.py", module_text)
    return str(site)


def test_an_installed_plugin_module_adds_its_tools(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(_dist(tmp_path, "funes-house", "house = funes_house_plugin", TWO_TOOLS))
    registry = configured(settings())
    assert registry.names == ["set_lights", "thermostat"]
    assert {t.source for t in registry} == {"plugin:funes-house"} and registry["thermostat"].runnable


def test_a_plugin_callable_may_return_plain_functions(tmp_path, monkeypatch):
    text = '''
    def greet(name: str) -> str:
        """Greet someone by name."""
        return "hello " + name

    def register():
        return [greet]
    '''
    monkeypatch.syspath_prepend(_dist(tmp_path, "funes-greet", "greet = funes_greet_plugin:register", text))
    tool = configured(settings())["greet"]
    assert tool.source == "plugin:funes-greet" and tool.run(name="Ana") == "hello Ana"
    assert tool.description == "Greet someone by name."


BAD_MODULES = {
    "missing module": ("no_such_tools_module_x", None, r"^TOOL_MODULES: no module named 'no_such_tools_module_x'"),
    "missing file": ("{tmp}/gone.py", None, r"^TOOL_MODULES: .*/gone.py: file not found$"),
    "import raises": ("{tmp}/boom.py", "raise RuntimeError('no config for the lights')\n",
                      r"^TOOL_MODULES: .*/boom.py failed to import: RuntimeError: no config for the lights$"),
    "needs a missing package": ("{tmp}/needs.py", "import not_installed_pkg_x\n",
                                r"failed to import: ModuleNotFoundError: No module named 'not_installed_pkg_x'"),
    "syntax error": ("{tmp}/syntax.py", "def broken(:\n",
                     r"^TOOL_MODULES: .*/syntax.py failed to import: SyntaxError"),
    "no decorated function": ("{tmp}/plain.py", "def f(x: int):\n    return x\n",
                              r"module:.*/plain.py: no @funes.tool"),
    "var args": ("{tmp}/star.py", "from funes import tool\n@tool\ndef f(*names: str):\n    '''F.'''\n",
                 r"module:.*/star.py: tool 'f': argument \*names cannot be described by a JSON Schema"),
    "unknown annotation": ("{tmp}/hint.py", "from funes import tool\n@tool\ndef f(x: 'Missing'):\n    '''F.'''\n",
                           r"module:.*/hint.py: tool 'f': cannot read its signature: NameError"),
    "same name as a pack tool": ("{tmp}/dup.py", "from funes import tool\n@tool\ndef get_weather(city: str):\n"
                                 "    '''Weather.'''\n",
                                 r"^duplicate tool 'get_weather': module:.*/dup.py and pack:assistant both define it$"),
}


@pytest.mark.parametrize("case", BAD_MODULES)
def test_a_bad_tool_module_is_one_clear_line(tmp_path, case):
    spec, text, message = BAD_MODULES[case]
    spec = spec.format(tmp=tmp_path)
    if text is not None:
        write(tmp_path / spec.rsplit("/", 1)[1], text)
    with pytest.raises(RegistryError, match=message) as error:
        configured(settings(PACKS=["assistant"], TOOL_MODULES=[spec]))
    assert "\n" not in str(error.value) and error.value.__cause__ is None


def test_a_broken_plugin_names_its_package(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(_dist(tmp_path, "funes-broken", "broken = funes_broken_plugin:missing", "X = 1\n"))
    with pytest.raises(RegistryError, match=r"^plugin:funes-broken: entry point broken = funes_broken_plugin:missing "
                                            r"failed: AttributeError"):
        configured(settings())


def test_the_same_tool_in_two_files_names_both(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(OPENAI[:1]))
    second.write_text(json.dumps(MCP_TOOLS[:1]))
    with pytest.raises(RegistryError, match=rf"b.json:1: duplicate tool 'lights_off': file:{second} and "
                                            rf"file:{first} both define it"):
        configured(settings(TOOLS_FILES=[str(first), str(second)]))


def test_a_card_may_require_a_tool_of_another_source_but_not_one_nowhere(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"name": "plan_route", "description": "Plan a route.", "requires": ["search_pois"]}]))
    assert configured(settings(PACKS=["trip"], TOOLS_FILES=[str(path)]))["plan_route"].requires == ("search_pois",)
    with pytest.raises(RegistryError, match=r"^card 'plan_route': 'requires' names 'search_pois', which is not a tool"):
        configured(settings(PACKS=["assistant"], TOOLS_FILES=[str(path)]))


def test_funes_exports_the_decorator_without_importing_the_tools_at_import_time():
    code = ("import sys, funes; assert 'funes.tools.loaders' not in sys.modules; from funes import tool; "
            "from funes.tools.loaders import tool as marked; assert tool is marked; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
