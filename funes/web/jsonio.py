"""Request JSON as RFC 8259 has it: finite numbers only, nesting bounded; errors are ValueErrors (a 400)."""
from __future__ import annotations

import json
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


class StrictJSON(DefaultJSONProvider):
    """Flask's JSON, refusing NaN/Infinity and bodies nested deeper than MAX_DEPTH."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        try:
            value = json.loads(s, parse_constant=_no_constant, **kwargs)
        except RecursionError:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None
        if _depth(value) > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        return value


def json_object(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object, or a BadRequest saying why not (syntax, NaN, nesting, not an object)."""
    try:  # parsed here, not by request.get_json, so the caller learns why
        data = current_app.json.loads(raw)
    except ValueError as e:
        raise BadRequest(f"malformed JSON body: {e}") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data
