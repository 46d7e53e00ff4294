"""The MCP servers file: Claude Desktop's `{"mcpServers": {...}}` or VS Code's `{"servers": {...}}`.

An entry with `command` (and `args`, `env`, `cwd`) is run over stdio; one with `url` (and `headers`) is reached
over streamable HTTP. VS Code's `"type": "stdio" | "http"` is honoured; keys other clients add (`alwaysAllow`,
`timeout`, ...) are ignored, so one file can serve them too; `"disabled": true` skips an entry.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from funes.errors import RegistryError

HTTP_TYPES = ("http", "streamable-http", "streamableHttp")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerSpec:
    """How to reach one MCP server."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def describe(self) -> str:
        """The command line or URL, for logs and health pages."""
        return self.url if self.url else " ".join([self.command, *self.args])


def load_servers(path: str) -> list[ServerSpec]:
    """The servers of the file at `path` (RegistryError naming the file and server when one is malformed)."""
    try:
        data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RegistryError(f"MCP_SERVERS: {path}: file not found") from None
    except json.JSONDecodeError as e:
        raise RegistryError(f"MCP_SERVERS: {path}:{e.lineno}: invalid JSON: {e.msg}") from None
    servers = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise RegistryError(f'MCP_SERVERS: {path}: expected {{"mcpServers": {{name: server}}}} '
                            '(or VS Code\'s {"servers": {...}})')
    specs = []
    for name, entry in servers.items():
        spec = parse_server(name, entry, f"MCP_SERVERS: {path}: server {name!r}")
        if spec is not None and is_funes(spec):
            log.warning("MCP_SERVERS: %s: server %r is Funes itself; skipped (it would start itself forever)",
                        path, name)
        elif spec is not None:
            specs.append(spec)
    return specs


def parse_server(name: str, entry: Any, where: str) -> ServerSpec | None:
    """One entry as a ServerSpec, None when it is disabled."""
    if not name.strip():
        raise RegistryError(f"{where}: a server needs a non-empty name")
    if not isinstance(entry, dict):
        raise RegistryError(f"{where}: must be a JSON object with 'command' or 'url'")
    if entry.get("disabled") is True:
        return None
    kind = entry.get("type") or ("http" if "url" in entry else "stdio")
    if kind == "sse":
        raise RegistryError(f"{where}: the SSE transport is not supported; use the server's streamable HTTP URL")
    if kind in HTTP_TYPES:
        return ServerSpec(name, url=_text(entry, "url", where, required=True),
                          headers=_strings(entry.get("headers", {}), "headers", where))
    if kind != "stdio":
        raise RegistryError(f"{where}: unknown type {kind!r} (stdio or http)")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise RegistryError(f"{where}: 'args' must be a list of strings")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise RegistryError(f"{where}: 'cwd' must be a string")
    return ServerSpec(name, command=_text(entry, "command", where, required=True), args=tuple(args),
                      env=_strings(entry.get("env", {}), "env", where), cwd=cwd)


def _text(entry: dict, key: str, where: str, required: bool = False) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise RegistryError(f"{where}: '{key}' must be a non-empty string")
    return value


def _strings(value: Any, key: str, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise RegistryError(f"{where}: '{key}' must be an object of strings")
    return dict(value)


def is_funes(spec: ServerSpec) -> bool:
    """Whether the entry starts Funes' own MCP server: run from Funes, it would start itself again, forever."""
    words = [spec.command.rsplit("/", 1)[-1], *spec.args]
    return "mcp" in words and "funes" in words
