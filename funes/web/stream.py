"""Server-sent events for a streamed /chat turn: the turn runs in a thread and its events are relayed as they come.

Events: `decision` (what routing chose, before any LLM call), `tool_call` (each call's result), `token`
(pieces of the reply's words), then `done` (the whole turn, as `/chat` returns it without streaming) or
`error` ({error, status}). A client that goes away does not stop the turn: it is stored like any other.
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator

from funes.errors import FunesError
from funes.web.jsonio import dumps

log = logging.getLogger(__name__)


def event(kind: str, data: dict) -> str:
    return f"event: {kind}\ndata: {dumps(data, ensure_ascii=False, default=str)}\n\n"  # NaN as null, as /chat


def relay(turn: Callable[[Callable[[str, dict], None]], dict]) -> Iterator[str]:
    """Run `turn(emit)` in a thread and yield its events as SSE text, ending with `done` or `error`."""
    events: queue.Queue = queue.Queue()

    def work() -> None:
        try:
            events.put(("done", turn(lambda kind, data: events.put((kind, data)))))
        except FunesError as e:
            events.put(("error", {"error": str(e), "status": e.status}))
        except Exception as e:  # a bug: the stream still ends in an error event, and the log has the trace
            log.exception("streamed turn failed")
            events.put(("error", {"error": f"internal error: {type(e).__name__}", "status": 500}))
        finally:
            events.put(None)

    threading.Thread(target=work, name="funes-turn", daemon=True).start()
    yield ": funes\n\n"  # a first byte at once: proxies and clients see the stream open
    while (item := events.get()) is not None:
        yield event(*item)
