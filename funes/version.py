"""The package's version, for `--version` and the MCP server's handshake."""
from __future__ import annotations

import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path


@cache
def version() -> str:
    """The installed package's version, or pyproject.toml's in a checkout that was never installed."""
    try:
        return metadata.version("funes")
    except metadata.PackageNotFoundError:
        with open(Path(__file__).resolve().parents[1] / "pyproject.toml", "rb") as f:
            return tomllib.load(f)["project"]["version"]
