"""City guide text: Markdown split by section then size, embedded, stored, and retrieved by meaning."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Engine

from funes.errors import BadRequest
from funes.tools.context import ImportReport, ToolContext
from funes.packs.trip.data import guide_chunks
from memory.chunking import chunk_text, read_document

log = logging.getLogger(__name__)

CHUNK_CHARS = 800    # longest stored passage; a longer section is split at paragraphs, then sentences
CHUNK_OVERLAP = 100  # characters a split passage repeats from the one before
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


@dataclass(frozen=True)
class Section:
    line: int     # line of the heading (1 for text before any heading)
    level: int    # heading depth, 0 before the first heading
    title: str
    body: str


def anchor(title: str) -> str:
    """The GitHub-style anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    slug = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return re.sub(r"\s", "-", slug)


def sections(text: str) -> list[Section]:
    """Split Markdown at `#` headings; text before the first heading is the Introduction."""
    found, title, level, start, body = [], "Introduction", 0, 1, []
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        in_fence = in_fence != line.lstrip().startswith("```")
        match = None if in_fence else _HEADING.match(line)
        if match:
            found.append(Section(start, level, title, "\n".join(body).strip()))
            title, level, start, body = match.group(2).strip(), len(match.group(1)), number, []
        else:
            body.append(line)
    found.append(Section(start, level, title, "\n".join(body).strip()))
    return found


def import_guide(ctx: ToolContext, path: str | Path, source: str | None = None,
                 url: str | None = None) -> ImportReport:
    """Import a Markdown or text guide; re-importing the same source and URL replaces its passages."""
    path = Path(path)
    try:
        text = read_document(path)
    except ValueError as e:
        raise BadRequest(str(e)) from None
    source, url = source or path.stem, url or path.resolve().as_uri()
    report = ImportReport(str(path))
    parts = sections(text)
    rows = [{"source": source, "url": url, **passage} for passage in passages(parts, report)]
    # Each passage is embedded under its page title and section, so a word every passage shares (the city's
    # name) stops pulling questions towards whichever passage happens to repeat it most.
    title = next((s.title for s in parts if s.level == 1), source)
    vectors = ctx.embed([f"{title}: {r['section']}. {r['text']}" for r in rows]) if rows else []
    for row, vector in zip(rows, vectors):
        row["vector"] = np.asarray(vector, dtype=np.float32).tobytes()
    with ctx.engine.begin() as conn:
        conn.execute(delete(guide_chunks).where(guide_chunks.c.source == source, guide_chunks.c.url == url))
        if rows:
            conn.execute(insert(guide_chunks), rows)
    report.imported = len(rows)
    log.info("imported %d guide passages from %s", len(rows), path)
    return report


def passages(parts: list[Section], report: ImportReport) -> list[dict]:
    """Each section cut to passage size; empty sections are noted in the report."""
    found = []
    for i, section in enumerate(parts):
        if not section.body:
            # A heading directly followed by a deeper one (a page title) is structure, not a missing text.
            if i + 1 >= len(parts) or parts[i + 1].level <= section.level:
                report.skipped.append((section.line, f"section {section.title!r} has no text"))
            continue
        for piece in chunk_text(section.body, max_chars=CHUNK_CHARS, overlap=CHUNK_OVERLAP):
            found.append({"section": section.title, "section_anchor": anchor(section.title) if section.level else "",
                          "position": len(found), "text": piece})
    return found


def retrieve(engine: Engine, embed, query: str, top_k: int) -> list[dict]:
    """The top_k stored passages closest in meaning to the query, best first, with cosine scores."""
    with engine.connect() as conn:
        stored = conn.execute(select(guide_chunks.c.id, guide_chunks.c.vector)).all()
    if not stored:
        return []
    matrix = np.stack([np.frombuffer(v, dtype=np.float32) for _, v in stored])
    scores = matrix @ np.asarray(embed([query]), dtype=np.float32)[0]
    best = np.argsort(-scores, kind="stable")[:top_k]
    ids = [stored[i][0] for i in best]
    with engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(select(guide_chunks).where(guide_chunks.c.id.in_(ids)))}
    hits = []
    for i in best:
        row = rows[stored[i][0]]
        hits.append({"text": row.text, "source": row.source, "url": row.url, "section": row.section,
                     "section_anchor": row.section_anchor, "score": round(float(scores[i]), 4)})
    return hits
