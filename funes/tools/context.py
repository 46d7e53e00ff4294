"""What tool packs are given to work with (`ToolContext`), and how their handlers reach the registry.

The pack contract is in `funes/packs/__init__.py`.
"""
from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import MetaData
from sqlalchemy.engine import Engine

from funes.errors import RegistryError
from funes.tools.registry import Registry


class TransientError(Exception):
    """A failure worth retrying (a network hiccup, a busy upstream); the runner backs off and tries again."""


@dataclass
class ToolContext:
    """The I/O a pack may use: the database, the sentence encoder, the data folder, settings, and a clock."""

    engine: Engine
    embed: Callable[[list[str]], np.ndarray]   # unit vectors, one row per text
    data_dir: Path
    settings: dict[str, Any]
    today: Callable[[], Any] = field(default=None)  # a date provider, swapped in tests for fixed numbers

    def __post_init__(self):
        if self.today is None:
            from datetime import date

            self.today = date.today


@dataclass
class ImportReport:
    """What an import did: rows stored and rows skipped with the reason for each."""

    path: str
    imported: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (line or item number, reason)

    def summary(self) -> str:
        lines = [f"{self.path}: {self.imported} imported, {len(self.skipped)} skipped"]
        lines += [f"  {where}: {why}" for where, why in self.skipped[:50]]
        if len(self.skipped) > 50:
            lines.append(f"  ... and {len(self.skipped) - 50} more")
        return "\n".join(lines)


def pack_module(name: str):
    """The Python module of a built-in pack, or None when the pack has no handlers."""
    try:
        return importlib.import_module(f"funes.packs.{name}")
    except ModuleNotFoundError as e:
        if e.name == f"funes.packs.{name}":
            return None
        raise


def pack_metadata(names: list[str]) -> tuple[MetaData, ...]:
    """The table definitions of the named packs."""
    return tuple(m.metadata for m in map(pack_module, names) if m is not None and hasattr(m, "metadata"))


def bind_handlers(registry: Registry, names: list[str], ctx: ToolContext) -> dict[str, Any]:
    """Instantiate each pack and attach its marked methods to the cards of the same name."""
    packs = {}
    for name in names:
        module = pack_module(name)
        if module is None or not hasattr(module, "Pack"):
            continue
        pack = module.Pack(ctx)
        for _, method in inspect.getmembers(pack, inspect.ismethod):
            meta = getattr(method, "__funes_tool__", None)
            if meta is None:
                continue
            if meta["name"] not in registry:
                raise RegistryError(f"pack {name!r} has a handler for {meta['name']!r}, which has no card")
            ttl = meta.get("cache_ttl")
            registry.bind(meta["name"], method, cache_ttl=ctx.settings[ttl] if isinstance(ttl, str) else ttl)
        packs[name] = pack
    return packs
