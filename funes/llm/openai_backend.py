"""Chat through any OpenAI-compatible server (llama.cpp server, vLLM, LM Studio) with httpx."""
from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator

import httpx

from funes.errors import LLMBadReply, LLMUnavailable
from funes.llm import constrained
from funes.llm.base import PROBE_TIMEOUT_S, LLMReply, OnText, ToolCall, loopback, new_call_id
from funes.llm.gate import Cancel, Cancelled
from funes.llm.parsing import decode_arguments, with_text_calls

logger = logging.getLogger(__name__)


class OpenAIBackend:
    """`POST {base_url}/chat/completions` on an OpenAI-compatible server running `model`."""

    name = "openai"

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout: float,
                 options: dict | None = None, name_cutoff: float = 86.0, grammars: bool = False):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.grammars = grammars  # the server is llama.cpp, which takes a GBNF `grammar`
        self.options = dict(options or {})
        self.name_cutoff = name_cutoff
        self.local = loopback(self.url)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(timeout=timeout, headers=headers)
        # cancellable requests: a connection each (no keep-alive), so its socket is known and can be shut
        self._oneshot = httpx.Client(timeout=timeout, headers=headers, limits=httpx.Limits(max_keepalive_connections=0))
        self._inflight: set[Cancel] = set()
        self._inflight_lock = threading.Lock()

    def chat(self, messages: list[dict], tools: list[dict] | None, on_text: OnText | None = None,
             require_call: bool = False) -> LLMReply:
        """Send one chat turn and return the model's reply; with `on_text`, stream its text there as it comes;
        `require_call`: the reply must call one of `tools`: tool_choice "required", or on llama.cpp a JSON Schema."""
        payload = {"model": self.model, "messages": _wire_messages(messages), "stream": False, **self.options}
        if tools:
            payload["tools"] = tools
        started = time.perf_counter()
        body = None
        if tools and require_call:  # a call is all the reply holds: nothing to stream to a reader
            held = ({"response_format": constrained.response_format(tools)} if self.grammars else
                    {"tool_choice": "required"})
            body = self._post({**payload, **held}, lenient=True)  # a server that refuses it is asked freely
        constrained_reply = body is not None and self.grammars
        if body is None:
            body = self._post(payload) if on_text is None else self._post_stream(payload, on_text)
        ms = (time.perf_counter() - started) * 1000
        message, usage = self._message_and_usage(body)
        calls = tuple(_tool_call(c) for c in message.get("tool_calls") or ())
        if constrained_reply and not calls:
            calls = constrained.parse_calls(message.get("content") or "")
            message = {**message, "content": "" if calls else message.get("content")}
        reply = LLMReply(content=message.get("content") or "", tool_calls=calls,
                         prompt_tokens=usage.get("prompt_tokens"), completion_tokens=usage.get("completion_tokens"),
                         ms=ms)
        logger.debug("openai %s: %d tool call(s) in %.0f ms", self.model, len(calls), ms)
        return with_text_calls(reply, tools, self.name_cutoff)

    def complete_json(self, messages: list[dict], schema: dict, grammar: str | None = None,
                      cancel: Cancel | None = None, **options) -> str:
        """The model's answer constrained to `schema` (or to `grammar` where the server is llama.cpp);
        `cancel` closes the request's connection (the server drops the work) and raises Cancelled."""
        constraint = ({"grammar": grammar} if grammar and self.grammars else
                      {"response_format": {"type": "json_schema",
                                           "json_schema": {"name": "answer", "schema": schema, "strict": True}}})
        payload = {"model": self.model, "messages": messages, "stream": False, **self.options, **options,
                   **constraint}
        body = self._post(payload) if cancel is None else self._post_cancellable(payload, cancel)
        message, _ = self._message_and_usage(body)
        return message.get("content") or ""

    def _post_cancellable(self, payload: dict, cancel: Cancel) -> dict:
        """`_post` on a connection of its own, whose socket `cancel` shuts (waking the blocked read at once)."""
        def trace(event: str, info: dict) -> None:  # httpcore's trace extension hands over the new connection
            if event == "connection.connect_tcp.complete":
                sock = info["return_value"].get_extra_info("socket")
                cancel.on_cancel(lambda: sock.shutdown(socket.SHUT_RDWR))
        with self._inflight_lock:
            self._inflight.add(cancel)
        try:
            if cancel.cancelled:
                raise Cancelled("cancelled before it was sent")
            return self._post(payload, client=self._oneshot, extensions={"trace": trace})
        except LLMUnavailable as e:
            if cancel.cancelled:
                raise Cancelled(str(e)) from None
            raise
        finally:
            with self._inflight_lock:
                self._inflight.discard(cancel)

    def probe(self) -> str | None:
        """None when the server lists its models, else why not (naming the part, not its address)."""
        try:
            self._http.get(self.url.removesuffix("/chat/completions") + "/models",
                           timeout=PROBE_TIMEOUT_S).raise_for_status()
        except httpx.HTTPStatusError as e:
            return f"the OpenAI-compatible server answered HTTP {e.response.status_code}"
        except httpx.HTTPError as e:
            return f"the OpenAI-compatible server is unreachable ({type(e).__name__})"
        return None

    def close(self) -> None:
        """Cancel the cancellable requests in flight and close the HTTP connection pools."""
        with self._inflight_lock:
            inflight = list(self._inflight)
        for cancel in inflight:
            cancel.cancel()
        self._http.close()
        self._oneshot.close()

    def _post(self, payload: dict, lenient: bool = False, client: httpx.Client | None = None,
              extensions: dict | None = None) -> dict | None:
        """POST the request; the one place httpx's exceptions become LLMUnavailable.

        `lenient`: None when the server refuses the request itself (HTTP 400: a schema it cannot compile, or
        a tool_choice it does not know)."""
        try:
            response = (client or self._http).post(self.url, json=payload, extensions=extensions)
            if lenient and response.status_code == 400:
                logger.warning("%s refused a constrained request, asking freely: %.300s", self.url, response.text)
                return None
            response.raise_for_status()
            return response.json()
        except httpx.HTTPStatusError as e:
            raise LLMUnavailable(f"{self.url}: HTTP {e.response.status_code}: {e.response.text[:300]}") from e
        except httpx.HTTPError as e:
            raise LLMUnavailable(f"{self.url}: {type(e).__name__}: {e}") from e
        except ValueError as e:  # it answered, but not JSON
            raise LLMBadReply(f"{self.url}: the reply is not JSON: {e}") from e

    def _post_stream(self, payload: dict, on_text: OnText) -> dict:
        """POST with `stream: true`, hand each text delta to `on_text`, and return the reply as one body."""
        text: list[str] = []
        calls: dict[int, dict] = {}  # tool calls arrive in pieces, by index
        usage: dict = {}
        try:
            with self._http.stream("POST", self.url, json={**payload, "stream": True,
                                                           "stream_options": {"include_usage": True}}) as response:
                if response.is_error:
                    response.read()
                    raise LLMUnavailable(f"{self.url}: HTTP {response.status_code}: {response.text[:300]}")
                for chunk in _sse_chunks(response.iter_lines()):
                    usage = chunk.get("usage") or usage
                    for delta in _deltas(chunk):
                        if delta.get("content"):
                            text.append(delta["content"])
                            on_text(delta["content"])
                        for piece in delta.get("tool_calls") or ():
                            _add_call_piece(calls.setdefault(piece.get("index", 0), {}), piece)
        except httpx.HTTPError as e:
            raise LLMUnavailable(f"{self.url}: {type(e).__name__}: {e}") from e
        except LLMUnavailable as e:
            raise type(e)(f"{self.url}: {e}") from None
        if not text and not calls:  # a stream that says nothing is no reply, whatever its framing
            raise LLMBadReply(f"{self.url}: the stream held no words and no tool calls")
        message = {"role": "assistant", "content": "".join(text), "tool_calls": [calls[i] for i in sorted(calls)]}
        return {"choices": [{"message": message}], "usage": usage}

    def _message_and_usage(self, body: object) -> tuple[dict, dict]:
        """The first choice's message and the usage block, or LLMUnavailable for a malformed reply."""
        choices = body.get("choices") if isinstance(body, dict) else None
        if (not isinstance(choices, list) or not choices or not isinstance(choices[0], dict)
                or not isinstance(choices[0].get("message"), dict)):
            raise LLMBadReply(f"{self.url}: reply has no choices[0].message: {str(body)[:300]}")
        message = choices[0]["message"]
        try:
            _check_message(message)
        except LLMBadReply as e:
            raise LLMBadReply(f"{self.url}: {e}") from None
        usage = body.get("usage")
        return message, {k: v for k, v in usage.items() if type(v) is int} if isinstance(usage, dict) else {}


def _sse_chunks(lines) -> Iterator[dict]:
    """The JSON objects of a server-sent event stream, up to `data: [DONE]`; LLMBadReply for one that ends
    without it (cut off, or not a stream at all) or holds anything but JSON objects."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            raise LLMBadReply(f"a streamed chunk is not JSON: {data[:200]}") from None
        if not isinstance(chunk, dict):
            raise LLMBadReply(f"a streamed chunk is not a JSON object: {data[:200]}")
        if chunk.get("error"):  # the server failed mid-stream and said so
            raise LLMUnavailable(f"the stream ended in an error: {str(chunk['error'])[:300]}")
        yield chunk
    raise LLMBadReply("the stream ended without `data: [DONE]`")


def _deltas(chunk: dict) -> Iterator[dict]:
    """Each choice's delta in a streamed chunk, its fields of the types OpenAI's protocol gives them."""
    choices = chunk.get("choices") or []
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise LLMBadReply(f"a streamed chunk's choices are not a list of objects: {str(chunk)[:200]}")
    for choice in choices:
        delta = choice.get("delta") or {}
        _check_message(delta, pieces=True)
        yield delta


def _check_message(message: object, pieces: bool = False) -> None:
    """LLMBadReply unless `message` (or a streamed delta, `pieces`) has a string content and a list of calls."""
    if not isinstance(message, dict):
        raise LLMBadReply(f"a message is a {type(message).__name__}, not an object")
    content, calls = message.get("content"), message.get("tool_calls")
    if content is not None and not isinstance(content, str):
        raise LLMBadReply(f"'content' is a {type(content).__name__}, not a string")
    if calls is not None and not isinstance(calls, list):
        raise LLMBadReply(f"'tool_calls' is a {type(calls).__name__}, not a list")
    for call in calls or ():
        function = call.get("function", {} if pieces else None) if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise LLMBadReply(f"a tool call is not an object with a 'function' object: {str(call)[:200]}")
        name, arguments = function.get("name"), function.get("arguments")
        kinds = (str,) if pieces else (str, dict)  # streamed arguments are pieces of one string
        if (name is not None and not isinstance(name, str) or arguments is not None and not isinstance(arguments, kinds)
                or pieces and not isinstance(call.get("index", 0), int)):
            raise LLMBadReply(f"a tool call's fields are of the wrong type: {str(call)[:200]}")


def _add_call_piece(call: dict, piece: dict) -> None:
    """Join one streamed piece of a tool call (its id, name, or part of its arguments) into `call`."""
    function = call.setdefault("function", {"name": "", "arguments": ""})
    call["id"] = piece.get("id") or call.get("id")
    part = piece.get("function") or {}
    function["name"] += part.get("name") or ""
    function["arguments"] += part.get("arguments") or ""


def _tool_call(call: dict) -> ToolCall:
    function = call.get("function") or {}
    try:
        arguments = decode_arguments(function.get("arguments"))
    except ValueError:
        logger.warning("tool call %s: arguments are not a JSON object: %.200s",
                       function.get("name"), function.get("arguments"))
        arguments = {}
    return ToolCall(name=function.get("name", ""), arguments=arguments, id=call.get("id") or new_call_id())


def _wire_messages(messages: list[dict]) -> list[dict]:
    """Messages as OpenAI takes them: string arguments, call ids, tool results tied to a call id."""
    ids_by_name: dict[str, str] = {}
    wire = []
    for message in messages:
        out = {k: v for k, v in message.items() if k not in ("tool_calls", "tool_name")}
        if message.get("tool_calls"):
            out["tool_calls"] = [_wire_call(call, ids_by_name) for call in message["tool_calls"]]
        if message.get("role") == "tool" and not out.get("tool_call_id"):
            out["tool_call_id"] = ids_by_name.get(message.get("tool_name") or message.get("name", ""), "")
        wire.append(out)
    return wire


def _wire_call(call: dict, ids_by_name: dict[str, str]) -> dict:
    function = call.get("function", call)
    arguments = function.get("arguments") or {}
    call_id = call.get("id") or new_call_id()
    ids_by_name[function["name"]] = call_id
    return {"id": call_id, "type": "function",
            "function": {"name": function["name"],
                         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}
