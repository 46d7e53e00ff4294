"""Recover tool calls that small models write as text instead of structured calls.

Qwen2.5-Coder-1.5B and friends often answer with a ```json {"name": ..., "arguments": {...}}``` block,
a bare JSON object (or list of them), or `<tool_call>{...}</tool_call>` tags. A call is accepted only
when Funes' name resolver maps its name onto a tool that was offered; its text is then removed.
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Callable

from funes.llm.base import LLMReply, ToolCall, new_call_id
from funes.tools.names import NameResolver

_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
# A fence whose language is json/tool_call(s) or none; other languages fail to decode as JSON.
_FENCE = re.compile(r"```(?:json|tool_calls?)?[ \t]*\r?\n?(.*?)```", re.S | re.I)
_BLANK_LINES = re.compile(r"\n{3,}")
# What a person must not be shown as an answer: call or result tags (the model echoes the template's
# <tool_response>), JSON fences, a call object written inline.
_MACHINERY = re.compile(r"</?tool_(?:call|response)>|```(?:json|tool_calls?)\b"
                        r"|\{\s*\"(?:name|arguments|function)\"\s*:", re.I)


# A reply that only declines ("I'm sorry, but I can't assist with that."), with nothing else said.
_REFUSAL = re.compile(r"^\W*(?:i'?m sorry|i am sorry|sorry|i apologi[sz]e)\b[^.!]*\b(?:can(?:no|')?t|unable|not able)"
                      r"\b[^.!]*[.!]?\W*$", re.I)
_FAILURE_WORDS = re.compile(r"could(?: not|n'?t)|unable|unreachable|failed|error|not available|try again", re.I)


def is_refusal(text: str) -> bool:
    """Whether a reply only declines, saying nothing the user can use (at most a short plea for details)."""
    first = re.match(r"[^.!?]*[.!?]?", text.strip()).group(0)
    return bool(_REFUSAL.match(text)) or (len(text) < 240 and bool(_REFUSAL.match(first)))


def says_failure(text: str) -> bool:
    """Whether a reply tells the user that something failed."""
    return bool(_FAILURE_WORDS.search(text))


def points_at_tools(text: str, names: list[str]) -> bool:
    """Whether a reply tells the user to call one of the tools `names` (in backticks, or as a function to use)."""
    for name in names:
        n = re.escape(name)
        if re.search(rf"`{n}`|\b{n}\s+(?:function|tool)\b|\b(?:call|use|run)\s+(?:the\s+)?{n}\b", text, re.I):
            return True
    return False


def is_machinery(text: str) -> bool:
    """Whether a reply is, or holds, a tool call or JSON rather than words for a person (half-written ones too)."""
    return bool(_MACHINERY.search(text)) or text.lstrip().startswith(("{", "[{", "[\n{", "[ {"))


class ProseFilter:
    """Passes a streamed reply's text on while it reads as words for a person, and nothing once it does not.

    The last HOLD characters wait for the next piece, so the start of a call or JSON block is caught before
    any of it is shown; `end` sends them once the reply is whole. Spaces around the words are not sent, as the
    turn's reply has none.
    """

    HOLD = 16

    def __init__(self, send):
        self.send, self.text, self.sent, self.muted = send, "", 0, False

    def __call__(self, piece: str) -> None:
        if self.muted:
            return
        self.text += piece
        if not self.sent:
            self.text = self.text.lstrip()
        if is_machinery(self.text) or self.text.startswith(("`", "<", "[")):
            self.muted = True
            return
        ready = len(self.text) - self.HOLD
        if ready > self.sent:
            self.send(self.text[self.sent:ready])
            self.sent = ready

    def end(self) -> None:
        """The reply is whole: send what was held back, unless it was never words for a person."""
        rest = self.text.rstrip()[self.sent:]
        if not self.muted and rest:
            self.send(rest)
            self.sent += len(rest)


def decode_arguments(value: object) -> dict:
    """Return call arguments as a dict, decoding a JSON string; raise ValueError otherwise."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise ValueError(f"tool call arguments must be a JSON object, got {type(value).__name__}")
    return value


def offered_names(tools: list[dict] | None) -> list[str]:
    """Names of the tools in a function-calling `tools` list."""
    names = []
    for tool in tools or []:
        name = (tool.get("function") or tool).get("name")
        if isinstance(name, str):
            names.append(name)
    return names


def parse_text_tool_calls(content: str, offered: list[str],
                          resolve: Callable[[str], str | None]) -> tuple[str, list[ToolCall]]:
    """Split a text reply into the text left over and the calls to offered tools written in it."""
    allowed = set(offered)
    kept, calls, cursor = [], [], 0
    for start, end, payload in _candidate_spans(content):
        found, complete = _calls_in(payload, allowed, resolve)
        calls.extend(found)
        if complete:
            kept.append(content[cursor:start])
            cursor = end
    kept.append(content[cursor:])
    return _BLANK_LINES.sub("\n\n", "".join(kept)).strip(), calls


def with_text_calls(reply: LLMReply, tools: list[dict] | None, name_cutoff: float) -> LLMReply:
    """The reply with every call naming an offered tool as registered: the one place call names are resolved.

    Structured calls keep a name nothing resolves (the turn answers the model that it is not offered);
    calls the model wrote as text count only when they name an offered tool.
    """
    if not tools:
        return reply
    names = offered_names(tools)
    resolve = NameResolver(names, name_cutoff).resolve
    if reply.tool_calls:
        calls = tuple(dataclasses.replace(c, name=resolve(c.name) or c.name) for c in reply.tool_calls)
        return dataclasses.replace(reply, tool_calls=calls)
    if not reply.content:
        return reply
    text, calls = parse_text_tool_calls(reply.content, names, resolve)
    if not calls:
        return reply
    return dataclasses.replace(reply, content=text, tool_calls=tuple(calls))

def _candidate_spans(content: str) -> list[tuple[int, int, str]]:
    """(start, end, JSON text) of each tag or fence, else the whole reply when it looks like JSON."""
    spans = [(m.start(), m.end(), m.group(1)) for m in _TAG.finditer(content)]
    for m in _FENCE.finditer(content):
        if not any(s <= m.start() < e for s, e, _ in spans):
            spans.append((m.start(), m.end(), m.group(1)))
    if not spans and content.strip()[:1] in ("{", "["):
        spans.append((0, len(content), content))
    return sorted(spans)


def _calls_in(payload: str, allowed: set[str],
              resolve: Callable[[str], str | None]) -> tuple[list[ToolCall], bool]:
    """The accepted calls in one JSON payload, and whether every object in it was accepted."""
    data = _loads(payload.strip())
    if data is None:
        return [], False
    items = data if isinstance(data, list) else [data]
    calls = [c for c in (_as_call(item, allowed, resolve) for item in items) if c is not None]
    return calls, bool(items) and len(calls) == len(items)


def _loads(text: str) -> object | None:
    """JSON, or the same with template-style doubled braces ({{...}}) that small models copy from prompts."""
    for candidate in (text, text.replace("{{", "{").replace("}}", "}")):
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


def _as_call(item: object, allowed: set[str], resolve: Callable[[str], str | None]) -> ToolCall | None:
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):  # OpenAI's {"type": "function", "function": {...}}
        item = item["function"]
    name = item.get("name")
    if not isinstance(name, str):
        return None
    try:
        arguments = decode_arguments(item.get("arguments", item.get("parameters")))
    except ValueError:
        return None
    resolved = resolve(name)
    if resolved not in allowed:
        return None
    return ToolCall(name=resolved, arguments=arguments, id=new_call_id())
