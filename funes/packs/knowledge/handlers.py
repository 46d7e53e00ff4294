"""The knowledge pack: the finance app's own documentation, web search, and the final answer of a lookup.

The app documentation is one Markdown file (APP_DOCS_PATH, or the bundled `data/app_docs.md`), cut into
sections at `#` and `##` headings and ranked by embedding similarity to what the caller needs. Web search
goes through the `ddgs` metasearch library; its network failures are `TransientError`s the runner retries.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import regex
from ddgs.exceptions import DDGSException

from funes.errors import ToolError
from funes.tools.context import ToolContext, TransientError
from funes.tools.loaders import tool

BUNDLED_DOCS = Path(__file__).parent / "app_docs.md"
UNREACHABLE = "web search is unreachable (offline?)"
NO_RESULTS = "No results found."  # what ddgs raises when every engine answered with nothing
_HEADING = regex.compile(r"^(#{1,2})\s+(.+?)\s*#*\s*$")
_FENCE = regex.compile(r"^\s*(```|~~~)")


class SearchClient(Protocol):
    """What search_online needs of a search library: ddgs' `DDGS` has this method."""

    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]: ...


class Pack:
    """The knowledge pack's handlers; `search_client` replaces a fresh `ddgs.DDGS` per search (tests)."""

    def __init__(self, ctx: ToolContext, search_client: SearchClient | None = None):
        self.ctx = ctx
        self.search_client = search_client
        self._vectors: dict[tuple, np.ndarray] = {}  # (path, mtime, size) -> section vectors
        self._lock = threading.Lock()

    @tool(name="get_application_information")
    def get_application_information(self, description: str = "") -> dict[str, Any]:
        """The app's documentation, its sections most relevant to `description` first."""
        path = self.docs_path()
        try:
            text, stat = path.read_text(encoding="utf-8"), path.stat()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ToolError(f"app documentation not found: {path} (set APP_DOCS_PATH to a Markdown file)") from None
        sections = split_sections(text, default_title=path.stem)
        if description.strip() and len(sections) > 1:
            sections = self._ranked(sections, description, (str(path), stat.st_mtime_ns, stat.st_size))
        return {"source": str(path), "sections": sections}

    @tool(name="search_online", cache_ttl="SEARCH_CACHE_TTL")
    def search_online(self, query: str, description: str = "") -> list[dict[str, str]]:
        """Search the web; each result has a title, url and snippet."""
        if not query.strip():
            raise ToolError("search_online needs a non-empty query")
        client = self.search_client or _ddgs(self.ctx.settings["HTTP_TIMEOUT"])
        try:
            hits = client.text(query.strip(), max_results=self.ctx.settings["SEARCH_MAX_RESULTS"])
        except DDGSException as e:
            if str(e) == NO_RESULTS:
                return []
            raise TransientError(f"{UNREACHABLE}: {e}") from None
        except OSError as e:  # connection refused, timeouts, DNS from a client that lets them through
            raise TransientError(f"{UNREACHABLE}: {type(e).__name__}: {e}") from None
        return [{"title": h.get("title", ""), "url": h.get("href") or h.get("url", ""),
                 "snippet": h.get("body") or h.get("snippet", "")} for h in hits]

    @tool(name="respond")
    def respond(self, answer: str, description: str = "") -> str:
        """Hand the user the final answer; this ends the lookup loop."""
        if not answer.strip():
            raise ToolError("respond needs the answer text")
        return answer

    def docs_path(self) -> Path:
        """The app documentation in use: APP_DOCS_PATH, or the bundled file when it is empty."""
        configured = self.ctx.settings.get("APP_DOCS_PATH") or ""
        return Path(configured).expanduser() if configured else BUNDLED_DOCS

    def _ranked(self, sections: list[dict[str, Any]], description: str, key: tuple) -> list[dict[str, Any]]:
        """Sections by cosine similarity to `description`, best first, each with its score."""
        with self._lock:
            vectors = self._vectors.get(key)
        if vectors is None:
            vectors = self.ctx.embed([f"{s['title']}\n{s['text']}" for s in sections])
            with self._lock:
                self._vectors = {key: vectors}  # one docs file in use at a time
        scores = vectors @ self.ctx.embed([description])[0]
        order = np.argsort(-scores, kind="stable")
        return [{**sections[i], "score": round(float(scores[i]), 3)} for i in order]


def split_sections(markdown: str, default_title: str = "Documentation") -> list[dict[str, str]]:
    """Cut Markdown at `#` and `##` headings into {title, text} sections, dropping empty ones."""
    sections, title, lines, fenced = [], default_title, [], False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        if heading:
            sections.append((title, lines))
            title, lines = heading.group(2), []
        else:
            lines.append(line)
    sections.append((title, lines))
    return [{"title": t, "text": "\n".join(body).strip()} for t, body in sections if "".join(body).strip()]


def _ddgs(timeout: float) -> SearchClient:
    """A ddgs metasearch client (imported on first use: it loads an HTTP stack)."""
    from ddgs import DDGS

    return DDGS(timeout=max(1, round(timeout)))
