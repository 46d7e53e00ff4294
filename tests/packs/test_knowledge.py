"""The knowledge pack: app documentation ranked with the real encoder, web search through an injected
DDGS-like client (never the network), and respond, run through the tool runner as the service runs them."""
import inspect

import pytest
from ddgs.exceptions import DDGSException
from sqlalchemy import create_engine

from funes.tools.context import ToolContext, bind_handlers
from funes.packs.knowledge.handlers import BUNDLED_DOCS, split_sections
from funes.tools.loaders import load_packs
from funes.tools.runner import ToolRunner

HITS = [{"title": "Fed holds rates", "href": "https://example.com/fed", "body": "The Fed kept rates at 4.5%."},
        {"title": "Rates explained", "href": "https://example.com/rates", "body": "What the rate means for you."}]


class FakeSearch:
    """Answers like `ddgs.DDGS` (title/href/body dicts), or raises `error`; records each call."""

    def __init__(self, hits=(), error=None):
        self.hits, self.error, self.calls = list(hits), error, []

    def text(self, query, **kwargs):
        self.calls.append((query, kwargs))
        if self.error is not None:
            raise self.error
        return self.hits[: kwargs.get("max_results", 10)]


@pytest.fixture
def knowledge(settings, text_encoder, tmp_path):
    """A bound knowledge pack over the real encoder, and a run(name, args) helper through the runner."""
    def build(**overrides):
        ctx = ToolContext(create_engine(f"sqlite:///{tmp_path / 'funes.db'}"), text_encoder.embed, tmp_path,
                          dict(settings, **overrides))
        registry = load_packs(["knowledge"])
        pack = bind_handlers(registry, ["knowledge"], ctx)["knowledge"]
        runner = ToolRunner(timeout_s=10, retries=3, backoff_s=0.001)
        return pack, lambda name, args: runner.run(registry.get(name), args)
    return build


@pytest.mark.parametrize("description, first", [
    ("how do the budget jars work", "Budget jars"),
    ("can I create my own jar for holiday savings", "Budget jars"),
    ("renewal alerts for Netflix and the gym", "Subscription tracking"),
    ("search my transactions in Vietnamese", "Transaction search"),
    ("how does the app know a coffee shop purchase is dining", "Automatic categorisation"),
    ("how are the suggested budget limits worked out", "Budget suggestions"),
])
def test_sections_most_relevant_to_the_question_come_first(knowledge, description, first):
    _, run = knowledge()
    call = run("get_application_information", {"description": description})
    sections = call.result["sections"]
    assert sections[0]["title"] == first
    assert len(sections) == 6 and call.result["source"] == str(BUNDLED_DOCS)
    assert [s["score"] for s in sections] == sorted((s["score"] for s in sections), reverse=True)


def test_no_description_gives_every_section_in_document_order(knowledge):
    _, run = knowledge()
    titles = [s["title"] for s in run("get_application_information", {}).result["sections"]]
    assert titles == ["VPBank Personal Finance Assistant", "Budget jars", "Budget suggestions",
                      "Automatic categorisation", "Transaction search", "Subscription tracking"]


def test_own_documentation_from_app_docs_path(knowledge, tmp_path):
    docs = tmp_path / "my_app.md"
    docs.write_text("# Acme Wallet\nA wallet.\n\n## Savings goals\nPut money aside for a goal.\n\n"
                    "## Card freeze\nFreeze a lost card from the app.\n```\n# not a heading\n```\n")
    _, run = knowledge(APP_DOCS_PATH=str(docs))
    result = run("get_application_information", {"description": "I lost my card, can I block it?"}).result
    assert result["source"] == str(docs)
    assert result["sections"][0]["title"] == "Card freeze"
    assert "# not a heading" in result["sections"][0]["text"]


def test_missing_documentation_names_the_file(knowledge, tmp_path):
    missing = tmp_path / "nowhere.md"
    _, run = knowledge(APP_DOCS_PATH=str(missing))
    error = run("get_application_information", {"description": "jars"}).error
    assert f"app documentation not found: {missing}" in error


def test_search_online_returns_titles_urls_and_snippets(knowledge):
    pack, run = knowledge(SEARCH_MAX_RESULTS=1)
    pack.search_client = FakeSearch(HITS)
    call = run("search_online", {"query": "current Fed interest rate"})
    assert call.result == [{"title": "Fed holds rates", "url": "https://example.com/fed",
                            "snippet": "The Fed kept rates at 4.5%."}]
    assert pack.search_client.calls == [("current Fed interest rate", {"max_results": 1})]
    run("search_online", {"query": "current Fed interest rate"})
    assert len(pack.search_client.calls) == 1  # the second call came from the cache


@pytest.mark.parametrize("error", [DDGSException("DNSError: error sending request"), ConnectionError("refused")])
def test_unreachable_search_is_retried_then_reported(knowledge, error):
    pack, run = knowledge()
    pack.search_client = FakeSearch(error=error)
    call = run("search_online", {"query": "bitcoin price", "description": "price check"})
    assert "failed after 3 attempts" in call.error and "web search is unreachable (offline?)" in call.error
    assert len(pack.search_client.calls) == 3


def test_search_with_no_results_is_an_empty_list(knowledge):
    pack, run = knowledge()
    pack.search_client = FakeSearch(error=DDGSException("No results found."))
    assert run("search_online", {"query": "zxqv qwv"}).result == []


def test_respond_returns_the_answer(knowledge):
    _, run = knowledge()
    call = run("respond", {"answer": "Jars are virtual budgets.", "description": "jars"})
    assert call.result == "Jars are virtual budgets."
    assert "needs the answer" in run("respond", {"answer": "  "}).error


def test_split_sections_cuts_at_top_two_heading_levels():
    sections = split_sections("intro\n# Title\nabout\n## Part\ntext\n### Detail\nmore\n## Empty\n")
    assert [s["title"] for s in sections] == ["Documentation", "Title", "Part"]
    assert sections[2]["text"] == "text\n### Detail\nmore"


def test_handlers_take_exactly_the_card_parameters():
    registry = load_packs(["knowledge"])
    bind_handlers(registry, ["knowledge"], ToolContext(None, None, None, {"SEARCH_CACHE_TTL": 1}))
    for card in registry:
        params = inspect.signature(card.handler).parameters.values()
        assert [p.name for p in params] == list(card.parameters["properties"])
        assert [p.name for p in params if p.default is p.empty] == card.parameters.get("required", [])
