"""A message or two embedded straight through the ONNX session: sentence-transformers' encode() spends more
time around the model (tensors, batching, modules) than the model takes, on every routed message.

Only for the shape all Funes encoders have (a transformer, mean pooling, normalisation); the vectors are
sentence-transformers' own (tests/test_index.py compares them), so cached card vectors stay valid.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np


class DirectOnnx:
    """Tokenizer -> ONNX session -> mean pooling -> unit length, one text per run.

    One at a time, because the int8 model quantizes its activations per tensor: in a batch, the longest text and
    the padding set every text's scale, and a card's vector moved with its batch (cosine down to 0.985), so a
    registry routed differently by what its cache happened to hold. Alone, a text has one vector, and it is no
    slower: a batch pads every text to its longest."""

    def __init__(self, session, tokenizer, max_tokens: int, dim: int):
        from tokenizers import Tokenizer

        self._session, self.dim = session, dim
        self._inputs = {i.name for i in session.get_inputs()}
        self._tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a copy: the model's own keeps its settings
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.no_padding()  # the model's own pads every text to its maximum length

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
        if meanwhile is not None:  # it may start a thread: the session releases the GIL, the tokenizer may not
            meanwhile()
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, e in enumerate(encoded):
            feeds = {"input_ids": e.ids, "attention_mask": e.attention_mask, "token_type_ids": e.type_ids}
            feeds = {k: np.asarray([v], dtype=np.int64) for k, v in feeds.items() if k in self._inputs}
            pooled = self._session.run(None, feeds)[0][0].mean(axis=0)  # no padding: every token counts
            out[row] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return out
