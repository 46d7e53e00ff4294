"""Watch history data: the pack's tables, the Google Takeout importer, and a generated sample history.

Takeout's `watch-history.json` is a list, newest first, of entries like
{"title": "Watched <title>", "titleUrl": "https://www.youtube.com/watch?v=<id>",
 "subtitles": [{"name": "<channel>", "url": "https://www.youtube.com/channel/<UC id>"}], "time": "...Z"}.
Takeout records no video lengths; an optional "durationSeconds" field (the sample has it) is kept.
Times are stored as naive UTC so SQLite and PostgreSQL compare them alike.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import random
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np
from sqlalchemy import (Column, DateTime, ForeignKey, Integer, LargeBinary, MetaData, String, Table, Text,
                        UniqueConstraint, func, insert, select)

from funes.errors import BadRequest
from funes.tools.context import ImportReport, ToolContext

log = logging.getLogger(__name__)
metadata = MetaData()

channels = Table(
    "watch_channels", metadata,
    Column("channel_id", String(64), primary_key=True),
    Column("name", Text, nullable=False),
)

videos = Table(
    "watch_videos", metadata,
    Column("video_id", String(11), primary_key=True),
    Column("title", Text, nullable=False),
    Column("channel_id", String(64), ForeignKey("watch_channels.channel_id"), nullable=True, index=True),
    Column("duration_s", Integer, nullable=True),     # None: length unknown (Takeout has none)
    Column("embedding", LargeBinary, nullable=False),  # float32 unit vector of "title (channel)"
)

events = Table(
    "watch_events", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("video_id", String(11), ForeignKey("watch_videos.video_id"), nullable=False, index=True),
    Column("watched_at", DateTime, nullable=False, index=True),  # naive UTC
    UniqueConstraint("video_id", "watched_at", name="uq_watch_events_video_time"),
)

VIDEO_ID = re.compile(r"[A-Za-z0-9_-]{11}")
_EMBED_BATCH = 256  # titles per encoder call while importing


@dataclass(frozen=True)
class Watch:
    """One watch event parsed from a Takeout entry."""

    video_id: str
    title: str
    channel_id: str | None
    channel_name: str | None
    duration_s: int | None
    watched_at: datetime


def video_id_from(text: str) -> str | None:
    """The 11-character id in a bare id, a youtube.com watch/shorts link or a youtu.be link; else None."""
    text = text.strip()
    if VIDEO_ID.fullmatch(text):
        return text
    url = urlsplit(text if "//" in text else "https://" + text)
    host, parts = (url.hostname or "").lower(), [p for p in url.path.split("/") if p]
    if host == "youtu.be" or host.endswith(".youtu.be"):
        candidate = parts[0] if parts else ""
    elif host == "youtube.com" or host.endswith(".youtube.com"):
        if len(parts) >= 2 and parts[0] in ("shorts", "live", "embed", "v"):
            candidate = parts[1]
        else:
            candidate = parse_qs(url.query).get("v", [""])[0]
    else:
        return None
    return candidate if VIDEO_ID.fullmatch(candidate) else None


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return when.astimezone(timezone.utc).replace(tzinfo=None) if when.tzinfo else when


def _channel(item: dict) -> tuple[str | None, str | None]:
    subtitles = item.get("subtitles")
    first = subtitles[0] if isinstance(subtitles, list) and subtitles and isinstance(subtitles[0], dict) else {}
    match = re.search(r"/channel/([A-Za-z0-9_-]{1,64})", str(first.get("url") or ""))
    name = str(first.get("name") or "").strip() or None
    return (match.group(1), name or match.group(1)) if match else (None, name)


def _duration(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return int(round(value))


def parse_item(item: Any) -> Watch | str:
    """One Takeout entry as a Watch, or the reason it is skipped."""
    if not isinstance(item, dict):
        return "not a JSON object"
    title = str(item.get("title") or "")
    details = item.get("details") if isinstance(item.get("details"), list) else []
    if any(isinstance(d, dict) and d.get("name") == "From Google Ads" for d in details):
        return "an ad (From Google Ads)"
    url = item.get("titleUrl")
    if not isinstance(url, str) or not url:
        return "a removed video (no titleUrl)" if "removed" in title.lower() else "no titleUrl (not a video)"
    if "/post/" in url or title.startswith("Viewed "):
        return "a community post, not a video"
    video_id = video_id_from(url)
    if video_id is None:
        return f"malformed video id in titleUrl {url!r}"
    watched_at = _parse_time(item.get("time"))
    if watched_at is None:
        return f"malformed time {item.get('time')!r}"
    channel_id, channel_name = _channel(item)
    return Watch(video_id, title.removeprefix("Watched ").strip() or video_id, channel_id, channel_name,
                 _duration(item.get("durationSeconds")), watched_at)


def _read_items(path: Path) -> list:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadRequest(f"{path}: file not found") from None
    except OSError as e:  # a directory, no permission, a disk error
        raise BadRequest(f"{path}: cannot read: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadRequest(f"{path}: not JSON ({e}); in Google Takeout choose JSON, not HTML, "
                         "as the YouTube history format") from None
    if not isinstance(data, list):
        raise BadRequest(f"{path}: expected a JSON list of watch entries (Takeout's watch-history.json)")
    return data


def _drop_known(conn, watches: list[tuple[int, Watch]], report: ImportReport) -> list[Watch]:
    """Leave out watches already stored (a second import of the same file) or repeated in the file."""
    if not watches:
        return []
    first, last = min(w.watched_at for _, w in watches), max(w.watched_at for _, w in watches)
    seen = {(r.video_id, r.watched_at) for r in conn.execute(
        select(events.c.video_id, events.c.watched_at).where(events.c.watched_at.between(first, last)))}
    fresh = []
    for n, watch in watches:
        key = (watch.video_id, watch.watched_at)
        if key in seen:
            report.skipped.append((n, "already imported (same video at the same time)"))
            continue
        seen.add(key)
        fresh.append(watch)
    return fresh


def _store(conn, embed, watches: list[Watch]) -> None:
    """Insert the new channels, the new videos with their title vectors, and every watch event."""
    known_channels = set(conn.scalars(select(channels.c.channel_id)))
    new_channels = {w.channel_id: w.channel_name for w in reversed(watches)
                    if w.channel_id and w.channel_id not in known_channels}
    if new_channels:
        conn.execute(insert(channels), [{"channel_id": c, "name": n} for c, n in new_channels.items()])
    known_videos = set(conn.scalars(select(videos.c.video_id)))
    new_videos = list({w.video_id: w for w in reversed(watches) if w.video_id not in known_videos}.values())
    for start in range(0, len(new_videos), _EMBED_BATCH):
        batch = new_videos[start:start + _EMBED_BATCH]
        vectors = np.asarray(embed([embedding_text(w.title, w.channel_name) for w in batch]), dtype=np.float32)
        conn.execute(insert(videos), [
            {"video_id": w.video_id, "title": w.title, "channel_id": w.channel_id, "duration_s": w.duration_s,
             "embedding": v.tobytes()} for w, v in zip(batch, vectors)])
    if watches:
        conn.execute(insert(events), [{"video_id": w.video_id, "watched_at": w.watched_at} for w in watches])


def embedding_text(title: str, channel_name: str | None) -> str:
    """The text a video is embedded as: its title, and its channel when known."""
    return f"{title} ({channel_name})" if channel_name else title


def import_file(ctx: ToolContext, path: str | Path) -> ImportReport:
    """Import a Google Takeout watch-history.json; every skipped item is reported with its reason."""
    path = Path(path)
    report, watches = ImportReport(str(path)), []
    for n, item in enumerate(_read_items(path), 1):
        parsed = parse_item(item)
        if isinstance(parsed, str):
            report.skipped.append((n, parsed))
        else:
            watches.append((n, parsed))
    with ctx.engine.begin() as conn:
        fresh = _drop_known(conn, watches, report)
        # Takeout lists newest first: the newest title and channel name of a video win.
        _store(conn, ctx.embed, fresh)
    report.imported = len(fresh)
    report.skipped.sort()
    log.info("watch_history import %s: %d imported, %d skipped", path, report.imported, len(report.skipped))
    return report


# --- sample data -------------------------------------------------------------------------------------

_SAMPLE_CHANNELS: dict[str, tuple[int, int, list[str]]] = {  # channel: (shortest s, longest s, titles)
    "Kurzgesagt – In a Nutshell": (420, 900, [
        "What Happens If You Fall Into a Black Hole?", "The Largest Star in the Universe",
        "Why Don't We Have a Base on the Moon Yet?", "The Immune System Explained",
        "What If Earth Stopped Spinning?"]),
    "3Blue1Brown": (900, 1800, [
        "But what is a neural network?", "The essence of calculus", "Visualizing the Fourier transform",
        "Eigenvectors and eigenvalues", "Why is pi here? The Basel problem", "Group theory and the Monster"]),
    "Veritasium": (900, 1500, [
        "The Surprising Secret of Synchronization", "Why No One Has Measured the Speed of Light",
        "The Bizarre Behavior of Rotating Bodies", "Math Has a Fatal Flaw", "How Lasers Really Work"]),
    "Tasty": (180, 600, [
        "5 Easy One-Pan Chicken Dinners", "The Ultimate Chocolate Chip Cookie", "Homemade Ramen From Scratch",
        "Meal Prep for the Whole Week", "Perfect Fluffy Pancakes", "Street Tacos Three Ways"]),
    "Marques Brownlee": (600, 1200, [
        "iPhone Review: The Camera Upgrade", "The Best Smartphones of the Year", "Pixel Review: Still the AI Phone",
        "Testing the Thinnest Laptop Ever", "Electric Car Review: One Year Later", "My Studio Desk Setup Tour"]),
    "Numberphile": (480, 1200, [
        "The Riemann Hypothesis Explained", "Prime Numbers and the Ulam Spiral", "The Golden Ratio Is Weird",
        "Infinity Is Bigger Than You Think", "The Four Colour Theorem"]),
    "PBS Space Time": (900, 1200, [
        "How Black Holes Evaporate: Hawking Radiation", "What Is Dark Matter Really?", "The Expanding Universe",
        "Are Wormholes Real?", "The Edge of the Observable Universe"]),
    "Joshua Weissman": (600, 1080, [
        "Making the Perfect Sourdough Bread", "Fast Food Burger But Better", "Homemade Pizza Dough Masterclass",
        "The Best Fried Rice at Home", "Three Ways to Cook a Steak"]),
    "Marty Music": (600, 1500, [
        "Beginner Guitar Lesson: Your First Chords", "Easy Blues Guitar Riffs", "How to Play Wonderwall on Guitar",
        "Fingerpicking Patterns for Beginners", "Barre Chords Made Easy"]),
    "JustinGuitar": (600, 1200, [
        "Guitar Scales Every Beginner Should Know", "Strumming Patterns That Work", "How to Change Chords Faster",
        "Learn the Pentatonic Scale", "Practice Routine for Guitar Players"]),
    "Ben Felix": (900, 1500, [
        "Index Funds vs Active Investing", "How to Think About Risk in Your Portfolio",
        "Should You Pay Off Your Mortgage?", "The Case for Global Diversification", "Why Stock Picking Fails"]),
    "The Plain Bagel": (600, 1080, [
        "How the Stock Market Works", "ETFs Explained for Beginners", "What Is Inflation?",
        "Bonds and Interest Rates Explained", "Compound Interest in Ten Minutes"]),
    "Linus Tech Tips": (720, 1500, [
        "Building a Budget Gaming PC", "Is This the Best Graphics Card?", "We Tested the Cheapest Laptops",
        "Home Network Upgrade on a Budget", "The Mechanical Keyboard Rabbit Hole", "Mini PC Review Roundup"]),
    "NASA": (300, 3600, [
        "James Webb Space Telescope: First Images", "Artemis Moon Mission Launch", "Mars Rover Landing Highlights",
        "Living on the International Space Station", "Journey to Saturn's Rings"]),
    "Binging with Babish": (420, 900, [
        "Basics: Knife Skills", "Basics: Homemade Pasta", "Recreating Famous Movie Breakfasts",
        "Basics: Roast Chicken", "The Perfect Cheesecake", "Basics: Sourdough Starter"]),
}
_SAMPLE_DAYS = 120     # the sample history spans this many days before today
_SAMPLE_REWATCHES = 40  # extra watch events of already watched videos


def _sample_id(text: str, length: int) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).decode()[:length]


def _sample_entry(title: str, channel: str, seconds: int, when: datetime) -> dict:
    return {"header": "YouTube", "title": f"Watched {title}",
            "titleUrl": f"https://www.youtube.com/watch?v={_sample_id(title, 11)}",
            "subtitles": [{"name": channel, "url": f"https://www.youtube.com/channel/UC{_sample_id(channel, 22)}"}],
            "time": when.isoformat(timespec="milliseconds") + "Z", "products": ["YouTube"],
            "activityControls": ["YouTube watch history"], "durationSeconds": seconds}


def _sample_skips(today: date) -> list[dict]:
    when = datetime.combine(today - timedelta(days=3), time(20, 15)).isoformat(timespec="milliseconds") + "Z"
    return [{"header": "YouTube", "title": "Watched a video that has been removed", "time": when,
             "products": ["YouTube"]},
            {"header": "YouTube", "title": "Watched Summer Sale: 50% Off Headphones",
             "titleUrl": "https://www.youtube.com/watch?v=AdSale24xYz", "time": when, "products": ["YouTube"],
             "details": [{"name": "From Google Ads"}]},
            {"header": "YouTube", "title": "Watched a video that has been removed", "time": when,
             "products": ["YouTube"]}]


def write_sample(directory: Path, today: date | None = None) -> list[Path]:
    """Write a deterministic sample watch-history.json whose watches end on `today`."""
    today, rng = today or date.today(), random.Random(3)
    catalogue = [(title, channel, rng.randint(low, high)) for channel, (low, high, titles)
                 in _SAMPLE_CHANNELS.items() for title in titles]
    plays = catalogue + [rng.choice(catalogue) for _ in range(_SAMPLE_REWATCHES)]
    rng.shuffle(plays)
    entries = []
    for i, (title, channel, seconds) in enumerate(plays):
        days = i % 3 if i < 6 else rng.randint(0, _SAMPLE_DAYS)  # a few from the last days, the rest spread
        # Watches dated today fall in the early hours, so they are in the past for most of the day.
        hour = rng.randint(0, 5) if days == 0 else rng.randint(7, 23)
        moment = time(hour, rng.randint(0, 59))
        entries.append(_sample_entry(title, channel, seconds, datetime.combine(today - timedelta(days=days), moment)))
    entries.sort(key=lambda e: e["time"], reverse=True)  # Takeout lists newest first
    entries[4:4] = _sample_skips(today)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "watch-history.json"
    path.write_text(json.dumps(entries, indent=1, ensure_ascii=False), encoding="utf-8")
    return [path]


def load_sample(ctx: ToolContext) -> list[ImportReport]:
    """Write and import the sample history, only when the pack's tables are empty."""
    with ctx.engine.connect() as conn:
        if conn.scalar(select(func.count()).select_from(videos)):
            return []
    return [import_file(ctx, path) for path in write_sample(ctx.data_dir / "sample", today=ctx.today())]
