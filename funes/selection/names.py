"""Resolve loosely spelt tool names, from a user's message or from an LLM's tool call."""
from __future__ import annotations

import regex
from rapidfuzz import fuzz, process

_CAMEL = regex.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = regex.compile(r"[\s_.\-/:]+")
_WORDS = regex.compile(r"[\p{L}\p{N}]+")
# A name counts as a request to run it only near such a word, or alone with "please".
_INVOKE = regex.compile(r"\b(use|run|call|invoke|execute|trigger|try|via|tool|function|please|pls)\b", regex.I)
FUZZY_MAX_NAMES = 300  # above this, fuzzy mention search costs more than a route may take
# ...and not in a question about the tool itself ("what does get_weather return?").
_ABOUT = regex.compile(r"\b(what does|what do|how does|how do|return[s]?|explain|documentation|"
                       r"signature|implement|api)\b", regex.I)


def humanize(name: str) -> str:
    """'get_weather', 'getWeather', 'get-weather' -> 'get weather'."""
    return _SEPARATORS.sub(" ", _CAMEL.sub(" ", name)).strip().lower()


def _stem(words: str) -> str:
    return words[4:] if words.startswith("get ") else words


class NameResolver:
    """Exact, then case, then `get_` prefix, then separators, then fuzzy above a cutoff; else None."""

    def __init__(self, names: list[str], fuzzy_cutoff: float):
        self.names = list(dict.fromkeys(names))
        self.cutoff = fuzzy_cutoff
        self._lower = {n.lower(): n for n in self.names}
        self._human: dict[str, str] = {}
        for n in self.names:
            self._human.setdefault(humanize(n), n)
            self._human.setdefault(_stem(humanize(n)), n)
        self._by_size: dict[int, list[str]] = {}
        for phrase in self._human:
            self._by_size.setdefault(len(phrase.split()), []).append(phrase)

    def resolve(self, name: str) -> str | None:
        """The registry name meant by `name`, or None when nothing is close enough."""
        if not name:
            return None
        if name in self.names:
            return name
        lowered = name.lower()
        if lowered in self._lower:
            return self._lower[lowered]
        for variant in (f"get_{lowered}", lowered.removeprefix("get_")):
            if variant in self._lower:
                return self._lower[variant]
        human = humanize(name)
        if human in self._human:
            return self._human[human]
        if _stem(human) in self._human:
            return self._human[_stem(human)]
        match = process.extractOne(human, list(self._human), scorer=fuzz.ratio, score_cutoff=self.cutoff)
        return self._human[match[0]] if match else None

    def mentions(self, message: str) -> dict[str, float]:
        """Tools named in a message as something to run, with the match quality (0-1)."""
        if not _INVOKE.search(message) or _ABOUT.search(message):
            return {}
        words = _WORDS.findall(humanize(message))
        found: dict[str, float] = {}
        for size in range(1, 5):
            for i in range(len(words) - size + 1):
                gram = " ".join(words[i:i + size])
                name, quality = self._match(gram, size)
                if name and (size > 1 or self._called_tool(words, i)):
                    found[name] = max(found.get(name, 0.0), quality)
        return found

    def _match(self, gram: str, size: int) -> tuple[str | None, float]:
        if gram in self._human:
            return self._human[gram], 1.0
        if size < 2 or len(self.names) > FUZZY_MAX_NAMES:
            return None, 0.0
        best = process.extractOne(gram, self._by_size.get(size, []), scorer=fuzz.ratio, score_cutoff=self.cutoff)
        return (self._human[best[0]], best[1] / 100) if best else (None, 0.0)

    @staticmethod
    def _called_tool(words: list[str], i: int) -> bool:
        # one common word ("weather") is a name only when called a tool: "the weather tool"
        return i + 1 < len(words) and words[i + 1].lower() in ("tool", "function")
