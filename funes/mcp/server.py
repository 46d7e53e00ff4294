"""What Funes offers as an MCP server, whatever the transport: find_tools, call_tool, and the pinned tools.

A client sees two tools instead of hundreds and discovers the rest progressively: `find_tools(query)` routes the
query like a chat message (a Decision logged with path "mcp") and answers with a shortlist by confidence
(funes.selection.shortlist): the tools' full JSON schemas, each with its probability, or none with the reason
and the closest tools' names; `call_tool(name, arguments)` runs any configured tool (pack, Python module,
MCP server), its arguments checked against its schema. MCP_PINNED_TOOLS are listed directly beside them.
Answers are the SDK's pydantic types; a request that names no offered tool is a BadRequest (a protocol error).
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any

import mcp_types as types
from rapidfuzz import fuzz, process

from funes.errors import BadRequest
from funes.messages import MAX_SHORTLIST_K, SHORTLIST_K, check_message, check_top_k
from funes.selection.shortlist import shortlist
from funes.tools.registry import Tool
from funes.tools.runner import undeclared

log = logging.getLogger(__name__)
FIND_TOOLS, CALL_TOOL = "find_tools", "call_tool"
INSTRUCTIONS = ("Funes routes a request to the few tools that fit it among all it serves. Call find_tools with "
                "the user's request first, then call_tool with a returned tool's name and arguments.")
FIND_SCHEMA = {"type": "object", "properties": {
    "query": {"type": "string",
              "description": "The user's request in their own words, e.g. 'what time is it in Tokyo?'"},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SHORTLIST_K,
              "description": f"Most tools returned (default {SHORTLIST_K}); fewer when Funes is sure"}},
    "required": ["query"]}
CALL_SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "description": "A tool name find_tools returned"},
    "arguments": {"type": "object", "description": "The tool's arguments, as its inputSchema describes"}},
    "required": ["name"]}


class FunesTools:
    """The tools of Funes' MCP server over one process's parts (funes.build.Parts)."""

    def __init__(self, parts):
        self.parts = parts

    def list_tools(self) -> types.ListToolsResult:
        """find_tools, call_tool, then each pinned tool that exists now, with its own schema."""
        count = len(self.parts.registry)
        tools = [
            types.Tool(name=FIND_TOOLS, input_schema=FIND_SCHEMA, description=(
                f"Find the tools that fit a request among the {count} tools Funes serves (local packs, Python "
                "modules, other MCP servers). Returns the few that may fit, most likely first, with their full JSON "
                "schemas and probabilities; one when Funes is sure, none with the reason when no tool is needed. "
                "Call it before call_tool, with the user's request in their words.")),
            types.Tool(name=CALL_TOOL, input_schema=CALL_SCHEMA, description=(
                "Run a tool find_tools returned: its name and its arguments as its inputSchema describes. "
                "Returns the tool's result, or an error saying what to fix.")),
        ]
        return types.ListToolsResult(tools=tools + [_as_mcp(t) for t in self._pinned()])

    def call(self, name: str, arguments: dict[str, Any] | None, user: str | None = None) -> types.CallToolResult:
        """Run one of the offered tools; BadRequest when `name` is none of them."""
        arguments = arguments or {}
        if name == FIND_TOOLS:
            return self.find_tools(arguments.get("query"), user, arguments.get("limit", SHORTLIST_K))
        if name == CALL_TOOL:
            return self.call_tool(arguments.get("name"), arguments.get("arguments"))
        if name in {t.name for t in self._pinned()}:
            return self.call_tool(name, arguments)
        offered = ", ".join([FIND_TOOLS, CALL_TOOL, *(t.name for t in self._pinned())])
        raise BadRequest(f"unknown tool {name!r}: this server offers {offered} (run any other through call_tool)")

    def find_tools(self, query: Any, user: str | None = None, limit: Any = SHORTLIST_K) -> types.CallToolResult:
        """Route `query`; a shortlist by confidence, each tool with its schema and probability, or none with the
        reason and the closest tools' names. Logged as a Decision, with the tools offered."""
        try:
            query = check_message(query, self.parts.settings["MAX_MESSAGE_CHARS"], name="query")
            limit = check_top_k(limit, name="limit")
        except BadRequest as e:
            return _error(f"find_tools: {e}")
        router, t0 = self.parts.router, time.perf_counter()
        decision = router.select([{"role": "user", "content": query}])
        listed = shortlist(decision, limit, self.parts.settings)
        self.parts.metrics.routed("mcp", decision.decided_by, time.perf_counter() - t0, path="mcp")
        decision_id = self.parts.log.record(decision, endpoint="mcp", path="mcp", user_id=user,
                                            tools_offered=list(listed.tools))
        registry = self.parts.registry
        tools = [{**_listing(registry.get(name) or router.registry[name]), "probability": p, "picked": picked}
                 for name, p, picked in zip(listed.tools, listed.probabilities, listed.picked)]
        answer: dict[str, Any] = {"query": query, "tools": tools, "decision_id": decision_id,
                                  "decided_by": decision.decided_by, "reason": listed.reason}
        if not tools:
            answer["closest"] = list(listed.closest)
        return types.CallToolResult(content=[types.TextContent(text=json.dumps(answer, ensure_ascii=False))],
                                    structured_content=answer)

    def call_tool(self, name: Any, arguments: Any) -> types.CallToolResult:
        """Run any configured tool by name; a wrong name, arguments or a failure is an error result saying why."""
        registry = self.parts.registry
        if not isinstance(name, str) or not name:
            return _error("call_tool needs 'name': a tool name that find_tools returned")
        tool = registry.get(name)
        if tool is None:
            closest = process.extractOne(name, registry.names, scorer=fuzz.WRatio) if len(registry) else None
            hint = f"; the closest is {closest[0]!r}" if closest else ""
            return _error(f"no tool named {name!r}{hint} (find_tools lists the tools that fit a request)")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return _error(f"'arguments' of {name} must be a JSON object")
        # a client names its arguments on purpose: one the tool lacks is a mistake to say, not to drop (the
        # tool would run on its defaults and answer another question)
        if unknown := undeclared(tool, arguments):
            takes = ", ".join(tool.parameters.get("properties") or {}) or "no arguments"
            return _error(f"{name} has no argument {', '.join(map(repr, unknown))}; it takes: {takes}")
        outcome = self.parts.runner.run(tool, arguments)
        log.info("mcp call_tool %s: %s in %.1f ms", name, "error" if outcome.error else "ok", outcome.ms)
        if outcome.error is not None:
            return _error(outcome.error)
        try:
            text = _as_text(outcome.result)
        except ValueError as e:  # a client gets an error it can read, not a broken reply (or none: a 500)
            return _error(f"{name} returned a result that is not JSON: {e}")
        return types.CallToolResult(content=[types.TextContent(text=text)],
                                    structured_content=json.loads(text) if isinstance(outcome.result, dict) else None)

    def _pinned(self) -> list[Tool]:
        registry, names = self.parts.registry, self.parts.settings["MCP_PINNED_TOOLS"]
        missing = [n for n in names if n not in registry]
        if missing:
            log.warning("MCP_PINNED_TOOLS: no tool named %s (yet)", ", ".join(missing))
        return [registry[n] for n in names if n in registry and n not in (FIND_TOOLS, CALL_TOOL)]


def _listing(tool: Tool) -> dict[str, Any]:
    """A selected tool as find_tools answers it: what a client needs to call it, and whether it runs now."""
    data = {"name": tool.name, "description": tool.description, "inputSchema": tool.parameters,
            "source": tool.source, "runnable": tool.runnable}
    if not tool.runnable:
        data["unavailable"] = tool.no_runner()  # a down MCP server's reason, or where to run a client's tool
    return data


def _as_mcp(tool: Tool) -> types.Tool:
    return types.Tool(name=tool.name, description=tool.description, input_schema=tool.parameters)


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _as_text(result: Any) -> str:
    """A tool's result as the text a client reads (JSON unless it is a string); ValueError naming what is wrong:
    a circular reference, keys JSON cannot hold, nesting past the recursion limit, a lone surrogate."""
    try:
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=_jsonable)
    except (TypeError, RecursionError) as e:
        raise ValueError(str(e)) from None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a lone surrogate (\\ud800-\\udfff) is not Unicode") from None
    return text


def _jsonable(value: Any) -> Any:
    """A set or tuple as the list a client's JSON holds (as structuredContent has it); anything else as text."""
    return list(value) if isinstance(value, (set, frozenset, tuple)) else str(value)
