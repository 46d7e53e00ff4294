"""Tool names in a user's message: a tool asked for by name, or a question about how a named tool works."""
from __future__ import annotations

import regex

from funes.tools.names import NameResolver, humanize

_WORDS = regex.compile(r"[\p{L}\p{N}]+")
# A message asks to run a named tool only if it holds such a word...
_INVOKE = regex.compile(r"\b(use|run|call|invoke|execute|trigger|try|via|tool|function|please|pls)\b", regex.I)
# ...and not in a question about the tool itself ("what does get_weather return?").
_ABOUT = regex.compile(r"\b(what does|what do|how does|how do|return[s]?|explain|documentation|"
                       r"signature|implement|api)\b", regex.I)
# A question about what a named tool takes or returns: answered from its card, not by running it.
_DOCS = regex.compile(r"\b(what|which|how)\b.*\b(arguments?|parameters?|params|signature|docs?|documentation|"
                      r"returns?|schema|works?)\b", regex.I)
_RUN = {"use", "using", "run", "call", "invoke", "execute", "trigger", "try", "via"}
_TOKENS = regex.compile(r"[\p{L}\p{N}]+(?:[_.\-/:][\p{L}\p{N}]+)*")  # words, or identifiers like get_weather


def mentions(resolver: NameResolver, message: str) -> dict[str, float]:
    """Tools named in a message as something to run, with the match quality (0-1)."""
    if not _INVOKE.search(message) or _ABOUT.search(message):
        return {}
    words, token = _words(message)
    found: dict[str, float] = {}
    for size in range(1, 5):
        for i in range(len(words) - size + 1):
            name, quality = resolver.match_phrase(" ".join(words[i:i + size]), size)
            if name and _referenced(words, token, i, size):
                found[name] = max(found.get(name, 0.0), quality)
    return found


def asked_about(resolver: NameResolver, message: str) -> bool:
    """Whether the message asks how a tool, spelt as an identifier, works ("what does get_weather return?")."""
    if not _DOCS.search(message):
        return False
    words, token = _words(message)
    for i, t in enumerate(token):
        if t < 0 or (i and token[i - 1] == t) or _after_run_verb(words, i):
            continue  # not an identifier's first word, or one the message asks to run
        size = token.count(t)
        if resolver.match_phrase(" ".join(words[i:i + size]), size)[0]:
            return True
    return False


def _words(message: str) -> tuple[list[str], list[int]]:
    """The message's words, each with the index of the identifier it came from (-1 for plain words)."""
    words: list[str] = []
    token: list[int] = []
    for t, raw in enumerate(_TOKENS.findall(message)):
        parts = _WORDS.findall(humanize(raw))
        words += parts
        token += [t if len(parts) > 1 else -1] * len(parts)
    return words, token


def _referenced(words: list[str], token: list[int], i: int, size: int) -> bool:
    """Whether words[i:i+size] read as a tool's name rather than as ordinary words ("help me ...")."""
    if size > 1 and token[i] >= 0 and token[i] == token[i + size - 1]:
        return True  # spelt as an identifier: build_itinerary, getStatistics, spending-summary
    after = words[i + size].lower() if i + size < len(words) else ""
    if after in ("tool", "function"):
        return True  # "the weather tool"
    # a several-word name right after a verb of running it: "run get weather", "use the respond ..."
    return size > 1 and _after_run_verb(words, i)


def _after_run_verb(words: list[str], i: int) -> bool:
    """Whether one of the two words before words[i] is a verb of running a tool ("run", "use", ...)."""
    return any(w.lower() in _RUN for w in words[max(0, i - 2):i])
