"""Run one tool call: validate the arguments against the card's schema, then the handler under a timeout."""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

import jsonschema
from cachetools import TTLCache
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from funes.errors import ToolError, ToolNotRunnable
from funes.tools.context import TransientError
from funes.tools.registry import Tool
from funes.tools.results import plain

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallResult:
    name: str
    arguments: dict[str, Any]
    result: Any = None
    error: str | None = None
    ms: float = 0.0
    no_runner: bool = False  # the tool is routable but has no handler in this server

    def to_dict(self) -> dict[str, Any]:
        data = {"name": self.name, "arguments": self.arguments, "ms": round(self.ms, 3)}
        data.update({"error": self.error} if self.error is not None else {"result": self.result})
        return data


class ToolRunner:
    """Runs handlers in worker threads under a timeout, retrying transient failures, caching by arguments."""

    def __init__(self, timeout_s: float, workers: int = 4, retries: int = 3, backoff_s: float = 0.5,
                 cache_size: int = 1024):
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self._workers = workers
        # One pool per tool: a service that hangs holds its own threads, never another tool's.
        self._pools: dict[str, DaemonPool] = {}
        self._caches: dict[str, TTLCache] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def run(self, tool: Tool, arguments: Any) -> CallResult:
        """Call `tool`; every failure becomes an error message the LLM can act on, never an exception."""
        t0 = time.perf_counter()
        args = arguments if isinstance(arguments, dict) else {}
        try:
            if not isinstance(arguments, dict):
                raise ToolError("arguments must be a JSON object")
            args = arguments = _lenient(tool, arguments)
            _validate(tool, arguments)
            result = plain(self._call(tool, arguments))  # whatever a handler returns, plain JSON from here on
            return CallResult(tool.name, args, result=result, ms=(time.perf_counter() - t0) * 1000)
        except ToolNotRunnable as e:  # a client's tool: routable, never run here; the message says what to do
            return CallResult(tool.name, args, error=str(e), ms=(time.perf_counter() - t0) * 1000, no_runner=True)
        except ToolError as e:
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
        cache = self._cache(tool)
        key = json.dumps(arguments, sort_keys=True, default=str)
        if cache is not None:
            with self._lock:
                if key in cache:
                    return cache[key]
        result = self._with_retries(tool, arguments)
        if cache is not None:
            with self._lock:
                cache[key] = result
        return result

    def _cache(self, tool: Tool) -> TTLCache | None:
        if not tool.cache_ttl:
            return None
        with self._lock:
            return self._caches.setdefault(tool.name, TTLCache(self._cache_size, tool.cache_ttl))

    def _with_retries(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        """Exponential backoff on TransientError; the last failure becomes the tool's error."""
        retrying = Retrying(stop=stop_after_attempt(self.retries), reraise=True,
                            wait=wait_exponential(multiplier=self.backoff_s, max=8),
                            retry=retry_if_exception_type(TransientError))
        try:
            return retrying(self._timed, tool, arguments)
        except TransientError as e:
            raise ToolError(f"{tool.name} failed after {self.retries} attempts: {e}") from None

    def _pool(self, tool: Tool) -> DaemonPool:
        with self._lock:
            if tool.name not in self._pools:
                self._pools[tool.name] = DaemonPool(self._workers, f"funes-{tool.name}"[:40])
            return self._pools[tool.name]

    def _timed(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        future = self._pool(tool).submit(tool.run, **arguments)
        try:
            return future.result(timeout=self.timeout_s)
        except FutureTimeout:
            future.cancel()  # still queued behind its tool's hung calls: it never starts
            raise ToolError(f"tool {tool.name!r} did not answer within {self.timeout_s:g} s") from None
        except SystemExit as e:  # the handler's exit is its failure, not the server's (stdio or a web worker)
            raise ToolError(f"tool {tool.name!r} tried to exit the process (sys.exit({e.code!r}))") from None


class DaemonPool:
    """A tool's worker threads, at most `size`, like ThreadPoolExecutor's but daemons that nothing joins at exit:
    Python cannot stop a hung handler, and the executor's exit hook waited for each (a server outlived its client)."""

    def __init__(self, size: int, name: str):
        self._size, self._name = size, name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._started = 0
        self._lock = threading.Lock()

    def submit(self, fn: Any, /, **kwargs: Any) -> Future:
        future: Future = Future()
        self._jobs.put((future, fn, kwargs))
        with self._lock:
            if self._started < self._size:
                self._started += 1
                threading.Thread(target=self._work, name=f"{self._name}_{self._started}", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            future, fn, kwargs = self._jobs.get()
            if not future.set_running_or_notify_cancel():  # its caller gave up before it started
                continue
            try:
                future.set_result(fn(**kwargs))
            except BaseException as e:  # SystemExit too: handed to the caller, and this thread serves on
                future.set_exception(e)


def undeclared(tool: Tool, arguments: dict[str, Any]) -> list[str]:
    """The keys of `arguments` a tool's schema does not declare, where it lists its properties and allows no others."""
    properties = tool.parameters.get("properties")
    if properties is None or tool.parameters.get("additionalProperties") not in (None, False):
        return []
    return [key for key in arguments if key not in properties]


def _lenient(tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    """Forgive what small models often write: null for an optional argument, 3.0 or "3" for an integer, and
    keys the schema does not declare (the schema itself written as arguments, say)."""
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or ())
    dropped = set(undeclared(tool, arguments))
    out = {}
    for key, value in arguments.items():
        if (value is None and key not in required) or key in dropped:
            continue
        kind = (properties.get(key) or {}).get("type") if isinstance(properties.get(key), dict) else None
        out[key] = _as_number(value, kind) if kind in ("integer", "number") else value
    return out


def _as_number(value: Any, kind: str) -> Any:
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return value  # left for the schema check to name
        value = number if math.isfinite(number) else value
    if isinstance(value, float) and value.is_integer() and kind == "integer":
        return int(value)
    return value


def _validate(tool: Tool, arguments: dict[str, Any]) -> None:
    """Every problem of `arguments` at once: a model (or client) fixing one at a time would need a call each."""
    try:
        validator = jsonschema.validators.validator_for(tool.parameters)
        validator.check_schema(tool.parameters)
    except jsonschema.SchemaError as e:
        raise ToolError(f"tool {tool.name} has an invalid parameter schema: {e.message}") from None
    errors = sorted(validator(tool.parameters).iter_errors(arguments),
                    key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        problems = "; ".join(f"{'/'.join(map(str, e.absolute_path)) or 'arguments'}: {e.message}" for e in errors)
        raise ToolError(f"invalid arguments for {tool.name}: {problems}")


def capped(call: CallResult, most: int) -> CallResult:
    """`call` with its result cut to `most` characters of JSON text, ending in a note of how much was cut."""
    text = call.result if isinstance(call.result, str) else json.dumps(call.result, ensure_ascii=False)
    if len(text) <= most:
        return call
    cut = f"{text[:most]} … [cut by Funes: {len(text) - most:,} of {len(text):,} characters not shown]"
    return dataclasses.replace(call, result=cut)
