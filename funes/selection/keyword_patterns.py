"""Tool-specific keyword patterns (the `regex` module), compiled once per registry."""
from __future__ import annotations

import logging
import time

import regex

from funes.errors import RegistryError
from funes.tools.registry import Registry

log = logging.getLogger(__name__)
MATCH_TIMEOUT_S = 0.05  # a pattern that backtracks past this on one message counts as no match


class KeywordMatcher:
    """Which tools' own patterns match a message; never generic 'what is (.+)' patterns."""

    def __init__(self, registry: Registry, budget_s: float = 0.2):
        self._budget_s = budget_s  # all patterns together, per message: many slow ones must not add up
        # (tool position, pattern, bounded): the packs' own patterns are tested against backtracking
        # (tests/test_limits.py) and run unbounded, as a timeout doubles a search's cost; any other is bounded
        self._patterns: list[tuple[int, regex.Pattern, bool]] = []
        for i, tool in enumerate(registry):
            bounded = not tool.source.startswith("pack:")
            for pattern in tool.keywords:
                try:
                    self._patterns.append((i, regex.compile(pattern, regex.IGNORECASE | regex.V1), bounded))
                except (regex.error, ValueError) as e:  # ValueError: inline flags that clash, e.g. (?V0)
                    raise RegistryError(f"tool {tool.name!r}: bad keyword pattern {pattern!r}: {e}") from None
            for word in tool.generated.keywords if tool.generated else ():
                # generated keywords are plain words, never patterns: a model must not write a regex that runs here
                self._patterns.append((i, regex.compile(rf"\b{regex.escape(word)}\b", regex.IGNORECASE | regex.V1),
                                       False))  # a plain word cannot backtrack

    def match(self, message: str) -> dict[int, str]:
        """Tool position -> the first pattern text that matched; patterns left when the budget is spent miss."""
        hits: dict[int, str] = {}
        deadline = time.monotonic() + self._budget_s
        for n, (i, pattern, bounded) in enumerate(self._patterns):
            if i in hits:
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning("keyword patterns: %.0f ms spent on a %d-character message; %d of %d patterns not tried",
                            self._budget_s * 1000, len(message), len(self._patterns) - n, len(self._patterns))
                break
            if _search(pattern, message, min(MATCH_TIMEOUT_S, left) if bounded else None):
                hits[i] = pattern.pattern
        return hits


def _search(pattern: regex.Pattern, message: str, timeout_s: float | None) -> bool:
    """Whether the pattern matches, bounded in time: caller-supplied patterns may backtrack catastrophically."""
    try:
        return pattern.search(message, timeout=timeout_s) is not None
    except TimeoutError:
        log.warning("keyword pattern %r timed out on a %d-character message", pattern.pattern[:80], len(message))
        return False
