"""Tokenizers load offline: a Hugging Face folder as is, a GGUF's tokenizer rebuilt and checked against llama.cpp."""

from __future__ import annotations

import socket

import pytest

from mashbill.validators.errors import TokenizerLoadError
from mashbill.validators.tokenizers import gguf_tokenizer, llamacpp_vocab, tokenizer
from mashbill.validators.tokenizers.tokenizer import CHATML_GENERATION, has_generation_markers, load_tokenizer, resolve_chat_template
from vhelpers import llama32_folder, vocab


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty tokenizer cache and no memoised loads, so that a GGUF tokenizer is really rebuilt."""
    monkeypatch.setenv("MASHBILL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tokenizer, "_LOADED", {})
    return tmp_path / "cache"


def test_embedded_smollm2_and_its_template(smollm2):
    assert smollm2.tok.vocab_size == 49152
    assert smollm2.facts["family"] == "smollm" and smollm2.facts["llamacpp_check"]["difference"] is None
    tmpl = resolve_chat_template(smollm2, None)
    assert "<|im_start|>" in tmpl and not has_generation_markers(tmpl)
    assert has_generation_markers(resolve_chat_template(smollm2, "chatml"))
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}]
    own = smollm2.tok.apply_chat_template(msgs, tokenize=False)
    ours = smollm2.tok.apply_chat_template(msgs, chat_template=CHATML_GENERATION, tokenize=False)
    assert own == ours  # the built-in ChatML renders byte-identically


def test_hf_folder_is_used_as_is():
    folder = llama32_folder()
    loaded = load_tokenizer(str(folder))
    assert loaded.facts["source"] == "hf-folder"
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(folder / "tokenizer.json"))
    for text in ("Hallo Welt, 17 × 23!", "Cửa Việt", "<|eot_id|>x", "\n\n1. a"):
        assert loaded.tok.encode(text) == raw.encode(text).ids
    # this tokenizer.json does not ignore merges, unlike llama.cpp on a Llama-3 GGUF: the folder is the truth
    assert len(loaded.tok.encode("Cửa Việt", add_special_tokens=False)) == 5
    single = load_tokenizer(str(folder / "tokenizer.json"))
    assert single.facts["source"] == "tokenizer.json"
    assert single.tok.encode("Grüße", add_special_tokens=False) == loaded.tok.encode("Grüße", add_special_tokens=False)


@pytest.mark.parametrize("name", ["llama-spm", "phi-3"])
def test_sentencepiece_gguf_is_refused_not_approximated(name):
    pytest.importorskip("llama_cpp")
    with pytest.raises(TokenizerLoadError, match="does not tokenize as llama.cpp does"):
        load_tokenizer(str(vocab(name)))


def test_llama_cpp_check_finds_a_wrong_pre_tokenizer(llama3):
    """The check itself can fail: Llama 3's vocabulary with GPT-2's pre-tokenizer differs from llama.cpp."""
    pytest.importorskip("llama_cpp")
    from tokenizers import Regex, Tokenizer, pre_tokenizers

    path = vocab("llama-bpe")
    specials = [t.content for t in llama3.backend.get_added_tokens_decoder().values()]
    assert llamacpp_vocab.check(llama3.backend, path, specials)[1] is None
    wrong = Tokenizer.from_str(llama3.backend.to_str())
    wrong.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(gguf_tokenizer.FAMILIES["gpt-2"].regexes[0]), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    n, diff = llamacpp_vocab.check(wrong, path, specials)
    assert n > 300 and diff is not None and "llama.cpp gives" in diff


def test_gguf_metadata_and_errors(tmp_path):
    meta = gguf_tokenizer.read_metadata(vocab("gpt-2"))
    assert meta["tokenizer.ggml.pre"] == "gpt-2" and len(meta["tokenizer.ggml.tokens"]) == 50257
    (tmp_path / "x.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 4)
    with pytest.raises(TokenizerLoadError, match="truncated or corrupt"):
        load_tokenizer(str(tmp_path / "x.gguf"))
    (tmp_path / "y.gguf").write_bytes(b"NOPE" + b"\x00" * 40)
    with pytest.raises(TokenizerLoadError, match="not a GGUF file"):
        load_tokenizer(str(tmp_path / "y.gguf"))
    with pytest.raises(TokenizerLoadError, match="unknown embedded model"):
        load_tokenizer("embedded:nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TokenizerLoadError, match="not a tokenizer folder"):
        load_tokenizer(str(tmp_path / "empty"))


def test_unverified_family_is_checked_at_load_and_nothing_is_downloaded(fresh_cache, monkeypatch):
    """StarCoder's pre-tokenizer is in the table but not among the families the suite verifies: without llama.cpp it
    is refused; with it, it is checked on the battery at load and accepted (the outcome is cached). A verified family
    loads without llama.cpp. No network connection is opened on the way: every attempt is recorded (a library
    that catches the refusal and carries on would otherwise hide it), and a hub download would go to an endpoint
    that does not answer."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args[1:] or kwargs)
        raise OSError("network access refused by the test")

    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    with monkeypatch.context() as m:
        m.setattr(llamacpp_vocab, "available", lambda: False)
        with pytest.raises(TokenizerLoadError, match="not verified against llama.cpp"):
            load_tokenizer(str(vocab("starcoder")))
        gpt2 = load_tokenizer(str(vocab("gpt-2")))
        assert gpt2.facts["verified_family"] and gpt2.facts["llamacpp_check"] is None
    assert attempts == [], f"network access attempted: {attempts}"
    pytest.importorskip("llama_cpp")
    loaded = load_tokenizer(str(vocab("starcoder")))
    check = loaded.facts["llamacpp_check"]
    assert not loaded.facts["verified_family"] and check["difference"] is None and check["strings"] > 300
    cached = list(fresh_cache.rglob("facts.json"))
    facts = sorted(p.read_text(encoding="utf-8") for p in cached)
    assert len(cached) == 2 and '"family": "starcoder"' in "".join(facts) and '"difference": null' in "".join(facts)
    assert loaded.tok.encode("hello 123", add_special_tokens=False) == llamacpp_vocab.LlamaCppVocab.open(
        vocab("starcoder")).ids("hello 123", False)
    folder = load_tokenizer(str(llama32_folder()))
    assert folder.tok.encode("hello", add_special_tokens=False) == [15339]
    assert attempts == [], f"network access attempted: {attempts}"
