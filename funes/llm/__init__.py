"""LLM backends: Ollama, any OpenAI-compatible server, or llama.cpp embedded in this process."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from funes.llm.base import LLMBackend, LLMReply, ToolCall
from funes.llm.parsing import parse_text_tool_calls

BACKENDS = ("ollama", "openai", "embedded")

__all__ = ["BACKENDS", "LLMBackend", "LLMReply", "ToolCall", "backend_from_settings", "parse_text_tool_calls"]


def backend_from_settings(settings: Mapping[str, Any]) -> LLMBackend:
    """The backend LLM_BACKEND names, configured from the settings: the one place a backend is chosen."""
    kind = settings["LLM_BACKEND"]
    limit = {"num_predict" if kind == "ollama" else "max_tokens": settings["LLM_MAX_TOKENS"]}
    common = {"timeout": settings["LLM_TIMEOUT"], "options": {**limit, **settings["LLM_OPTIONS"]},
              "name_cutoff": settings["NAME_FUZZY_CUTOFF"]}
    if kind == "ollama":
        from funes.llm.ollama_backend import OllamaBackend
        return OllamaBackend(host=settings["OLLAMA_HOST"], model=settings["OLLAMA_MODEL"], **common)
    if kind == "openai":
        from funes.llm.openai_backend import OpenAIBackend
        return OpenAIBackend(base_url=settings["OPENAI_BASE_URL"], model=settings["OPENAI_MODEL"],
                             api_key=settings["OPENAI_API_KEY"] or None, **common)
    if kind == "embedded":
        from funes.llm.embedded import EmbeddedBackend
        return EmbeddedBackend(data_dir=settings["DATA_DIR"], threads=settings["LLM_THREADS"],
                               ctx_size=settings["LLM_CTX"], **common)
    raise ValueError(f"unknown LLM backend {kind!r}; choose one of: {', '.join(BACKENDS)}")
