"""Where the configured tools come from, and the one registry they make.

Four sources, loaded in this order into one registry (a name defined twice is an error naming both):
  pack:<name>     the built-in packs in PACKS (their handlers are bound later, by `context.bind_handlers`)
  file:<path>     the tools files in TOOLS_FILES: Funes cards, OpenAI/Ollama tools or MCP `tools/list` results,
                  routable but run by the caller
  module:<name>   the Python modules in TOOL_MODULES (module names or .py paths): each `@funes.tool`
                  function, run here
  plugin:<dist>   installed packages declaring a `funes.tools` entry point (a module, or a callable returning
                  functions), as simonw/llm's plugins do
  mcp:<server>    the tools of the MCP servers in MCP_SERVERS' file (funes.mcp), run over MCP while the server is
                  up; a name another tool already has is namespaced `<server>__<name>`
Any failure is one RegistryError line naming the module, file or plugin: never a traceback.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import logging
import re
import sys
import types
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

from funes.errors import RegistryError
from funes.tools.loaders import exits_refused, from_function, load_packs
from funes.tools.registry import Registry, Tool

ENTRY_POINT_GROUP = "funes.tools"
_SAFE = re.compile(r"[^A-Za-z0-9_-]")  # what a server's name may keep in a namespaced tool name
log = logging.getLogger(__name__)


def configured(settings: dict[str, Any], servers=None, check_requires: bool = True) -> Registry:
    """The registry of every configured source: packs, tools files, Python modules, installed plugins, and the
    tools of `servers` (a started funes.mcp.client.ServerPool) where given; `check_requires` False leaves a tool's
    `requires` unchecked (the servers were not started, and a required tool may be theirs)."""
    registry = load_packs(settings["PACKS"], settings["TOOLS_FILES"])
    modules = settings.get("TOOL_MODULES") or []
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise RegistryError("TOOL_MODULES must be a list of module names or .py paths")
    for spec in modules:
        source = f"module:{spec}"
        with exits_refused():  # os._exit in the module is its import's error, naming it, not a silent end
            module = import_module(spec)
        _add(registry, collect(module, source, settings))
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        source = f"plugin:{entry.dist.name if entry.dist else entry.name}"
        with exits_refused():
            tools = from_plugin(entry, source, settings)
        _add(registry, tools)
    if servers is None:  # with MCP servers, a required tool may be one of a server not up yet
        if check_requires:
            registry.check_requires()
        return registry
    return with_servers(registry, servers)


def with_servers(registry: Registry, servers) -> Registry:
    """`registry` without its MCP cards, plus the servers' current ones (handlers of the others kept as bound);
    `servers` is a funes.mcp.client.ServerPool, handed in: this layer imports nothing above it."""
    out = Registry(t for t in registry if not t.source.startswith("mcp:"))
    for tool in servers.cards():
        if tool.name in out:
            tool = dataclasses.replace(tool, name=f"{_SAFE.sub('_', tool.server)}__{tool.name}")
        if tool.name in out:  # namespaced and still taken: skipped, with the reason in the log
            log.warning("%s: tool %r skipped: the name is taken", tool.source, tool.remote_name)
            continue
        out.add(tool)
    return out


def _add(registry: Registry, tools: Iterable[Tool]) -> None:
    for tool in tools:
        registry.add(tool)  # a duplicate's error names both sources


def check_exist(settings: dict[str, Any]) -> None:
    """RegistryError for a TOOLS_FILES file or TOOL_MODULES module that does not exist, importing nothing (so a
    command reports it before any model loads)."""
    for path in settings.get("TOOLS_FILES") or []:
        if isinstance(path, str) and not Path(path).is_file():
            raise RegistryError(f"TOOLS_FILES: {path}: tools file not found")
    for spec in settings.get("TOOL_MODULES") or []:
        if not isinstance(spec, str):
            continue  # `configured` names the wrong type
        if _is_path(spec):
            if not Path(spec).expanduser().is_file():
                raise RegistryError(f"TOOL_MODULES: {spec}: file not found")
        elif importlib.util.find_spec(spec.split(".")[0]) is None:  # the top package only: nothing is imported
            raise RegistryError(f"TOOL_MODULES: no module named {spec!r} (installed, or on PYTHONPATH?)")


def _is_path(spec: str) -> bool:
    """Whether a TOOL_MODULES entry names a .py file rather than a module."""
    return spec.endswith(".py") or "/" in spec or "\\" in spec


def import_module(spec: str) -> types.ModuleType:
    """The module named `spec`, or the .py file at that path, imported (RegistryError naming it if it cannot be)."""
    if _is_path(spec):
        return _import_file(Path(spec).expanduser())
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as e:
        if e.name and (spec == e.name or spec.startswith(e.name + ".")):
            raise RegistryError(f"TOOL_MODULES: no module named {spec!r} (installed, or on PYTHONPATH?)") from None
        raise RegistryError(f"TOOL_MODULES: module {spec!r} failed to import: {_one_line(e)}") from None
    except Exception as e:  # the user's module raised while importing
        raise RegistryError(f"TOOL_MODULES: module {spec!r} failed to import: {_one_line(e)}") from None


def _import_file(path: Path) -> types.ModuleType:
    """Import a .py file under a name of its own, so two files with one stem never meet in sys.modules."""
    if not path.is_file():
        raise RegistryError(f"TOOL_MODULES: {path}: file not found")
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
    name = f"funes_tool_module_{path.stem}_{digest}"
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise RegistryError(f"TOOL_MODULES: {path}: not a Python file")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    try:
        loader_spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:  # SyntaxError, an import it needs, sys.exit(): one line naming the file
        sys.modules.pop(name, None)
        raise RegistryError(f"TOOL_MODULES: {path} failed to import: {_one_line(e)}") from None
    return module


def collect(module: types.ModuleType, source: str, settings: dict[str, Any] | None = None) -> list[Tool]:
    """Every `@tool` function of a module as a runnable card; a module with none is an error."""
    marked = list({id(f): f for f in vars(module).values()  # one card per function, whatever names it has
                   if callable(f) and not inspect.isclass(f) and hasattr(f, "__funes_tool__")}.values())
    if not marked:
        raise RegistryError(f"{source}: no @funes.tool functions found (decorate each tool with `@tool`)")
    return [_card(f, source, settings) for f in marked]


def from_plugin(entry: metadata.EntryPoint, source: str, settings: dict[str, Any] | None = None) -> list[Tool]:
    """The tools of one `funes.tools` entry point: a module's `@tool` functions, or what its callable returns."""
    try:
        target = entry.load()
        if isinstance(target, types.ModuleType):
            return collect(target, source, settings)
        functions = list(target())
    except RegistryError:
        raise
    except Exception as e:
        raise RegistryError(f"{source}: entry point {entry.name} = {entry.value} failed: {_one_line(e)}") from None
    if not functions or not all(callable(f) for f in functions):
        raise RegistryError(f"{source}: entry point {entry.name} = {entry.value} must return a list of functions")
    return [_card(f, source, settings) for f in functions]


def _card(func: Callable, source: str, settings: dict[str, Any] | None) -> Tool:
    """One function's card, its errors naming the source; a cache_ttl naming a setting reads it."""
    try:
        tool = from_function(func, source)
    except RegistryError as e:
        raise RegistryError(f"{source}: {e}") from None
    if isinstance(tool.cache_ttl, str):
        if settings is None or tool.cache_ttl not in settings:
            raise RegistryError(f"{source}: tool {tool.name!r}: cache_ttl names no setting {tool.cache_ttl!r}")
        return dataclasses.replace(tool, cache_ttl=settings[tool.cache_ttl])
    return tool


def _one_line(error: BaseException) -> str:
    """An exception as `Type: message` on one line, with where a SyntaxError is."""
    if isinstance(error, SyntaxError) and error.lineno:
        return f"SyntaxError: {error.msg} (line {error.lineno})"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
