"""The one way Mashbill reads a GGUF file: `gguf.GGUFReader` (the gguf package of llama.cpp), opened here with one
set of error messages, for the tokenizer rebuild (validators) and for export metadata (exporters)."""

from __future__ import annotations

from pathlib import Path

from mashbill.errors import MashbillError


def gguf_module(error: type[MashbillError], what: str):
    try:
        import gguf
    except ImportError:
        raise error(f"{what} needs the gguf package: pip install 'mashbill[validate]'") from None
    return gguf


def open_reader(path: str | Path, error: type[MashbillError], what: str = "reading GGUF metadata"):
    """A GGUFReader on `path` (memory-mapped, read-only); a file that is not GGUF or is cut short raises `error`."""
    gguf = gguf_module(error, what)
    try:
        return gguf.GGUFReader(str(path), "r")
    except Exception as exc:  # a truncated or foreign file fails deep inside numpy.memmap, with many types
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "magic" in first.lower():
            raise error(f"{path}: not a GGUF file (no GGUF magic bytes)") from None
        raise error(f"{path}: truncated or corrupt GGUF file ({type(exc).__name__}: {first})") from None


def read_kv(path: str | Path, error: type[MashbillError], *, arrays: bool = True,
            what: str = "reading GGUF metadata") -> dict:
    """The key/value metadata (GGUF.* header fields left out; arrays, such as the token list, only when `arrays`)."""
    gguf = gguf_module(error, what)
    reader = open_reader(path, error, what)
    out = {}
    for name, fld in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        if not arrays and fld.types and fld.types[0] == gguf.GGUFValueType.ARRAY:
            continue
        try:
            out[name] = fld.contents()
        except (ValueError, IndexError, UnicodeDecodeError):
            raise error(f"{path}: metadata key {name} cannot be read") from None
    return out
