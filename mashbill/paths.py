"""Where Mashbill keeps what it builds once and reuses: one variable, MASHBILL_CACHE (default ~/.cache/mashbill).

Everything cached lives under it: wheels, the llama.cpp source distribution and its vocab-only GGUF tokenizers
(scripts/setup.sh, in bash, reads the same variable), checked tokenizer builds, dequantized models, ONNX
encoders, the review server's virtual environment. Sits below every layer, like mashbill.errors.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "MASHBILL_CACHE"


def cache_dir(*parts: str) -> Path:
    """MASHBILL_CACHE (or ~/.cache/mashbill), joined with `parts`."""
    root = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "mashbill"
    return Path(root).expanduser().joinpath(*parts)


def vocab_dir() -> Path:
    """The vocab-only GGUF tokenizers scripts/setup.sh extracts from llama.cpp's source distribution."""
    return cache_dir("vocab")
