"""Documents into memory-sized chunks: paragraphs first, then sentences, overlapping by a few characters."""
from __future__ import annotations

import os
import re
from pathlib import Path

DOCUMENT_SUFFIXES = (".txt", ".md")

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
# A sentence ends at . ! or ?, optionally followed by a closing quote or bracket, then whitespace.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'”’)\]])\s+")


def chunk_text(text: str, *, max_chars: int = 800, overlap: int = 100) -> list[str]:
    """Split text into non-empty chunks of at most max_chars, each starting with the previous one's tail."""
    if overlap < 0:
        raise ValueError(f"overlap must be zero or more, got {overlap}")
    # Every unit must fit after the overlap tail and a paragraph break, so the overlap is never dropped.
    room = max_chars - overlap - 2
    if room < 1:
        raise ValueError(f"max_chars ({max_chars}) must exceed overlap ({overlap}) by at least 3")
    chunks: list[str] = []
    current, current_para = "", -1
    for unit, para in _units(text, room):
        sep = " " if para == current_para else "\n\n"
        if current and len(current) + len(sep) + len(unit) > max_chars:
            chunks.append(current)
            current = _tail(current, overlap)
        current = f"{current}{sep}{unit}" if current else unit
        current_para = para
    if current:
        chunks.append(current)
    return chunks


def read_document(path: str | os.PathLike) -> str:
    """Read a .txt or .md file as UTF-8 text."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder: name the .txt or .md files in it")
    if path.suffix.lower() not in DOCUMENT_SUFFIXES:
        raise ValueError(f"unsupported document type {path.suffix or '(none)'!r} for {path}: "
                         f"use one of {', '.join(DOCUMENT_SUFFIXES)}")
    if not path.is_file():
        raise ValueError(f"document not found: {path}")
    try:
        # utf-8-sig drops the byte-order mark some Windows editors write.
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"document is not UTF-8 text: {path} (byte {exc.start})") from None


def _units(text: str, room: int) -> list[tuple[str, int]]:
    """Return (piece, paragraph number) pairs, each piece at most `room` characters."""
    units = []
    paragraphs = _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n").replace("\r", "\n"))
    for number, paragraph in enumerate(p.strip() for p in paragraphs):
        if len(paragraph) <= room:
            pieces = [paragraph] if paragraph else []
        else:
            sentences = (s.strip() for s in _SENTENCE_END.split(paragraph))
            pieces = [piece for s in sentences if s for piece in _hard_split(s, room)]
        units.extend((piece, number) for piece in pieces)
    return units


def _hard_split(sentence: str, limit: int) -> list[str]:
    """Cut an over-long sentence into pieces of at most `limit`, at a line break or space when one is near."""
    pieces = []
    while len(sentence) > limit:
        window = sentence[:limit + 1]
        cut = window.rfind("\n")
        # A break in the first half would leave tiny pieces; cut mid-word rather than that.
        if cut < max(1, limit // 2):
            cut = window.rfind(" ")
        if cut < max(1, limit // 2):
            cut = limit
        pieces.append(sentence[:cut].rstrip())
        sentence = sentence[cut:].lstrip()
    if sentence:
        pieces.append(sentence)
    return pieces


def _tail(chunk: str, overlap: int) -> str:
    """Return the last `overlap` characters of a chunk, starting at a word boundary when one exists."""
    if overlap == 0:
        return ""
    tail = chunk[-overlap:]
    if len(chunk) > overlap and not chunk[-overlap - 1].isspace():
        space = re.search(r"\s", tail)
        # Starting mid-word would embed a fragment; a tail with no space (a long token) is kept whole.
        if space and tail[space.start():].strip():
            tail = tail[space.start():]
    return tail.strip()
