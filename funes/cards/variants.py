"""Misspelt variants of generated requests, made by code: a small model rarely misspells on purpose."""
from __future__ import annotations

import random

import regex

_KEYS = "qwertyuiop asdfghjkl zxcvbnm"
_WORD = regex.compile(r"\p{L}{5,}")


def _near(ch: str) -> str:
    """A key next to `ch` on a QWERTY keyboard (or `ch` itself)."""
    i = _KEYS.find(ch.lower())
    if i < 0:
        return ch
    options = [_KEYS[j] for j in (i - 1, i + 1) if 0 <= j < len(_KEYS) and _KEYS[j] != " "]
    return options[0] if options else ch


def misspell_word(word: str, rng: random.Random) -> str:
    """One typing slip inside a word: a swap, a dropped, doubled or neighbouring letter."""
    i = rng.randrange(1, len(word) - 1)
    kind = rng.randrange(4)
    if kind == 0:
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == 1:
        return word[:i] + word[i + 1:]
    if kind == 2:
        return word[:i] + word[i] + word[i:]
    return word[:i] + _near(word[i]) + word[i + 1:]


def misspell(text: str, rng: random.Random, words: int = 2) -> str:
    """`text` with up to `words` of its longer words misspelt; unchanged when none is long enough."""
    spans = [m.span() for m in _WORD.finditer(text)]
    for start, end in sorted(rng.sample(spans, min(words, len(spans))), reverse=True):
        text = text[:start] + misspell_word(text[start:end], rng) + text[end:]
    return text
