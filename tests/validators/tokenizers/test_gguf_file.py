"""One GGUF reader: the tokenizer rebuild and the exporters read the same metadata and fail the same way."""

from __future__ import annotations

import pytest

from mashbill.exporters.gguf.gguf_meta import read_kv
from mashbill.exporters.runs import ExportError
from mashbill.validators.errors import TokenizerLoadError
from mashbill.validators.tokenizers.gguf_tokenizer import read_metadata
from vhelpers import vocab


def test_exporters_and_the_tokenizer_read_the_same_metadata_and_fail_the_same_way(tmp_path):
    path = vocab("bert-bge")  # the smallest vocab file: its token list is still an array to leave out
    full = read_metadata(path)
    scalars = read_kv(path)
    assert "tokenizer.ggml.tokens" in full and "tokenizer.ggml.tokens" not in scalars  # arrays only on request
    assert scalars == {k: v for k, v in full.items() if not isinstance(v, list)}
    assert read_kv(path, arrays=True) == full
    bad = {"cut.gguf": (b"GGUF\x03\x00\x00\x00" + b"\x00" * 4, "truncated or corrupt GGUF file"),
           "text.gguf": (b"this is not a GGUF file\n" * 2, "not a GGUF file")}
    for name, (data, message) in bad.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(TokenizerLoadError, match=f"{name}: {message}"):
            read_metadata(tmp_path / name)
        with pytest.raises(ExportError, match=f"{name}: {message}"):
            read_kv(tmp_path / name)
