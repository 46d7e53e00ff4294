"""Resolve loosely spelt tool names: a name an LLM wrote in a call, or a phrase in a user's message."""
from __future__ import annotations

import unicodedata

import regex
from rapidfuzz import fuzz, process

from funes.errors import RegistryError

_CAMEL = regex.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = regex.compile(r"[\s_.\-/:]+")
FUZZY_MAX_NAMES = 300  # above this, fuzzy phrase search costs more than a route may take


def check_name(name: str, where: str = "") -> None:
    """RegistryError naming the tool (escaped) when its name holds a control or invisible character: a line break
    in a name would write lines of its own into the server's log, and no model can spell one back."""
    bad = next((c for c in name if unicodedata.category(c)[0] == "C" or unicodedata.category(c) in ("Zl", "Zp")),
               None)
    if bad is not None:
        raise RegistryError(f"{where}{': ' if where else ''}tool name {name!r} holds the control character {bad!r}; "
                            "a name must be printable text (letters, digits, _ and -)")


def printable(name: str) -> str:
    """A name as a log line may show it: as it is when printable, else escaped (a caller may have written it)."""
    return name if name.isprintable() else ascii(name)


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

    def match_phrase(self, gram: str, size: int) -> tuple[str | None, float]:
        """The tool a phrase of `size` words names, with the match quality (0-1); fuzzy only for short registries."""
        if gram in self._human:
            return self._human[gram], 1.0
        if size < 2 or len(self.names) > FUZZY_MAX_NAMES:
            return None, 0.0
        best = process.extractOne(gram, self._by_size.get(size, []), scorer=fuzz.ratio, score_cutoff=self.cutoff)
        return (self._human[best[0]], best[1] / 100) if best else (None, 0.0)
