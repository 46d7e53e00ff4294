"""The decision inspector in a real headless browser (Debian's chromium driven by Playwright)."""
import os
import threading

import pytest
from werkzeug.serving import make_server

from funes import create_app
from tests.ollama_wire import FakeOllama, reply

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")


@pytest.fixture
def served(factory, data_dir, tmp_path):
    ollama = FakeOllama()
    app = create_app({"DATA_DIR": data_dir, "DATABASE_URL": f"sqlite:///{tmp_path}/funes.db",
                      "LLM_BACKEND": "ollama", "OLLAMA_HOST": ollama.url}, encoder=factory.encoder)
    client = app.test_client()
    app.extensions["funes"].router.registry.bind("get_weather", lambda location: {"sky": "sunny", "temp_c": 19})
    ollama.script = [reply(tool_calls=[("get_weather", {"location": "Porto"})]), reply("Mild and sunny in Porto.")]
    client.post("/chat", json={"message": "What's the weather in Porto today?"})
    ollama.script = [reply("Hello!")]
    client.post("/chat", json={"message": "Good morning to you"})
    client.post("/route", json={"messages": [{"role": "user", "content": "what time is it in Lagos?"}]})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    ollama.close()


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield browser.new_page()
        browser.close()


def test_list_filter_and_detail(served, page, tmp_path):
    page.goto(f"{served}/inspector/")
    assert page.locator("tr.decision").count() == 3
    page.select_option("select[name=path]", "memory")
    page.click("button[type=submit]")
    rows = page.locator("tr.decision")
    assert rows.count() == 1 and "Good morning" in rows.first.inner_text()

    page.goto(f"{served}/inspector/?tool=get_weather")
    page.locator("tr.decision a").first.click()
    assert page.locator("#message").inner_text() == "What's the weather in Porto today?"
    assert "get_weather" in page.locator("#selected").inner_text()
    chosen = page.locator("tr.candidate.selected")
    assert chosen.count() == 1 and chosen.get_attribute("data-tool") == "get_weather"
    assert float(chosen.locator(".score").inner_text()) >= float(chosen.locator(".threshold").inner_text())
    assert chosen.locator(".bar .thr").count() == 1 and chosen.locator(".bar .fill.over").count() == 1
    assert page.locator("tr.candidate").count() >= 5
    assert "get_weather" in page.locator("#tool-calls").inner_text()
    assert page.locator("#reply").inner_text() == "Mild and sunny in Porto."
    page.screenshot(path=os.environ.get("INSPECTOR_SCREENSHOT", str(tmp_path / "decision.png")), full_page=True)


def test_bad_filter_and_unknown_decision(served, page):
    page.goto(f"{served}/inspector/?limit=0")
    assert "'limit' must be" in page.content()
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
