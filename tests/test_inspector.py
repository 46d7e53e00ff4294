"""The decision inspector in a real headless browser (Debian's chromium driven by Playwright)."""
import os
import re
import threading
from types import SimpleNamespace

import pytest
from werkzeug.serving import make_server

import config
from funes import create_app
from funes.selection.router import ROUTING_SETTINGS
from tests.ollama_wire import FakeOllama, reply

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")
# Where the screenshots go, to be looked at: the decision page and the chat page at 1280×800.
SHOTS = os.environ.get("INSPECTOR_SCREENSHOTS", "/tmp")
WIDTH, HEIGHT = 1280, 800


@pytest.fixture
def server(factory, data_dir, tmp_path):
    """A real app server in a thread, with three decisions logged: a tool turn, a memory turn, a /route."""
    ollama = FakeOllama()
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": ollama.url}, encoder=factory.encoder)
    client = app.test_client()
    app.extensions["funes"].router.registry.bind("get_weather", lambda location: {"sky": "sunny", "temp_c": 19,
                                                                                  "tip": "Joe's <b>café</b>"})
    ollama.script = [reply(tool_calls=[("get_weather", {"location": "Porto"})]), reply("Mild and sunny in Porto.")]
    client.post("/chat", json={"message": "What's the weather in Porto today?", "user_id": "ana"})
    ollama.script = [reply("Hello!")]
    client.post("/chat", json={"message": "Good morning to you"})
    client.post("/route", json={"messages": [{"role": "user", "content": "what time is it in Lagos?"}]})
    http = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield SimpleNamespace(url=f"http://127.0.0.1:{http.server_port}", app=app, ollama=ollama)
    http.shutdown()
    ollama.close()


@pytest.fixture
def served(server):
    return server.url


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        browser.close()


def fits_the_width(page) -> bool:
    """Nothing is cut at the window's right edge: the page itself never scrolls sideways."""
    return page.evaluate("document.documentElement.scrollWidth") <= WIDTH


def open_weather_decision(served, page):
    page.goto(f"{served}/inspector/?tool=get_weather")
    page.locator("tr.decision a").first.click()
    page.wait_for_load_state()  # the click waits for the navigation to commit, not for label.js to have run


def test_list_filter_and_detail(served, page):
    page.goto(f"{served}/inspector/")
    assert page.locator("tr.decision").count() == 3
    page.select_option("select[name=path]", "memory")
    page.click("button[type=submit]")
    rows = page.locator("tr.decision")
    assert rows.count() == 1 and "Good morning" in rows.first.inner_text()
    rows.first.locator("a").click()
    assert page.locator("#reason").inner_text().startswith("no tool")
    assert page.locator("#rule-gloss").inner_text() != ""

    open_weather_decision(served, page)
    assert page.locator("#message").inner_text() == "What's the weather in Porto today?"
    assert "get_weather" in page.locator("#selected").inner_text()
    chosen = page.locator("tr.candidate.selected")
    assert chosen.count() == 1 and chosen.get_attribute("data-tool") == "get_weather"
    assert float(chosen.locator(".score").inner_text()) >= float(chosen.locator(".threshold").inner_text())
    assert chosen.locator(".bar .thr").count() == 1 and chosen.locator(".bar .fill.over").count() == 1
    assert page.locator("tr.candidate").count() >= 5
    assert "get_weather" in page.locator("#tool-calls").inner_text()
    assert '"tip": "Joe\'s <b>café</b>"' in page.locator("#tool-calls").inner_text()  # as written: no \u0027
    assert page.locator("#reply").inner_text() == "Mild and sunny in Porto."


def test_a_decision_says_why_with_the_rule_cards_registry_and_settings(served, page):
    open_weather_decision(served, page)
    assert re.fullmatch(r"get_weather: P 0\.\d\d ≥ 0\.\d\d", page.locator("#reason").inner_text())
    assert page.locator("#decided-by").inner_text() == "classifier"
    assert "probability" in page.locator("#rule-gloss").inner_text()
    registry = page.locator("#registry").inner_text()
    assert "written cards" in registry and "the configured registry" in registry
    card = page.locator("tr.candidate.selected .card").inner_text()
    assert "written" in card and "pack:" in card
    assert page.locator("#user").inner_text().startswith("ana ·")
    settings = page.locator("tr.setting")
    assert settings.count() == len(ROUTING_SETTINGS)
    veto = page.locator("tr.setting[data-name=NONE_VETO]")
    help_text = next(s.help for s in config.SETTINGS if s.name == "NONE_VETO")
    assert help_text in veto.inner_text() and veto.locator(".value").inner_text() != ""
    assert fits_the_width(page)
    box = "document.querySelector('#candidates').parentElement"
    assert page.evaluate(f"{box}.scrollWidth <= {box}.clientWidth")  # the whole table in sight at 1280 px
    page.screenshot(path=f"{SHOTS}/inspector-decision.png")
    page.screenshot(path=f"{SHOTS}/inspector-decision-full.png", full_page=True)


def test_the_label_form_lists_every_tool_and_the_filter_narrows_it(server, page):
    open_weather_decision(server.url, page)
    options = page.locator(".tool-option")
    every = len(list(server.app.extensions["funes"].registry))
    assert options.count() == every > page.locator("tr.candidate").count()
    assert "takes effect within a few seconds" in page.locator("#label").inner_text()
    page.fill("#tool-filter", "time")
    shown = [o.inner_text().strip() for o in options.all() if o.is_visible()]
    assert "get_weather" in shown  # ticked: stays in sight
    assert 1 < len(shown) < every and all("time" in name for name in shown if name != "get_weather")
    assert f"of {every} tools shown" in page.locator("#tool-count").inner_text()
    page.press("#tool-filter", "Enter")  # narrows, never submits
    assert page.locator("#label-tools").count() == 0

    timezone_tool = next(name for name in shown if name != "get_weather")
    page.locator(f".tool-option input[value={timezone_tool}]").check()
    page.locator(".tool-option input[value=get_weather]").uncheck()
    page.click("#label button[type=submit]")
    assert page.locator("#label-tools").inner_text() == timezone_tool


def test_bad_filter_and_unknown_decision(served, page):
    response = page.goto(f"{served}/inspector/?limit=0&since=garbage")
    assert response.status == 400 and page.locator("#filters").count() == 1  # the page again, not a JSON body
    assert "must be" in page.locator("p.err").inner_text()
    assert page.locator("input[name=since]").input_value() == "garbage"
    response = page.goto(f"{served}/inspector/987654")
    assert response.status == 404


def test_the_chat_box_streams_a_turn_and_links_its_decision(served, page):
    page.goto(f"{served}/inspector/chat")
    page.fill("#message-input", "Good morning to you")
    page.click("#send")
    page.wait_for_selector("a.decision-link", timeout=30_000)
    assert page.locator(".reply").last.inner_text() == "Hello!"
    assert "no tool" in page.locator(".turn p.none").last.inner_text()
    page.locator("a.decision-link").last.click()
    assert page.locator("#message").inner_text() == "Good morning to you"


def test_the_chat_box_shows_each_tool_calls_result(server, page):
    server.ollama.script = [reply(tool_calls=[("get_weather", {"location": "Lisbon"})]),
                            reply("Sunny and 19 °C in Lisbon.")]
    page.goto(f"{server.url}/inspector/chat")
    page.fill("#message-input", "What's the weather in Lisbon today?")
    page.click("#send")
    page.wait_for_selector("a.decision-link", timeout=30_000)
    call = page.locator(".calls li.call").last
    assert 'get_weather({"location":"Lisbon"})' in call.inner_text()
    assert call.locator(".result").inner_text() == '{"sky":"sunny","temp_c":19,"tip":"Joe\'s <b>café</b>"}'
    assert page.locator(".reply").last.inner_text() == "Sunny and 19 °C in Lisbon."
    assert fits_the_width(page)
    page.screenshot(path=f"{SHOTS}/inspector-chat.png")


def test_a_decision_over_a_callers_own_cards_lists_those_cards(server, page):
    import json
    import urllib.request

    cards = [{"name": "set_light", "description": "Turn a light in a room on or off, or dim it"},
             {"name": "play_music", "description": "Play a song, an album or a playlist on the speakers"},
             {"name": "set_thermostat", "description": "Set the heating to a temperature in degrees"}]
    body = json.dumps({"messages": [{"role": "user", "content": "turn off the kitchen lights"}], "tools": cards})
    request = urllib.request.Request(f"{server.url}/route", body.encode(), {"Content-Type": "application/json"})
    decision = json.load(urllib.request.urlopen(request))
    page.goto(f"{server.url}/inspector/{decision['decision_id']}")
    assert page.locator("#decided-by").inner_text() == decision["decided_by"]
    assert decision["selected"] == ["set_light"] and decision["decided_by"] == "gate"
    assert page.locator("#reason").inner_text().startswith("set_light: P(needs a tool)")
    assert "bare cards" in page.locator("#registry").inner_text()
    assert "this process has routed" in page.locator("#registry").inner_text()
    names = sorted(o.inner_text().strip() for o in page.locator(".tool-option").all())
    assert names == ["play_music", "set_light", "set_thermostat"]
    assert page.locator("tr.candidate .card").count() == 0  # not the configured registry's tools
    assert fits_the_width(page)
    page.screenshot(path=f"{SHOTS}/inspector-own-cards.png", full_page=True)
