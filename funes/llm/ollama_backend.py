"""Chat through an Ollama server with the official `ollama` client."""
from __future__ import annotations

import logging
import time

import httpx
import ollama
import pydantic

from funes.errors import LLMBadReply, LLMUnavailable
from funes.llm.base import PROBE_TIMEOUT_S, LLMReply, OnText, ToolCall, loopback, new_call_id
from funes.llm.gate import Cancel, Cancelled
from funes.llm.parsing import decode_arguments, with_text_calls

logger = logging.getLogger(__name__)
# What the client raises when the server answered, but not in Ollama's shape: garbage, or fields of the wrong type
MALFORMED = (pydantic.ValidationError, ValueError, TypeError, AttributeError)


class OllamaBackend:
    """An Ollama server at `host` running `model`."""

    name = "ollama"

    def __init__(self, host: str, model: str, timeout: float, options: dict | None = None,
                 name_cutoff: float = 86.0):
        self.host = host
        self.model = model
        self.local = loopback(host)
        self.options = dict(options or {})
        self.name_cutoff = name_cutoff
        self._client = ollama.Client(host=host, timeout=timeout)
        self._prober = ollama.Client(host=host, timeout=PROBE_TIMEOUT_S)

    def probe(self) -> str | None:
        """None when the server answers, else why not (naming the part, not its address)."""
        try:
            self._prober.ps()
        except ollama.ResponseError as e:
            return f"ollama answered HTTP {e.status_code}"
        except (ollama.RequestError, ConnectionError, httpx.HTTPError, pydantic.ValidationError, ValueError) as e:
            return f"ollama unreachable ({type(e).__name__})"
        return None

    def chat(self, messages: list[dict], tools: list[dict] | None, on_text: OnText | None = None,
             require_call: bool = False) -> LLMReply:
        """Send one chat turn and return the model's reply; with `on_text`, stream its text there as it comes.
        Ollama's API has no tool_choice, so `require_call` cannot be enforced there."""
        started = time.perf_counter()
        if on_text is None:
            response = self._send(_wire_messages(messages), tools)
            content, tool_calls = response.message.content or "", list(response.message.tool_calls or ())
        else:
            response, content, tool_calls = self._stream(_wire_messages(messages), tools, on_text)
        ms = (time.perf_counter() - started) * 1000
        calls = tuple(ToolCall(name=c.function.name, arguments=dict(c.function.arguments), id=new_call_id())
                      for c in tool_calls)
        reply = LLMReply(content=content, tool_calls=calls,
                         prompt_tokens=response.prompt_eval_count, completion_tokens=response.eval_count, ms=ms)
        logger.debug("ollama %s: %d tool call(s) in %.0f ms", self.model, len(calls), ms)
        return with_text_calls(reply, tools, self.name_cutoff)

    def complete_json(self, messages: list[dict], schema: dict, grammar: str | None = None,
                      cancel: Cancel | None = None, **options) -> str:
        """The model's answer constrained to `schema` (Ollama's structured outputs; `grammar` is llama.cpp's only).
        `cancel` is looked at before sending only: the ollama client's request cannot be cut."""
        if cancel is not None and cancel.cancelled:
            raise Cancelled("cancelled before it was sent")
        limit = {"num_predict": options.pop("max_tokens")} if "max_tokens" in options else {}
        response = self._send(messages, None, format=schema, options={**self.options, **options, **limit})
        return response.message.content or ""

    def _stream(self, messages: list[dict], tools: list[dict] | None, on_text: OnText) -> tuple:
        """The last chunk (it carries the counts), the whole text and every tool call of a streamed reply."""
        text, calls, last = [], [], None
        chunks = iter(self._send(messages, tools, stream=True))
        while (chunk := self._next(chunks)) is not None:
            last = chunk
            if chunk.message.content:
                text.append(chunk.message.content)
                on_text(chunk.message.content)  # outside the try: a reader's failure is not the server's
            calls += chunk.message.tool_calls or ()
        if last is None or not last.done:  # cut off, or a stream that never says it is done
            raise LLMBadReply(f"ollama at {self.host}: the stream ended without `done: true`")
        if not text and not calls:
            raise LLMBadReply(f"ollama at {self.host}: the stream held no words and no tool calls")
        return last, "".join(text), calls

    def _next(self, chunks) -> ollama.ChatResponse | None:
        """The stream's next chunk, None at its end; the errors of reading it translated."""
        try:
            return next(chunks, None)
        except (ollama.ResponseError, ollama.RequestError, ConnectionError, httpx.HTTPError) as e:
            raise LLMUnavailable(f"ollama at {self.host}: {e}") from e
        except MALFORMED as e:
            raise LLMBadReply(f"ollama at {self.host}: a streamed chunk is not Ollama's shape: "
                              f"{type(e).__name__}: {str(e)[:300]}") from e

    def _send(self, messages: list[dict], tools: list[dict] | None, **extra) -> ollama.ChatResponse:
        """Call the client; the one place its exceptions become LLMUnavailable."""
        extra.setdefault("options", self.options or None)
        try:
            return self._client.chat(model=self.model, messages=messages, tools=tools or None, **extra)
        except ollama.ResponseError as e:
            raise LLMUnavailable(f"ollama at {self.host}: HTTP {e.status_code}: {e.error}") from e
        except (ollama.RequestError, ConnectionError, httpx.HTTPError) as e:
            raise LLMUnavailable(f"ollama at {self.host}: {e}") from e
        except MALFORMED as e:
            raise LLMBadReply(f"ollama at {self.host}: the reply is not Ollama's shape: "
                              f"{type(e).__name__}: {str(e)[:300]}") from e


def _wire_messages(messages: list[dict]) -> list[dict]:
    """Messages as Ollama takes them: dict arguments, and tool results named by `tool_name`."""
    names_by_id: dict[str, str] = {}
    wire = []
    for message in messages:
        out = {k: v for k, v in message.items() if k not in ("tool_calls", "tool_call_id", "name")}
        for call in message.get("tool_calls") or ():
            function = call.get("function", call)
            names_by_id[call.get("id", "")] = function["name"]
            out.setdefault("tool_calls", []).append(
                {"function": {"name": function["name"], "arguments": decode_arguments(function.get("arguments"))}})
        if message.get("role") == "tool" and not out.get("tool_name"):
            name = message.get("name") or names_by_id.get(message.get("tool_call_id", ""))
            if name:
                out["tool_name"] = name
        wire.append(out)
    return wire
