"""Watch history tools: recent videos, one video, statistics, a channel, topic search and similar videos.

Every handler answers in plain sentences for the LLM (the seed's formats), with video ids in the lists
so a follow-up ("more like the second one") can name one. Data comes from `watch_history_data`.
"""
from __future__ import annotations

from collections.abc import Callable

import re
import threading
from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np
from rapidfuzz import fuzz, process, utils
from sqlalchemy import Select, distinct, func, select

from funes.errors import ToolError
from funes.tools.context import ToolContext
from funes.tools.loaders import tool
from funes.packs.watch_history.data import (channels, events, import_file, load_sample, metadata, video_id_from,
                                            videos, write_sample)

__all__ = ["Pack", "metadata", "import_file", "load_sample", "write_sample"]

_UNKNOWN_CHANNEL = "an unknown channel"
_CHANNEL_ID = re.compile(r"UC[A-Za-z0-9_-]{22}")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def clock(seconds: int | None) -> str:
    """A video length as M:SS or H:MM:SS, or 'length unknown'."""
    if seconds is None:
        return "length unknown"
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _watch_time(t, sentence: Callable[[str], str]) -> str:
    """The watch-time sentence, told how many lengths are known, or why watch time is unknown."""
    if not t.timed:
        return "Watch time is unknown: Google Takeout does not record video lengths. "
    return sentence(f" (lengths are known for {t.timed:,} of the {t.watches:,})" if t.timed < t.watches else "")


def span(seconds: int) -> str:
    """A total watch time in hours and minutes ('3 hours 5 minutes')."""
    hours, minutes = divmod(int(seconds) // 60, 60)
    if not hours and not minutes:
        return _plural(int(seconds), "second")
    return " ".join(p for p in (hours and _plural(hours, "hour"), minutes and _plural(minutes, "minute")) if p)


def time_ago(when: datetime, today: date, now: datetime | None = None) -> str:
    """How long ago `when` was: hours with a real clock, otherwise days, weeks, months or years."""
    if now is not None and when >= now - timedelta(hours=24):
        seconds = (now - when).total_seconds()
        if seconds < 60:
            return "just now"
        return _plural(int(seconds // 60), "minute") + " ago" if seconds < 3600 else \
            _plural(int(seconds // 3600), "hour") + " ago"
    days = (today - when.date()).days
    if days <= 0:
        return "today"
    if days == 1:
        return "yesterday"
    if days < 7:
        return f"{days} days ago"
    for unit, size in (("year", 365), ("month", 30), ("week", 7)):
        if days >= size:
            return _plural(days // size, unit) + " ago"


def _check_count(value: int, name: str, most: int) -> int:
    if value < 1:
        raise ToolError(f"{name} must be at least 1, got {value}")
    return min(value, most)


def _check_video_id(value: str) -> str:
    video_id = video_id_from(value or "")
    if video_id is None:
        raise ToolError(f"video_id must be an 11-character YouTube video ID (letters, digits, '-' or '_'), "
                        f"e.g. 'dQw4w9WgXcQ', or a YouTube link; got {value!r}")
    return video_id


def _check_date(value: str | None, name: str) -> date | None:
    if value is None or not value.strip():  # models send "" for a filter they do not want
        return None
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise ToolError(f"{name} must be a date written YYYY-MM-DD, e.g. 2024-03-01; got {value!r}") from None


def _watch_rows() -> Select:
    return (select(events.c.video_id, events.c.watched_at, videos.c.title, videos.c.duration_s,
                   videos.c.channel_id, channels.c.name.label("channel"))
            .join(videos, videos.c.video_id == events.c.video_id)
            .outerjoin(channels, channels.c.channel_id == videos.c.channel_id))


class Pack:
    """The watch_history handlers over the pack's tables."""

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx
        self._lock = threading.Lock()
        self._vectors: tuple[int, list[str], np.ndarray] | None = None  # (video count, ids, unit rows)

    def _setting(self, name: str) -> Any:
        return self.ctx.settings[name]

    def _clock(self) -> tuple[date, datetime | None]:
        """Today, and the current UTC time when today is the real date (so 'hours ago' is true)."""
        today = self.ctx.today()
        if isinstance(today, datetime):
            return today.date(), today.replace(tzinfo=None)
        return today, datetime.now(timezone.utc).replace(tzinfo=None) if today == date.today() else None

    def _ago(self, when: datetime) -> str:
        return time_ago(when, *self._clock())

    def _rows(self, statement) -> list:
        with self.ctx.engine.connect() as conn:
            return list(conn.execute(statement))

    def _find_channel(self, channel_id: str | None, channel_name: str | None) -> tuple[Any, str]:
        """The channel row for an id or a loosely spelt name, or None and why not."""
        table = self._rows(select(channels.c.channel_id, channels.c.name))
        if channel_id:
            match = next((r for r in table if r.channel_id == channel_id.strip()), None)
            if match or not channel_name and _CHANNEL_ID.fullmatch(channel_id.strip()):
                return match, f"I found no channel with ID {channel_id} in your watch history."
            channel_name = channel_name or channel_id  # an LLM may put a name in channel_id
        names = {r.channel_id: r.name for r in table}
        best = process.extractOne(channel_name, names, scorer=fuzz.WRatio, processor=utils.default_process,
                                  score_cutoff=self._setting("WATCH_CHANNEL_FUZZY_CUTOFF"))
        if best:
            return next(r for r in table if r.channel_id == best[2]), ""
        close = process.extract(channel_name, names, scorer=fuzz.WRatio, processor=utils.default_process, limit=3)
        hint = f" The closest names are: {', '.join(c[0] for c in close)}." if close else ""
        return None, f"I found no channel called {channel_name!r} in your watch history.{hint}"

    @tool(name="get_recent_videos")
    def get_recent_videos(self, limit: int = 10, channel_id: str | None = None) -> str:
        """List the most recently watched videos, newest first."""
        limit = _check_count(limit, "limit", self._setting("WATCH_MAX_RESULTS"))
        statement, source = _watch_rows(), ""
        if channel_id:
            channel, why = self._find_channel(channel_id, None)
            if channel is None:
                return why
            statement, source = statement.where(videos.c.channel_id == channel.channel_id), f" from {channel.name}"
        rows = self._rows(statement.order_by(events.c.watched_at.desc(), events.c.id.desc()).limit(limit))
        if not rows:
            return "I couldn't find any videos in your watch history."
        lines = [f"{i}. {r.title} from {r.channel or _UNKNOWN_CHANNEL} ({clock(r.duration_s)}) - watched "
                 f"{self._ago(r.watched_at)} [id: {r.video_id}]" for i, r in enumerate(rows, 1)]
        return f"You've watched {_plural(len(rows), 'video')}{source} recently. Here are some highlights:\n" + \
            "\n".join(lines)

    @tool(name="get_video_details")
    def get_video_details(self, video_id: str) -> str:
        """Describe one watched video: title, channel, length and when and how often it was watched."""
        video_id = _check_video_id(video_id)
        rows = self._rows(_watch_rows().where(events.c.video_id == video_id).order_by(events.c.watched_at))
        if not rows:
            return f"Video {video_id} is not in your watch history."
        first, last = rows[0], rows[-1]
        length = f"It's {clock(last.duration_s)} long" if last.duration_s is not None else "Its length is unknown"
        times = (f"once, {self._ago(last.watched_at)} ({last.watched_at:%Y-%m-%d})" if len(rows) == 1 else
                 f"{len(rows)} times, first on {first.watched_at:%Y-%m-%d} and most recently "
                 f"{self._ago(last.watched_at)} ({last.watched_at:%Y-%m-%d})")
        return (f"You watched '{last.title}' from {last.channel or _UNKNOWN_CHANNEL} "
                f"(https://www.youtube.com/watch?v={video_id}). {length} and you watched it {times}.")

    def _totals(self, where=None) -> Any:
        """Counts, summed and average lengths, and first/last watch over the events matching `where`."""
        statement = (select(func.count().label("watches"), func.count(distinct(events.c.video_id)).label("videos"),
                            func.count(distinct(videos.c.channel_id)).label("channels"),
                            func.sum(videos.c.duration_s).label("seconds"),
                            func.count(videos.c.duration_s).label("timed"),
                            func.min(events.c.watched_at).label("first"), func.max(events.c.watched_at).label("last"))
                     .select_from(events.join(videos, videos.c.video_id == events.c.video_id)))
        return self._rows(statement if where is None else statement.where(where))[0]

    def _average_length(self, where=None) -> int | None:
        statement = select(func.avg(videos.c.duration_s))
        average = self._rows(statement if where is None else statement.where(where))[0][0]
        return None if average is None else int(round(average))

    @tool(name="get_statistics")
    def get_statistics(self) -> str:
        """Summarise the whole watch history: counts, watch time and date range."""
        t = self._totals()
        if not t.watches:
            return "I couldn't find any videos in your watch history."
        today = self._clock()[0]
        text = (f"You've watched {_plural(t.watches, 'video')} ({t.videos:,} different) across "
                f"{_plural(t.channels, 'channel')}. ")
        text += _watch_time(t, lambda known: (
            f"Your total watch time is about {span(t.seconds)}, counting each watch at the video's full "
            f"length{known}. The average video is {clock(self._average_length())} long. "))
        return text + (f"Your first recorded watch was on {t.first:%Y-%m-%d} and the latest on {t.last:%Y-%m-%d} "
                       f"({time_ago(t.last, today)}).")

    @tool(name="get_channel_info")
    def get_channel_info(self, channel_id: str | None = None, channel_name: str | None = None) -> str:
        """Report how much of one channel the user has watched."""
        if not (channel_id or "").strip() and not (channel_name or "").strip():
            raise ToolError("give channel_id (e.g. 'UC...') or channel_name (e.g. 'Veritasium')")
        channel, why = self._find_channel(channel_id, channel_name)
        if channel is None:
            return why
        mine = videos.c.channel_id == channel.channel_id
        t = self._totals(mine)
        last = self._rows(_watch_rows().where(mine).order_by(events.c.watched_at.desc()).limit(1))[0]
        text = (f"You've watched {_plural(t.watches, 'video')} from {channel.name} ({t.videos:,} different; "
                f"channel ID {channel.channel_id}). ")
        text += _watch_time(t, lambda known: (
            f"Your total watch time from this channel is about {span(t.seconds)}{known}, and its videos "
            f"you watched average {clock(self._average_length(mine))}. "))
        return text + (f"The most recent was '{last.title}' ({clock(last.duration_s)}), watched "
                       f"{self._ago(last.watched_at)} [id: {last.video_id}].")

    def _matrix(self) -> tuple[list[str], dict[str, int], np.ndarray]:
        """Every video's title vector, reloaded only when the number of videos changed (an import)."""
        with self._lock:
            count = self._rows(select(func.count()).select_from(videos))[0][0]
            if self._vectors is None or self._vectors[0] != count:
                rows = self._rows(select(videos.c.video_id, videos.c.embedding).order_by(videos.c.video_id))
                matrix = np.frombuffer(b"".join(r.embedding for r in rows), dtype=np.float32)
                self._vectors = (count, [r.video_id for r in rows], matrix.reshape(len(rows), -1 if rows else 0))
            _, ids, matrix = self._vectors
        return ids, {v: i for i, v in enumerate(ids)}, matrix

    def _latest(self, where=()) -> dict[str, Any]:
        """The newest matching watch row of each video, by video id."""
        newest = (select(events.c.video_id, func.max(events.c.watched_at).label("at"))
                  .join(videos, videos.c.video_id == events.c.video_id).where(*where)
                  .group_by(events.c.video_id).subquery())
        rows = self._rows(_watch_rows().join(newest, (newest.c.video_id == events.c.video_id)
                                             & (newest.c.at == events.c.watched_at)))
        return {r.video_id: r for r in rows}

    def _ranked(self, query_vector: np.ndarray, rows: dict[str, Any]) -> list[tuple[float, Any]]:
        ids, index, matrix = self._matrix()
        present = [v for v in rows if v in index]
        scores = matrix[[index[v] for v in present]] @ query_vector if present else np.zeros(0)
        return sorted(((float(s), rows[v]) for s, v in zip(scores, present)), key=lambda p: -p[0])

    def _listing(self, ranked: list[tuple[float, Any]]) -> str:
        return "\n".join(f"{i}. {r.title} from {r.channel or _UNKNOWN_CHANNEL} (watched {self._ago(r.watched_at)}) "
                         f"[relevance: {s:.2f}] [id: {r.video_id}]" for i, (s, r) in enumerate(ranked, 1))

    @tool(name="search_videos_by_topic")
    def search_videos_by_topic(self, query: str, n_results: int = 10, date_from: str | None = None,
                               date_to: str | None = None, channel_id: str | None = None,
                               channel_name: str | None = None) -> str:
        """Find watched videos about a topic, by meaning, optionally within dates or one channel."""
        if not query.strip():
            raise ToolError("query must name a topic, e.g. 'machine learning'")
        n_results = _check_count(n_results, "n_results", self._setting("WATCH_MAX_RESULTS"))
        start, end = _check_date(date_from, "date_from"), _check_date(date_to, "date_to")
        if start and end and start > end:
            raise ToolError(f"date_from ({start}) is after date_to ({end})")
        where = [events.c.watched_at >= datetime.combine(start, datetime.min.time())] if start else []
        where += [events.c.watched_at < datetime.combine(end + timedelta(days=1), datetime.min.time())] if end else []
        if (channel_id or "").strip() or (channel_name or "").strip():
            channel, why = self._find_channel(channel_id, channel_name)
            if channel is None:
                return why
            where.append(videos.c.channel_id == channel.channel_id)
        ranked = self._ranked(self.ctx.embed([query.strip()])[0], self._latest(where))
        if not ranked:
            return ("No videos in your watch history match those dates and channel." if where
                    else "I couldn't find any videos in your watch history.")
        matches = [p for p in ranked if p[0] >= self._setting("WATCH_MIN_RELEVANCE")]
        if not matches:
            best = ranked[0]
            return (f"I found no videos about {query.strip()!r} in your watch history. The closest was "
                    f"'{best[1].title}' from {best[1].channel or _UNKNOWN_CHANNEL} [relevance: {best[0]:.2f}].")
        shown = f" (the best {n_results})" if len(matches) > n_results else ""
        verb = "matches" if len(matches) == 1 else "match"
        return (f"I found {_plural(len(matches), 'video')} that {verb} your search{shown}:\n"
                + self._listing(matches[:n_results]))

    @tool(name="find_similar_videos")
    def find_similar_videos(self, video_id: str, n_results: int = 5) -> str:
        """Find the watched videos closest in content to one watched video."""
        video_id = _check_video_id(video_id)
        n_results = _check_count(n_results, "n_results", self._setting("WATCH_MAX_RESULTS"))
        ids, index, matrix = self._matrix()
        if video_id not in index:
            return f"Video {video_id} is not in your watch history, so I can't compare it with anything."
        rows = self._latest()
        source = rows.pop(video_id)
        ranked = self._ranked(matrix[index[video_id]], rows)[:n_results]
        if not ranked:
            return f"'{source.title}' is the only video in your watch history."
        return (f"I found {_plural(len(ranked), 'video')} similar to '{source.title}' from "
                f"{source.channel or _UNKNOWN_CHANNEL}:\n" + self._listing(ranked))
