"""Tokenizers load offline from GGUF files (transformers' GGUF builders, no torch, no hub) and match llama.cpp."""

from __future__ import annotations

import json
import os

import pytest

from mashbill.validators.errors import TokenizerLoadError
from mashbill.validators.tokenizer import (CHATML_GENERATION, has_generation_markers, load_tokenizer,
                                           read_gguf_metadata, resolve_chat_template)
from vhelpers import vocab


def _vectors(path):
    ins = path.with_name(path.name + ".inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    outs = path.with_name(path.name + ".out").read_text(encoding="utf-8").strip().split("\n")
    return list(zip(ins, outs))


@pytest.mark.parametrize("name,allowed_misses", [("qwen2", set()), ("gpt-2", set()),
                                                 # the GGUF-rebuilt Llama-3 splits one Vietnamese word differently
                                                 ("llama-bpe", {"Cửa Việt"})])
def test_gguf_tokenizers_match_llama_cpp_test_vectors(name, allowed_misses):
    path = vocab(name)
    tok = load_tokenizer(str(path)).tok
    misses = {text for text, ids in _vectors(path)
              if tok.encode(text, add_special_tokens=False) != [int(x) for x in ids.split()]}
    assert misses <= allowed_misses


def test_embedded_smollm2_and_its_template(smollm2):
    assert smollm2.tok.vocab_size == 49152
    tmpl = resolve_chat_template(smollm2, None)
    assert "<|im_start|>" in tmpl and not has_generation_markers(tmpl)
    assert has_generation_markers(resolve_chat_template(smollm2, "chatml"))
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}]
    own = smollm2.tok.apply_chat_template(msgs, tokenize=False)
    ours = smollm2.tok.apply_chat_template(msgs, chat_template=CHATML_GENERATION, tokenize=False)
    assert own == ours  # the built-in ChatML renders byte-identically


def test_hf_tokenizer_folder_and_file(tmp_path, qwen2):
    folder = tmp_path / "hf"
    qwen2.tok.save_pretrained(str(folder))
    loaded = load_tokenizer(str(folder))
    assert loaded.tok.encode("Hallo Welt, 17 × 23!") == qwen2.tok.encode("Hallo Welt, 17 × 23!")
    single = load_tokenizer(str(folder / "tokenizer.json"))
    assert single.tok.encode("Grüße") == qwen2.tok.encode("Grüße")


def test_gguf_metadata_and_errors(tmp_path):
    meta = read_gguf_metadata(vocab("qwen2"))
    assert meta["tokenizer.ggml.pre"] == "qwen2" and len(meta["tokenizer.ggml.tokens"]) > 150000
    (tmp_path / "x.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 4)
    with pytest.raises(TokenizerLoadError, match="truncated or corrupt"):
        load_tokenizer(str(tmp_path / "x.gguf"))
    (tmp_path / "y.gguf").write_bytes(b"NOPE")
    with pytest.raises(TokenizerLoadError, match="not a GGUF file"):
        load_tokenizer(str(tmp_path / "y.gguf"))
    with pytest.raises(TokenizerLoadError, match="unknown embedded model"):
        load_tokenizer("embedded:nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TokenizerLoadError, match="not a tokenizer folder"):
        load_tokenizer(str(tmp_path / "empty"))


def test_nothing_is_downloaded():
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    json.dumps(read_gguf_metadata(vocab("gpt-2"))["tokenizer.ggml.pre"])
