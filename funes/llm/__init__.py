"""LLM backends: Ollama, any OpenAI-compatible server, or llama.cpp embedded in this process."""
from __future__ import annotations

from funes.llm.base import LLMBackend, LLMReply, ToolCall
from funes.llm.parsing import parse_text_tool_calls

BACKENDS = ("ollama", "openai", "embedded")

__all__ = ["BACKENDS", "LLMBackend", "LLMReply", "ToolCall", "backend_from_settings", "parse_text_tool_calls"]


def backend_from_settings(kind: str, **kwargs) -> LLMBackend:
    """Build the backend named `kind` ("ollama", "openai" or "embedded") from its keyword arguments."""
    if kind == "ollama":
        from funes.llm.ollama_backend import OllamaBackend
        return OllamaBackend(**kwargs)
    if kind == "openai":
        from funes.llm.openai_backend import OpenAIBackend
        return OpenAIBackend(**kwargs)
    if kind == "embedded":
        from funes.llm.embedded import EmbeddedBackend
        return EmbeddedBackend(**kwargs)
    raise ValueError(f"unknown LLM backend {kind!r}; choose one of: {', '.join(BACKENDS)}")
