"""Watch history pack: Takeout import with skip reasons, the six tools' answers, the sample, and the runner."""
import inspect
import json
from datetime import date

import pytest
import sqlalchemy

from funes.errors import BadRequest, ToolError
from funes.tools.context import ToolContext, bind_handlers
from funes.tools.loaders import load_packs
from funes.tools.runner import ToolRunner
from funes.packs.watch_history import Pack, import_file, load_sample, metadata, write_sample

TODAY = date(2024, 3, 10)
KURZ = ("Kurzgesagt – In a Nutshell", "UCsXVk37bltHxD1rDPwtNM8Q")
TASTY = ("Tasty", "UCJFp8uSYCjXOMnkUyb3CQ3Q")
BLUE = ("3Blue1Brown", "UCYO_jab_esuFRV4b17AJtAw")
MARTY = ("Marty Music", "UCmnlTFGJq_Z4yeWMGQ3Zw0a")


def watched(title, video_id, channel, time, seconds=None, url=None):
    item = {"header": "YouTube", "title": f"Watched {title}", "products": ["YouTube"], "time": time,
            "titleUrl": url or f"https://www.youtube.com/watch?v={video_id}",
            "subtitles": [{"name": channel[0], "url": f"https://www.youtube.com/channel/{channel[1]}"}]}
    return item | ({"durationSeconds": seconds} if seconds is not None else {})


HISTORY = [  # newest first, as Takeout writes it
    watched("Black Holes, the Darkest Objects in the Universe", "BlackHole01", KURZ, "2024-03-09T20:00:00.000Z", 600),
    watched("5 Easy One-Pan Chicken Dinners", "TastyChick1", TASTY, "2024-03-08T18:30:00.000Z", 300),
    {"header": "YouTube", "title": "Watched a video that has been removed", "time": "2024-03-08T10:00:00.000Z",
     "products": ["YouTube"]},                                                                              # item 3
    watched("But what is a neural network?", "NeuralNet01", BLUE, "2024-03-07T21:15:42.123Z", 1140),
    watched("Summer Sale: 50% Off Headphones", "AdHeadphone", TASTY, "2024-03-06T09:00:00.000Z") |
    {"details": [{"name": "From Google Ads"}]},                                                             # item 5
    watched("The Immune System Explained", "Immune00001", KURZ, "2024-03-05T12:00:00.000Z", 480),
    watched("Beginner Guitar Lesson: Your First Chords", "GuitarLes01", MARTY, "2024-03-01T19:00:00Z", 900),
    {"header": "YouTube", "title": "Viewed Big news from the channel", "time": "2024-02-28T08:00:00.000Z",
     "titleUrl": "https://www.youtube.com/post/UgkxAbCdEfGhIjKlMnOp", "products": ["YouTube"]},              # item 8
    watched("Easy Blues Guitar Riffs", "Blues0Riff1", MARTY, "2024-02-25T17:45:00.000Z", 720,
            url="https://youtu.be/Blues0Riff1?t=42"),
    watched("Homemade Ramen From Scratch", "TastyRamen1", TASTY, "2024-02-20T19:00:00.000Z"),  # no length
    watched("Some Video", "BadTime0001", TASTY, "last tuesday", 100),                                       # item 11
    watched("Black Holes, the Darkest Objects in the Universe", "BlackHole01", KURZ, "2024-02-01T10:00:00.000Z", 600),
    watched("Broken Link", "x", TASTY, "2024-01-20T10:00:00.000Z", url="https://www.youtube.com/watch?v=tooShort"),
    watched("The Life Cycle of Stars", "StarLife001", KURZ, "2024-01-15T15:00:00.000Z", 660),
]


@pytest.fixture
def ctx(database_url, tmp_path, text_encoder, settings):
    engine = sqlalchemy.create_engine(database_url)
    metadata.create_all(engine)
    yield ToolContext(engine, text_encoder.embed, tmp_path, settings, today=lambda: TODAY)
    engine.dispose()


@pytest.fixture
def history(tmp_path):
    path = tmp_path / "watch-history.json"
    path.write_text(json.dumps(HISTORY), encoding="utf-8")
    return path


@pytest.fixture
def pack(ctx, history):
    import_file(ctx, history)
    return Pack(ctx)


def listed(text):
    """The numbered lines of an answer."""
    return [line for line in text.splitlines() if line[:1].isdigit()]


def test_import_counts_and_skip_reasons(ctx, history):
    report = import_file(ctx, history)
    assert report.imported == 9
    assert report.skipped == [(3, "a removed video (no titleUrl)"), (5, "an ad (From Google Ads)"),
                              (8, "a community post, not a video"), (11, "malformed time 'last tuesday'"),
                              (13, "malformed video id in titleUrl 'https://www.youtube.com/watch?v=tooShort'")]
    assert "9 imported, 5 skipped" in report.summary()


def test_reimporting_the_same_file_adds_nothing(ctx, history):
    import_file(ctx, history)
    again = import_file(ctx, history)
    assert again.imported == 0
    assert sum(why.startswith("already imported") for _, why in again.skipped) == 9
    assert "9 videos (8 different)" in Pack(ctx).get_statistics()


def test_import_refuses_what_is_not_a_takeout_list(ctx, tmp_path):
    html = tmp_path / "watch-history.html"
    html.write_text("<html><body>Watched ...</body></html>")
    with pytest.raises(BadRequest, match="JSON, not HTML"):
        import_file(ctx, html)
    with pytest.raises(BadRequest, match=f"{tmp_path}: cannot read"):
        import_file(ctx, tmp_path)  # a directory


def test_a_length_that_is_not_a_finite_number_is_unknown(ctx, tmp_path):
    path = tmp_path / "odd.json"  # Python's json reads Infinity and NaN, so a hand-edited file may hold them
    path.write_text('[%s, %s]' % (json.dumps(watched("Forever", "Forever0001", TASTY, "2024-03-01T10:00:00Z"))[:-1]
                                  + ', "durationSeconds": Infinity}',
                                  json.dumps(watched("Never", "NeverNever1", TASTY, "2024-03-02T10:00:00Z"))[:-1]
                                  + ', "durationSeconds": NaN}'))
    assert import_file(ctx, path).imported == 2
    assert "Forever" in Pack(ctx).get_video_details("Forever0001")


def test_recent_videos_newest_first(pack):
    answer = pack.get_recent_videos(limit=5)
    assert answer.startswith("You've watched 5 videos recently. Here are some highlights:\n")
    assert listed(answer) == [
        "1. Black Holes, the Darkest Objects in the Universe from Kurzgesagt – In a Nutshell (10:00) - watched "
        "yesterday [id: BlackHole01]",
        "2. 5 Easy One-Pan Chicken Dinners from Tasty (5:00) - watched 2 days ago [id: TastyChick1]",
        "3. But what is a neural network? from 3Blue1Brown (19:00) - watched 3 days ago [id: NeuralNet01]",
        "4. The Immune System Explained from Kurzgesagt – In a Nutshell (8:00) - watched 5 days ago [id: Immune00001]",
        "5. Beginner Guitar Lesson: Your First Chords from Marty Music (15:00) - watched 1 week ago [id: GuitarLes01]"]


def test_recent_videos_of_one_channel_and_unknown_length(pack):
    answer = pack.get_recent_videos(channel_id=TASTY[1])
    assert [line.split(" from ")[0] for line in listed(answer)] == [
        "1. 5 Easy One-Pan Chicken Dinners", "2. Homemade Ramen From Scratch"]
    assert "(length unknown)" in answer
    assert listed(pack.get_recent_videos(channel_id="tasty")) == listed(answer)  # a name where an ID belongs
    unknown = "UC" + "z" * 22
    assert pack.get_recent_videos(channel_id=unknown) == f"I found no channel with ID {unknown} in your watch history."
    with pytest.raises(ToolError, match="limit must be at least 1"):
        pack.get_recent_videos(limit=0)


def test_video_details(pack):
    assert pack.get_video_details("BlackHole01") == (
        "You watched 'Black Holes, the Darkest Objects in the Universe' from Kurzgesagt – In a Nutshell "
        "(https://www.youtube.com/watch?v=BlackHole01). It's 10:00 long and you watched it 2 times, "
        "first on 2024-02-01 and most recently yesterday (2024-03-09).")
    assert "Its length is unknown and you watched it once" in pack.get_video_details("https://youtu.be/TastyRamen1")
    assert pack.get_video_details("Zz9_Zz9-Zz9") == "Video Zz9_Zz9-Zz9 is not in your watch history."


@pytest.mark.parametrize("bad", ["abc", "BlackHole01x", "Black Hole1", ""])
def test_video_id_validation_message(pack, bad):
    with pytest.raises(ToolError, match="video_id must be an 11-character YouTube video ID"):
        pack.get_video_details(bad)


def test_statistics_exact_totals(pack):
    assert pack.get_statistics() == (
        "You've watched 9 videos (8 different) across 4 channels. Your total watch time is about 1 hour "
        "30 minutes, counting each watch at the video's full length (lengths are known for 8 of the 9). "
        "The average video is 11:26 long. Your first recorded watch was on 2024-01-15 and the latest on "
        "2024-03-09 (yesterday).")


@pytest.mark.parametrize("name", ["kurzgesagd", "Kurzgesagt", "kurzgesagt in a nutshell"])
def test_channel_found_from_a_loose_name(pack, name):
    assert pack.get_channel_info(channel_name=name) == (
        f"You've watched 4 videos from Kurzgesagt – In a Nutshell (3 different; channel ID {KURZ[1]}). Your total "
        "watch time from this channel is about 39 minutes, and its videos you watched average 9:40. The most "
        "recent was 'Black Holes, the Darkest Objects in the Universe' (10:00), watched yesterday [id: BlackHole01].")


def test_channel_by_id_unknown_name_and_no_arguments(pack):
    assert pack.get_channel_info(channel_id=BLUE[1]).startswith("You've watched 1 video from 3Blue1Brown")
    assert "about 5 minutes (lengths are known for 1 of the 2)" in pack.get_channel_info(channel_name="Tasty")
    assert "no channel called 'Mark Rober'" in pack.get_channel_info(channel_name="Mark Rober")
    with pytest.raises(ToolError, match="channel_id .* or channel_name"):
        pack.get_channel_info()


def test_topic_search_ranks_black_holes_first_for_space(pack):
    answer = pack.search_videos_by_topic("space")
    assert answer.startswith("I found ")
    first = listed(answer)[0]
    assert first.startswith("1. Black Holes, the Darkest Objects in the Universe from Kurzgesagt")
    assert "(watched yesterday) [relevance: 0." in first
    assert "Chicken" not in answer and "Guitar" not in answer


def test_topic_search_date_and_channel_filters(pack):
    everything = pack.search_videos_by_topic("astronomy")
    assert "The Life Cycle of Stars" in everything and "Black Holes" in everything
    assert pack.search_videos_by_topic("astronomy", date_from="", date_to=" ") == everything  # blank: no filter
    recent = pack.search_videos_by_topic("astronomy", date_from="2024-02-01")
    assert "The Life Cycle of Stars" not in recent and "Black Holes" in recent
    february = pack.search_videos_by_topic("astronomy", date_from="2024-02-01", date_to="2024-02-29")
    assert "Black Holes" in february and "(watched 1 month ago)" in february  # its February watch, not March's
    guitar = pack.search_videos_by_topic("guitar", channel_name="marty musik")
    assert sorted(line.split(" from ")[0][3:] for line in listed(guitar)) == [
        "Beginner Guitar Lesson: Your First Chords", "Easy Blues Guitar Riffs"]
    assert "no videos about 'gardening'" in pack.search_videos_by_topic("gardening")


@pytest.mark.parametrize("arguments, message", [
    ({"date_from": "March 1st"}, "date_from must be a date written YYYY-MM-DD"),
    ({"date_from": "2024-03-05", "date_to": "2024-03-01"}, "is after date_to"),
    ({"n_results": 0}, "n_results must be at least 1"),
    ({"query": "  "}, "query must name a topic")])
def test_topic_search_rejects_bad_arguments(pack, arguments, message):
    with pytest.raises(ToolError, match=message):
        pack.search_videos_by_topic(**{"query": "space", **arguments})


def test_similar_videos_exclude_the_source(pack):
    answer = pack.find_similar_videos("BlackHole01", n_results=3)
    assert answer.startswith("I found 3 videos similar to 'Black Holes, the Darkest Objects in the Universe'")
    lines = listed(answer)
    assert len(lines) == 3 and lines[0].startswith("1. The Life Cycle of Stars")
    assert not any("BlackHole01" in line for line in lines)
    assert "not in your watch history" in pack.find_similar_videos("Zz9_Zz9-Zz9")


def test_empty_history_says_so(ctx):
    empty = Pack(ctx)
    for answer in (empty.get_recent_videos(), empty.get_statistics(), empty.search_videos_by_topic("space")):
        assert answer == "I couldn't find any videos in your watch history."


def test_sample_is_deterministic_and_loaded_once(ctx, tmp_path):
    first, second = write_sample(tmp_path / "a", TODAY), write_sample(tmp_path / "b", TODAY)
    assert first[0].read_bytes() == second[0].read_bytes()
    reports = load_sample(ctx)
    assert [(r.imported, [why for _, why in r.skipped]) for r in reports] == [
        (120, ["a removed video (no titleUrl)", "an ad (From Google Ads)", "a removed video (no titleUrl)"])]
    assert load_sample(ctx) == []
    stats = Pack(ctx).get_statistics()
    assert "120 videos (80 different) across 15 channels" in stats and "the latest on 2024-03-10 (today)" in stats


def test_handlers_match_their_cards(ctx):
    registry = load_packs(["watch_history"])
    bind_handlers(registry, ["watch_history"], ctx)
    for card in registry:
        params = inspect.signature(card.handler).parameters
        assert list(params) == list(card.parameters["properties"]), card.name
        required = [n for n, p in params.items() if p.default is inspect.Parameter.empty]
        assert required == card.parameters.get("required", []), card.name
        for name, prop in card.parameters["properties"].items():
            assert params[name].default == prop.get("default", params[name].default), (card.name, name)


RUNS = [("get_recent_videos", {"limit": 3}, {"limit": "three"}),
        ("get_video_details", {"video_id": "BlackHole01"}, {}),
        ("get_statistics", {}, ["not", "an", "object"]),
        ("get_channel_info", {"channel_name": "tasty"}, {"channel_id": 42}),
        ("search_videos_by_topic", {"query": "cooking", "n_results": 2}, {"n_results": 2}),
        ("find_similar_videos", {"video_id": "BlackHole01", "n_results": 2}, {"video_id": "BlackHole01",
                                                                               "n_results": "two"})]


@pytest.mark.parametrize("name, good, bad", RUNS)
def test_tools_run_through_the_runner(ctx, history, name, good, bad):
    import_file(ctx, history)
    registry = load_packs(["watch_history"])
    bind_handlers(registry, ["watch_history"], ctx)
    runner = ToolRunner(timeout_s=60)
    ok = runner.run(registry[name], good)
    assert ok.error is None and isinstance(ok.result, str) and "I couldn't find" not in ok.result
    failed = runner.run(registry[name], bad)
    assert failed.result is None
    assert failed.error.startswith((f"invalid arguments for {name}", "arguments must be a JSON object"))


def test_runner_returns_handler_errors_as_messages(ctx, history):
    import_file(ctx, history)
    registry = load_packs(["watch_history"])
    bind_handlers(registry, ["watch_history"], ctx)
    result = ToolRunner(timeout_s=60).run(registry["get_video_details"], {"video_id": "nope"})
    assert result.error.startswith("video_id must be an 11-character YouTube video ID")
