"""Load tool cards from decorated Python functions and from JSON / JSONL files."""
from __future__ import annotations

import inspect
import json
import logging
import os
import threading
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import regex

from funes.errors import RegistryError
from funes.tools.formats import as_card, tool_list
from funes.tools.names import check_name
from funes.tools.registry import Registry, Tool, card_from_dict

log = logging.getLogger(__name__)

PACKS_DIR = Path(__file__).parent.parent / "packs"  # one folder per built-in pack, its cards in cards.json

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object",
               list: "array", tuple: "array"}
_ARG_LINE = regex.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_TOOLS_KEY = regex.compile(r'"tools"\s*:\s*\[')  # where an MCP result's list starts, for line numbers
_NO_SCHEMA = {inspect.Parameter.VAR_POSITIONAL: "*{}", inspect.Parameter.VAR_KEYWORD: "**{}",
              inspect.Parameter.POSITIONAL_ONLY: "{} (positional-only)"}  # arguments arrive by name, from JSON


def tool(func: Callable | None = None, *, name: str | None = None, pack: str = "custom",
         examples: Iterable[str] = (), negatives: Iterable[str] = (), keywords: Iterable[str] = (),
         cache_ttl: float | None = None):
    """Mark a function as a tool (`funes.tools.sources.collect` serves it; cache_ttl: seconds results keep)."""
    def mark(f: Callable) -> Callable:
        f.__funes_tool__ = {"name": name or f.__name__, "pack": pack, "examples": tuple(examples),
                            "negatives": tuple(negatives), "keywords": tuple(keywords), "cache_ttl": cache_ttl}
        return f
    return mark(func) if func is not None else mark


class ExitedAtImport(Exception):
    """A tool module called os._exit while it was imported (the import's error names the module)."""


@contextmanager
def exits_refused() -> Iterator[None]:
    """Around importing a user's tool module: os._exit in it raises ExitedAtImport with its code, which the import's
    error names with the module, instead of ending the process with no word said (no handler runs after it)."""
    real, importer = os._exit, threading.get_ident()

    def refuse(code: int = 0) -> NoReturn:
        if threading.get_ident() != importer:  # another thread's exit is none of the module's
            real(code)
        raise ExitedAtImport(f"it called os._exit({code}), which would end the process with exit code {code} "
                             "and no message")
    os._exit = refuse
    try:
        yield
    finally:
        os._exit = real


def _json_type(annotation: Any) -> dict[str, Any]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _json_type(inner[0]) if len(inner) == 1 else {}
    if origin is typing.Literal:
        return {"type": _JSON_TYPES.get(type(args[0]), "string"), "enum": list(args)}
    if origin in (list, tuple):
        return {"type": "array", "items": _json_type(args[0])} if args else {"type": "array"}
    if origin is dict:
        return {"type": "object"}
    return {"type": _JSON_TYPES[annotation]} if annotation in _JSON_TYPES else {}


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary and its `Args:` descriptions."""
    summary, args, current, in_args = [], {}, None, False
    for raw in inspect.cleandoc(doc or "").splitlines():
        line = raw.strip()
        if line in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args and line.endswith(":") and not raw.startswith(" "):
            in_args = False  # the next section (Returns:, Raises:) starts
        if not in_args:
            if not args and line and not line.endswith(":"):
                summary.append(line)
            continue
        match = _ARG_LINE.match(line)
        if match and raw.startswith("    ") and not raw.startswith("        "):
            current = match.group(1)
            args[current] = match.group(2)
        elif current and line:
            args[current] += " " + line
    return " ".join(summary), args


def from_function(func: Callable, source: str = "") -> Tool:
    """Build a runnable card from a function: schema from its signature, texts from its docstring."""
    meta = getattr(func, "__funes_tool__", {"name": func.__name__})
    check_name(meta["name"])  # a line break in a name would forge lines of the log
    description, arg_docs = parse_docstring(func.__doc__ or "")
    if not description:  # routing reads the description: without one a tool is found by its name alone
        log.warning("tool %r (%s) has no docstring: it is routed by its name alone", meta["name"], source or "python")
    return Tool(name=meta["name"], description=description, parameters=_parameters(func, meta["name"], arg_docs),
                pack=meta.get("pack", "custom"), examples=meta.get("examples", ()),
                negatives=meta.get("negatives", ()), keywords=meta.get("keywords", ()), handler=func,
                cache_ttl=meta.get("cache_ttl"), source=source)


def _parameters(func: Callable, name: str, arg_docs: dict[str, str]) -> dict[str, Any]:
    """The JSON Schema of a function's arguments (RegistryError when its signature has none)."""
    try:
        hints, signature = typing.get_type_hints(func), inspect.signature(func)
    except (NameError, TypeError, ValueError) as e:
        raise RegistryError(f"tool {name!r}: cannot read its signature: {type(e).__name__}: {e}") from None
    properties, required = {}, []
    for param in signature.parameters.values():
        if param.kind in _NO_SCHEMA:
            raise RegistryError(f"tool {name!r}: argument {_NO_SCHEMA[param.kind].format(param.name)} cannot be "
                                "described by a JSON Schema; give each argument a name")
        prop = _json_type(hints.get(param.name, str))
        if param.name in arg_docs:
            prop["description"] = arg_docs[param.name]
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
        elif param.default is not None:
            prop["default"] = param.default
        properties[param.name] = prop
    params = {"type": "object", "properties": properties}
    if required:
        params["required"] = required
    return params


def _json_list_items(text: str, path: str, start: int) -> list[tuple[int, Any]]:
    """Parse the JSON list opening at `start`, keeping the line each element starts on."""
    decoder, items = json.JSONDecoder(), []
    pos = start + 1
    counted, line = 0, 1  # lines counted up to `counted`: from the start each time, 10,000 tools took 3 s
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return items
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise RegistryError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
        items.append((line, obj))


def _json_items(text: str, path: str) -> list[tuple[int, Any]]:
    """The tools of a JSON file (a list, an MCP `{"tools": [...]}` result, or one tool), each with its line."""
    if text.lstrip().startswith("["):
        return _json_list_items(text, path, text.index("["))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise RegistryError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    tools = tool_list(data)
    if tools is None:
        return [(1, data)]
    match = _TOOLS_KEY.search(text)
    items = _json_list_items(text, path, match.end() - 1) if match else []
    return items if [obj for _, obj in items] == tools else [(1, obj) for obj in tools]


def read_cards(path: str | Path) -> list[tuple[str, dict]]:
    """Read card objects from a .json or .jsonl file, each with file:line; OpenAI and MCP tools become cards."""
    path = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise RegistryError(f"{path}: tools file not found") from None
    if path.endswith(".jsonl"):
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((n, json.loads(line)))
            except json.JSONDecodeError as e:
                raise RegistryError(f"{path}:{n}: invalid JSON: {e.msg}") from None
    else:
        rows = _json_items(text, path)
    return [(f"{path}:{n}", as_card(obj, f"{path}:{n}")) for n, obj in rows]


def load_file(path: str | Path, registry: Registry | None = None, source: str | None = None) -> Registry:
    """Load every card of a tools file into a registry (a new one by default); source: file:<path> unless given."""
    registry = registry if registry is not None else Registry()
    source = source or f"file:{path}"
    for where, data in read_cards(path):
        registry.add(card_from_dict(data, where, source), where)
    return registry


def load_cards(cards: list[Any], where: str = "tools", source: str = "request") -> Registry:
    """A registry from a list of tools in any shape `card_from_dict` reads (a case's inline tools, a request's)."""
    registry = Registry()
    for i, data in enumerate(cards):
        registry.add(card_from_dict(data, f"{where}[{i}]", source), f"{where}[{i}]")
    return registry


def load_packs(packs: Iterable[str], extra_files: Iterable[str] = ()) -> Registry:
    """The built-in packs named in config, plus any extra tools files."""
    registry = Registry()
    for pack in packs:
        path = PACKS_DIR / pack / "cards.json"
        if not path.exists():
            raise RegistryError(f"unknown pack {pack!r} (no {path})")
        load_file(path, registry, f"pack:{pack}")
    for path in extra_files:
        load_file(path, registry)
    return registry

