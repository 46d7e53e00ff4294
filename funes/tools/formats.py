"""The shapes a tool may be written in, made into Funes cards.

Three shapes are read: a Funes card (name, description, parameters, examples, ...); the OpenAI/Ollama
function-calling tool `{"type": "function", "function": {...}}`; and an MCP tool from a `tools/list` result
(`inputSchema` for `parameters`; `title`, `annotations`, `outputSchema` are not routing's business). A list of
tools may also come wrapped as an MCP result, `{"tools": [...]}`, or a JSON-RPC response carrying one.
"""
from __future__ import annotations

from typing import Any

from funes.errors import RegistryError

MCP_IGNORED = ("title", "annotations", "outputSchema", "_meta", "icons")  # MCP tool fields routing does not use


def as_card(data: Any, where: str) -> Any:
    """An OpenAI/Ollama or MCP tool as a Funes card dict; anything else unchanged, for the card check."""
    if not isinstance(data, dict):
        return data
    if "function" in data and data.get("type", "function") == "function":
        return from_openai(data, where)
    if "inputSchema" in data:
        return from_mcp(data, where)
    return data


def from_openai(data: Any, where: str) -> dict[str, Any]:
    """The card of a function-calling tool `{"type": "function", "function": {name, description, parameters}}`."""
    function = data.get("function") if isinstance(data, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise RegistryError(f'{where} must be {{"type": "function", "function": {{"name": ...}}}}')
    card = {"name": function["name"], "description": function.get("description") or ""}
    if function.get("parameters") is not None:
        card["parameters"] = function["parameters"]
    return card


def from_mcp(data: dict[str, Any], where: str) -> dict[str, Any]:
    """The card of an MCP tool object (`name`, `description`, `inputSchema`)."""
    if not isinstance(data.get("name"), str):
        raise RegistryError(f"{where}: an MCP tool needs a string 'name'")
    description = data.get("description") or data.get("title") or ""
    return {"name": data["name"], "description": description, "parameters": data["inputSchema"]}


def tool_list(data: Any) -> list | None:
    """The tools of an MCP `tools/list` result (or a JSON-RPC response carrying one); None for anything else."""
    if isinstance(data, dict) and isinstance(data.get("result"), dict) and "jsonrpc" in data:
        data = data["result"]
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        return data["tools"]
    return None
