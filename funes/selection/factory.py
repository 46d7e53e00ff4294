"""Build routers from config: one encoder per process, the no-tool anchors embedded once."""
from __future__ import annotations

from typing import Any

from funes.selection.encoder import Encoder
from funes.selection.router import Anchors, Router
from funes.tools.loaders import load_no_tool_examples
from funes.tools.registry import Registry


def encoder_from_config(cfg: dict[str, Any]) -> Encoder:
    """The encoder that config describes."""
    return Encoder(cfg["EMBED_MODEL"], cfg["EMBED_BACKEND"], cfg["EMBED_THREADS"], cfg["DATA_DIR"],
                   cfg["EMBED_QUERY_CACHE"], cfg["VECTOR_CACHE"], cfg["EMBED_QUANTIZE"])


class RouterFactory:
    """Routers for any registry, sharing one encoder and the no-tool anchor vectors."""

    def __init__(self, cfg: dict[str, Any], encoder: Encoder | None = None):
        self.cfg = cfg
        self.encoder = encoder or encoder_from_config(cfg)
        texts = load_no_tool_examples()
        self.anchors = Anchors(texts, self.encoder.encode_cards(texts))

    def router(self, registry: Registry, overrides: dict[str, Any] | None = None) -> Router:
        """A router over `registry`, with optional setting overrides (calibration sweeps)."""
        return Router(registry, self.encoder, {**self.cfg, **(overrides or {})}, self.anchors)
