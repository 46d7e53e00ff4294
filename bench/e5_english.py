"""bench/rows.py with the tuned e5 reading English messages too, over bare cards (up to 300), as it reads non-English
ones: its cosines reorder the cards at weight W beside the encoder's, and its gate's P(needs a tool) is averaged in
at share MIX. Not served: it measures whether a second reading of every message would pay (docs/results.md).

    .venv/bin/python bench/e5_english.py W MIX --eval $S [--json]      (W 0, MIX 0: the shipped router)
"""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from funes.selection import multilingual, scorers  # noqa: E402

_started, _read, _need = scorers.Scorers._e5_started, scorers.Scorers._e5_read, scorers.Scorers._need


def main() -> None:
    weight, mix = float(sys.argv.pop(1)), float(sys.argv.pop(1))

    def started(self, message):
        if self._e5 is None:
            return None
        future = scorers._E5_POOL.submit(self._e5_encode, [message[:scorers.E5_MAX_CHARS]])
        future.english = not scorers.looks_non_english(message)
        return future

    def read(self, e5, emb, lexical, settings):
        if not getattr(e5, "english", False):
            return _read(self, e5, emb, lexical, settings)
        view, vector = self._e5.result(), e5.result()
        emb5, neg5 = view._vector_signals(vector)
        if mix > 0:
            self._need5 = view._need(vector[0], emb5[0], lexical, neg5[0], float(view._none(vector)[0]), settings)
        if weight > 0:
            shipped, multilingual.FOREIGN_WEIGHT = multilingual.FOREIGN_WEIGHT, weight
            emb[0] = scorers.reordered(emb[0], emb5[0])
            multilingual.FOREIGN_WEIGHT = shipped
        return None, None  # the encoder's gate decides, e5's averaged in below

    def need(self, *args):
        p, p5 = _need(self, *args), self.__dict__.pop("_need5", None)
        return p if p is None or p5 is None else (1 - mix) * p + mix * p5

    scorers.Scorers._e5_started, scorers.Scorers._e5_read, scorers.Scorers._need = started, read, need
    sys.argv[0] = str(ROOT / "bench" / "rows.py")
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
