"""Tool calls held to the offered tools' schemas by the server's JSON Schema constraint (llama.cpp).

llama.cpp's server here does not hold `tool_choice: "required"` to the tools (measured: the bundled model
still wrote prose or a made-up tool under it), but it does hold any answer to a JSON Schema. So a required
call is asked for as `{"calls": [{"name": ..., "arguments": {...}}, ...]}`, one item per offered tool at most.
"""
from __future__ import annotations

import json
import logging

from funes.llm.base import ToolCall, new_call_id

logger = logging.getLogger(__name__)
MAX_STRING = 300  # characters in a string argument with no bound of its own: greedy decoding can loop in one


def calls_schema(tools: list[dict]) -> dict:
    """The JSON Schema of one to len(tools) calls, each to an offered tool with arguments fitting its schema."""
    one = []
    for tool in tools:
        function = tool.get("function", tool)
        parameters = bounded(function.get("parameters") or {"type": "object", "properties": {}})
        one.append({"type": "object", "properties": {"name": {"const": function["name"]}, "arguments": parameters},
                    "required": ["name", "arguments"], "additionalProperties": False})
    item = one[0] if len(one) == 1 else {"anyOf": one}
    return {"type": "object", "required": ["calls"], "additionalProperties": False,
            "properties": {"calls": {"type": "array", "items": item, "minItems": 1, "maxItems": len(one)}}}


def bounded(schema: object) -> object:
    """A copy of `schema` whose strings without a length limit, an enum or a pattern get MAX_STRING."""
    if isinstance(schema, list):
        return [bounded(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: bounded(v) if isinstance(v, (dict, list)) else v for k, v in schema.items()}
    if out.get("type") == "string" and not {"maxLength", "enum", "const", "pattern", "format"} & out.keys():
        out["maxLength"] = MAX_STRING
    return out


def response_format(tools: list[dict]) -> dict:
    """The `response_format` field of an OpenAI-shaped request that holds the answer to `calls_schema`."""
    return {"type": "json_schema", "json_schema": {"name": "calls", "schema": calls_schema(tools), "strict": True}}


def parse_calls(content: str) -> tuple[ToolCall, ...]:
    """The calls in a constrained answer; none when it was cut off (the token limit) or is not the shape."""
    try:
        data = json.loads(content)
    except ValueError:
        logger.warning("a constrained tool call did not finish: %.200s", content)
        return ()
    calls = data.get("calls") if isinstance(data, dict) else None
    out = []
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("arguments"), dict):
            out.append(ToolCall(name=call["name"], arguments=call["arguments"], id=new_call_id()))
    return tuple(out)
