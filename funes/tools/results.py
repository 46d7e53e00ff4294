"""A tool's return value as plain JSON data, whatever Python object its handler returned."""
from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import json
import math
from collections.abc import Mapping
from typing import Any

RESULT_DEPTH = 64  # nesting kept in a tool's result; deeper is a bug or a trap, not data a model reads
INLINE_BYTES = 256  # bytes up to this many reach the model as base64; more only as a description


def plain(value: Any, depth: int = 0, path: set[int] | None = None) -> Any:
    """A tool's return value as plain JSON data: dates as ISO text, sets as sorted lists, dataclasses and models
    as objects, bytes described, non-finite floats as null, a circular reference named; anything else as text."""
    if value is None or type(value) in (bool, int, str):
        return value
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (bool, int, str, decimal.Decimal, enum.Enum)):  # an IntEnum, a StrEnum, a Decimal
        return _scalar(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes(bytes(value))
    if depth >= RESULT_DEPTH:
        return f"<nested deeper than {RESULT_DEPTH} levels>"
    path = set() if path is None else path
    if id(value) in path:
        return f"<circular reference to a {type(value).__name__}>"
    path.add(id(value))
    try:
        return _container(value, depth + 1, path)
    finally:
        path.discard(id(value))


def _container(value: Any, depth: int, path: set[int]) -> Any:
    """A collection or an object with fields, its parts made plain in turn (else its text)."""
    if isinstance(value, Mapping):
        return {_key(k, depth, path): plain(v, depth, path) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, depth, path) for v in value]
    if isinstance(value, (set, frozenset)):
        try:
            ordered = sorted(value)
        except TypeError:  # mixed kinds: an order that is at least the same each time
            ordered = sorted(value, key=repr)
        return [plain(v, depth, path) for v in ordered]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), depth, path) for f in dataclasses.fields(value)}
    for method in ("model_dump", "dict", "tolist"):  # pydantic 2 and 1, numpy arrays and scalars
        if callable(getattr(value, method, None)) and not isinstance(value, type):
            try:
                return plain(getattr(value, method)(), depth, path)
            except Exception:  # not what the name promised: its text will do
                break
    return _scalar(value)


def _key(key: Any, depth: int, path: set[int]) -> str:
    """An object key as JSON text: a number as json.dumps writes it, a tuple as Python writes it."""
    if isinstance(key, str):
        return str(key)
    made = plain(key, depth, path)
    return made if isinstance(made, str) else json.dumps(made) if not isinstance(made, (list, dict)) else str(key)


def _scalar(value: Any) -> Any:
    """A value JSON has no type for, as a number or text (an enum by its value, a Decimal exactly)."""
    if isinstance(value, enum.Enum):
        return plain(value.value)
    for kind in (bool, int, str):  # a subclass (an IntEnum's cousin, a str of a library) as the plain type
        if isinstance(value, kind):
            return kind(value)
    try:
        return str(value)
    except Exception:
        return f"<a {type(value).__name__} that cannot be shown as text>"


def _bytes(data: bytes) -> str:
    """Binary data as a model can take it: small ones in base64, larger ones only described."""
    if len(data) <= INLINE_BYTES:
        return f"<{len(data)} bytes, base64: {base64.b64encode(data).decode()}>"
    return f"<{len(data):,} bytes of binary data, not shown>"
