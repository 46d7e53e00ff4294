"""A message or two embedded straight through the ONNX session: sentence-transformers' encode() spends more
time around the model (tensors, batching, modules) than the model takes, on every routed message.

Only for the shape all Funes encoders have (a transformer, mean pooling, normalisation); the vectors are
sentence-transformers' own (tests/test_index.py compares them), so cached card vectors stay valid.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np


class DirectOnnx:
    """Tokenizer -> ONNX session -> mean over the attention mask -> unit length, for a few texts at a time."""

    def __init__(self, session, tokenizer, max_tokens: int, dim: int):
        from tokenizers import Tokenizer

        self._session, self.dim = session, dim
        self._inputs = {i.name for i in session.get_inputs()}
        self._tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a copy: the model's own keeps its settings
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.enable_padding()

    @classmethod
    def of(cls, model) -> DirectOnnx | None:
        """The direct path for a loaded SentenceTransformer on the ONNX backend, or None for another shape."""
        modules = [type(m).__name__ for m in model]
        if modules != ["Transformer", "Pooling", "Normalize"]:
            return None
        if model[1].get_config_dict().get("pooling_mode") != "mean":
            return None
        session = getattr(model[0].auto_model, "session", None)
        tokenizer = getattr(model[0].tokenizer, "_tokenizer", None)  # the fast tokenizer's Rust core
        if session is None or tokenizer is None:
            return None
        return cls(session, tokenizer, model.max_seq_length, model.get_embedding_dimension())

    def embed(self, texts: list[str], meanwhile: Callable[[], None] | None = None) -> np.ndarray:
        """Unit vectors of `texts`; `meanwhile` is called once the inputs are ready, just before the session runs."""
        encoded = self._tokenizer.encode_batch(texts)
        feeds = {"input_ids": np.asarray([e.ids for e in encoded], dtype=np.int64),
                 "attention_mask": np.asarray([e.attention_mask for e in encoded], dtype=np.int64),
                 "token_type_ids": np.asarray([e.type_ids for e in encoded], dtype=np.int64)}
        if meanwhile is not None:  # it may start a thread: the session releases the GIL, the tokenizer may not
            meanwhile()
        hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        mask = feeds["attention_mask"][:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        return (pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)).astype(np.float32)
