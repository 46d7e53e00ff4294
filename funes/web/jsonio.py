"""JSON as RFC 8259 has it, both ways: requests with finite numbers only, nesting bounded, text that is Unicode
(errors are ValueErrors or BadRequests: a 400); responses with a non-finite number written as null."""
from __future__ import annotations

import json
import math
from typing import Any

from flask import current_app
from flask.json.provider import DefaultJSONProvider

from funes.errors import BadRequest

MAX_DEPTH = 64  # far above any tool schema or conversation; a deeper body is an attack, not a request


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _depth(value: Any) -> int:
    """How deep lists and objects nest (iteratively: the point is not to recurse on hostile input)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def finite(value: Any) -> Any:
    """`value` with every NaN and Infinity inside it as None: JSON has no such numbers, and null says "none"."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """json.dumps, writing a non-finite number as null (a bare NaN is no JSON: clients fail to parse it)."""
    try:
        return json.dumps(value, allow_nan=False, **kwargs)
    except ValueError:  # rare: walk the data only when a NaN or an Infinity is in it
        return json.dumps(finite(value), allow_nan=False, **kwargs)


class StrictJSON(DefaultJSONProvider):
    """Flask's JSON, refusing NaN/Infinity and bodies nested deeper than MAX_DEPTH; answering NaN as null."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        kwargs.setdefault("default", self.default)
        kwargs.setdefault("ensure_ascii", self.ensure_ascii)
        kwargs.setdefault("sort_keys", self.sort_keys)
        return dumps(obj, **kwargs)

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        try:
            value = json.loads(s, parse_constant=_no_constant, **kwargs)
        except RecursionError:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
        if _depth(value) > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        return value


def json_object(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object, or a BadRequest saying why not (syntax, NaN, nesting, not an object, a
    string that is not Unicode)."""
    try:  # parsed here, not by request.get_json, so the caller learns why
        data = current_app.json.loads(raw)
    except ValueError as e:
        raise BadRequest(f"malformed JSON body: {e}") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    check_text(data)
    return data


def check_text(data: Any) -> None:
    """Refuse strings a database, a tokenizer or an upstream cannot take: lone UTF-16 surrogates (a JSON escape
    such as \\ud800 parses to one, and no UTF-8 holds it) and NUL characters; the error says where."""
    stack: list[tuple[Any, tuple]] = [(data, ())]
    while stack:
        value, at = stack.pop()
        if isinstance(value, dict):
            stack.extend((k, at) for k in value)  # a key is checked where its object is
            stack.extend((v, (*at, k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*at, i)) for i, v in enumerate(value))
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise BadRequest(f"invalid text{_where(at)}: a lone surrogate (\\ud800-\\udfff) "
                                 "is not Unicode") from None
            if "\x00" in value:
                raise BadRequest(f"invalid text{_where(at)}: NUL characters (\\u0000) are not accepted")


def _where(path: tuple) -> str:
    """' in tools[0].function.name' for a path of keys and indexes (escaped: a key may hold the fault itself)."""
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    return f" in {ascii(text)[1:-1][:120]}" if text else ""
