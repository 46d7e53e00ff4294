"""What every LLM backend returns, and the interface the service calls."""
from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import httpx

OnText = Callable[[str], None]  # receives each piece of the reply's text as the model writes it
PROBE_TIMEOUT_S = 2.0  # readiness asks the LLM server if it is there; a slow answer is as bad as none


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for, with its arguments decoded to a dict."""

    name: str
    arguments: dict
    id: str


@dataclass(frozen=True)
class LLMReply:
    """The assistant's text, its tool calls, token counts (when the server reports them) and latency."""

    content: str
    tool_calls: tuple[ToolCall, ...]
    prompt_tokens: int | None
    completion_tokens: int | None
    ms: float


@runtime_checkable
class LLMBackend(Protocol):
    """A chat model reached one way (Ollama, an OpenAI-compatible server, llama.cpp in-process).

    `messages` are in OpenAI/Ollama shape; `tools` in function-calling form. Any client, transport or
    server failure raises `funes.errors.LLMUnavailable`.
    """

    name: str
    model: str

    def chat(self, messages: list[dict], tools: list[dict] | None, on_text: OnText | None = None,
             require_call: bool = False) -> LLMReply:
        """Send one chat turn and return the model's reply; with `on_text`, stream its text there as it comes;
        `require_call`: the reply must call one of `tools` (where the server can enforce it)."""
        ...

    # Optional: `probe() -> str | None`, None when the server answers, else why not (for /readyz).
    # Optional: `local: bool`, whether the model runs on this machine (background enrichment asks).


def new_call_id() -> str:
    """Return a fresh id for a tool call whose server gave none."""
    return f"call_{uuid.uuid4().hex[:16]}"


def loopback(url: str) -> bool:
    """Whether the server at `url` (or host[:port]) is on this machine: localhost or a loopback address."""
    host = httpx.URL(url if "://" in url else f"http://{url}").host
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name other than localhost may resolve anywhere
        return False


def is_local(llm) -> bool:
    """Whether `llm` runs on this machine (a backend that does not say is taken as remote: it may cost money)."""
    return bool(getattr(llm, "local", False))
