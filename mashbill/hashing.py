"""sha256 the one way: of bytes, text, a file (read in chunks) or a JSON value in canonical form (sorted keys,
no spaces, UTF-8 kept). Below every layer, so specs, the factory, curation, trainers and exporters hash alike."""

from __future__ import annotations

import hashlib
import json
from typing import Any


# json.dumps with these settings, without building an encoder a call (0.7 us of 2.3 for a label, bench/RESULTS.md)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """The one JSON text of a value: keys sorted, no spaces, non-ASCII kept (what spec and record hashes cover)."""
    return _CANONICAL.encode(value)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """sha256 of a string's UTF-8 bytes."""
    return hashlib.sha256(text.encode()).hexdigest()


def sha256_json(value: Any) -> str:
    """sha256 of a JSON value's canonical text: equal values hash alike whatever their key order."""
    return sha256_text(canonical_json(value))


def sha256_file(path) -> str:
    """sha256 of a file, read in 1 MiB chunks (models and snapshots do not fit in memory twice)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
