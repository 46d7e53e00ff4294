"""Run one tool call: validate the arguments against the card's schema, then the handler under a timeout."""
from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

import jsonschema

from funes.errors import ToolError, ToolNotRunnable
from funes.tools.registry import Tool

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallResult:
    name: str
    arguments: dict[str, Any]
    result: Any = None
    error: str | None = None
    ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = {"name": self.name, "arguments": self.arguments, "ms": round(self.ms, 3)}
        data.update({"error": self.error} if self.error is not None else {"result": self.result})
        return data


class ToolRunner:
    """Runs handlers in worker threads so a slow tool cannot hold a turn past its timeout."""

    def __init__(self, timeout_s: float, workers: int = 4):
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="funes-tool")

    def run(self, tool: Tool, arguments: Any) -> CallResult:
        """Call `tool`; every failure becomes an error message the LLM can act on, never an exception."""
        t0 = time.perf_counter()
        args = arguments if isinstance(arguments, dict) else {}
        try:
            if not isinstance(arguments, dict):
                raise ToolError("arguments must be a JSON object")
            _validate(tool, arguments)
            result = self._call(tool, arguments)
            return CallResult(tool.name, args, result=result, ms=(time.perf_counter() - t0) * 1000)
        except (ToolError, ToolNotRunnable) as e:
            error = str(e)
        except Exception as e:  # a handler's own bug must not crash the turn
            log.exception("tool %s failed", tool.name)
            error = f"{type(e).__name__}: {e}"
        return CallResult(tool.name, args, error=error, ms=(time.perf_counter() - t0) * 1000)

    def _call(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        if not tool.runnable and tool.ends_turn:  # a final-answer tool needs no handler: its arguments are the answer
            return arguments
        if not tool.runnable:
            return tool.run(**arguments)  # raises ToolNotRunnable with a clear message
        future = self._pool.submit(tool.run, **arguments)
        try:
            return future.result(timeout=self.timeout_s)
        except FutureTimeout:
            raise ToolError(f"tool {tool.name!r} did not answer within {self.timeout_s:g} s") from None


def _validate(tool: Tool, arguments: dict[str, Any]) -> None:
    try:
        jsonschema.validate(arguments, tool.parameters)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "arguments"
        raise ToolError(f"invalid arguments for {tool.name}: {where}: {e.message}") from None
    except jsonschema.SchemaError as e:
        raise ToolError(f"tool {tool.name} has an invalid parameter schema: {e.message}") from None
