"""The cut policy: the strongest way of cutting text that a tokenizer provably supports, self-checked against it.

Byte-level BPE with a known regex pre-tokenizer gets line and word cuts (argued in ``span_pieces``); any other
tokenizer gets only added-token cuts, each piece encoded behind a sentinel special token so that "start of text"
handling (a SentencePiece prefix space, say) is the same as in context, or no cuts at all when even that fails. The
chosen policy is checked at load on a battery of adversarial strings; a failure downgrades it.
"""

from __future__ import annotations

import json
import logging
import random
import re
from typing import Sequence

from mashbill.validators.spans.span_pieces import CutPolicy, PieceCounter, split_words
from mashbill.validators.tokenizers.tokenizer import LoadedTokenizer

log = logging.getLogger(__name__)


def _known_regexes() -> set[str]:
    known = {
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
        r"\p{N}",  # digit isolation (SmolLM2, StarCoder): splits digits only, never touches a line break
    }
    return known


def _bytelevel_regex_ok(pre: dict | None) -> tuple[bool, str]:
    """Is the pre-tokenizer one whose splits are proven stable at our line cuts?"""
    if pre is None:
        return False, "no pre-tokenizer"
    parts = pre["pretokenizers"] if pre.get("type") == "Sequence" else [pre]
    has_bytelevel = False
    for p in parts:
        t = p.get("type")
        if t == "ByteLevel":
            if p.get("add_prefix_space"):
                return False, "ByteLevel adds a prefix space"
            has_bytelevel = True
        elif t == "Split":
            pat = p.get("pattern", {})
            rx = pat.get("Regex") if isinstance(pat, dict) else None
            if rx is None or rx not in _known_regexes():
                return False, "split regex is not one of the proven families"
            if p.get("behavior") not in ("Isolated",) or p.get("invert"):
                return False, "split behaviour is not Isolated"
        elif t == "Digits":
            continue  # splits digits only; never touches a line break
        else:
            return False, f"pre-tokenizer {t} not covered by the proof"
    return has_bytelevel, "" if has_bytelevel else "not byte-level"


def isolates_digits_first(pre: dict | None) -> bool:
    """Does the first pre-tokenizer make every digit a pre-token of its own (SmolLM2, StarCoder: a Split on
    ``\\p{N}``, Isolated; or Digits with individual_digits)? Then a cut before or after an ASCII digit is safe:
    each later step works inside the pieces that first split leaves, where a digit stands alone whether the text
    around it is there or not, and BPE never merges across pre-tokens. (Where the digits are isolated only by an
    alternative of the main regex, as in Qwen2, a cut before a digit is not safe: "a  1" and "a  " + "1" part their
    spaces differently under ``\\s+(?!\\S)``.) An NFC normalizer cannot compose across such a cut either: no
    precomposed character has a digit on either side of it."""
    if pre is None:
        return False
    first = pre["pretokenizers"][0] if pre.get("type") == "Sequence" and pre.get("pretokenizers") else pre
    if first.get("type") == "Digits":
        return bool(first.get("individual_digits"))
    pat = first.get("pattern")
    return (first.get("type") == "Split" and isinstance(pat, dict) and pat.get("Regex") == r"\p{N}"
            and first.get("behavior") == "Isolated" and not first.get("invert"))


def _normalizer_ok(norm: dict | None) -> bool:
    if norm is None:
        return True
    if norm.get("type") == "Sequence":
        return all(_normalizer_ok(n) for n in norm["normalizers"])
    return norm.get("type") in ("NFC",)


def _probe_strings(loaded: LoadedTokenizer, rng: random.Random, n: int = 400) -> list[str]:
    tok = loaded.tok
    added = [t.content for t in tok.backend_tokenizer.get_added_tokens_decoder().values()][:12]
    units = ["a", "Z", "ä", "ß", "1", "42", "123456", ".", ",", ";", "'", "'s", "'t", "\"", "/", "\\", "-", "(", ")",
             "{", "}", "[", "]", ":", "#", "*", "§", " ", "  ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "\u0301",
             "\u00a0", "中文", "😀", "é", "e\u0301", "Ġ", "▁", "x", "Word", " word", "don't", "<", ">", "|", "=",
             "!", "?"]
    units += added
    out = []
    for _ in range(n):
        k = rng.randint(3, 24)
        out.append("".join(rng.choice(units) for _ in range(k)))
    for a in ["a", ".", "1", "'", "!", "中", "é", ")", "}"]:
        for b in ["a", ".", "1", "'s", " ", "\t", "\n", "/", "中", "\u0301", "é", "{", "-", "<", "§"]:
            out.append(f"x{a}\n{b}y z")
            out.append(f"{a}\n{b}")
            for sp in added[:3]:
                out.append(f"{a}\n{sp}{b}\n{a}")
    return out


def _policy_holds(counter: PieceCounter, probes: Sequence[str]) -> str | None:
    """None if piece-wise tokenization equals whole tokenization on every probe, else the first failure."""
    backend = counter.backend
    for s in probes:
        whole = backend.encode(s, add_special_tokens=False).ids
        pieces = counter.split(s)
        if "".join(pieces) != s:
            return f"pieces do not reassemble {s!r}"
        if counter.ids_concat(s) != whole:
            return f"piece-wise tokens differ on {s!r}"
        if counter.policy.word_cuts:
            words = [w for p in pieces for w in split_words(p, counter.policy)]
            ids = [i for ids, _ in counter.encode_many(words) for i in ids]
            if ids != whole:
                return f"word-wise tokens differ on {s!r}"
    return None


def detect_policy(loaded: LoadedTokenizer, seed: int = 0) -> CutPolicy:
    """The strongest cut policy the tokenizer provably supports, self-checked against it."""
    cached = loaded.info.get("policy")
    if cached is not None:
        return cached
    j = json.loads(loaded.backend.to_str())
    added = j.get("added_tokens", [])
    cut_tokens = [a["content"] for a in added if a["content"] and not any(
        a.get(flag) for flag in ("normalized", "lstrip", "rstrip", "single_word"))]
    risky = [a["content"] for a in added if a.get("lstrip") or a.get("rstrip") or a.get("single_word")
             or a.get("normalized")]
    special_re = (re.compile("(" + "|".join(re.escape(t) for t in sorted(cut_tokens, key=len, reverse=True)) + ")")
                  if cut_tokens else None)
    rng = random.Random(seed)
    probes = _probe_strings(loaded, rng)
    candidates: list[CutPolicy] = []
    model_type = j.get("model", {}).get("type")
    ok_pre, why = _bytelevel_regex_ok(j.get("pre_tokenizer"))
    post = json.dumps(j.get("post_processor"))
    trims = '"trim_offsets": true' in post
    no_newline_tokens = not any("\n" in t for t in cut_tokens)
    if model_type == "BPE" and ok_pre and _normalizer_ok(j.get("normalizer")) and not risky:
        for digits in ([True, False] if isolates_digits_first(j.get("pre_tokenizer")) else [False]):
            candidates.append(CutPolicy("bytelevel-lines", special_re, True,
                                        reason="byte-level BPE, known regex" + (", digits cut" if digits else ""),
                                        nonempty_offsets=not trims, block_cache=no_newline_tokens,
                                        special_set=frozenset(cut_tokens), word_cuts=True, digit_cuts=digits))
    if special_re is not None and not risky:
        sentinel = None
        for t in added:
            if t.get("special") and t["content"] in cut_tokens:
                sentinel = t["content"]
                break
        if sentinel is not None:
            n = len(loaded.backend.encode(sentinel, add_special_tokens=False).ids)
            candidates.append(CutPolicy("added-tokens", special_re, False, sentinel=sentinel, sentinel_tokens=n,
                                        reason="cuts at added tokens only"))
    candidates.append(CutPolicy("none", None, False, reason="no provable cut"))
    chosen = candidates[-1]
    for pol in candidates:
        if pol.name == "none":
            break
        failure = _policy_holds(PieceCounter(loaded, pol), probes)
        if failure is None:
            chosen = pol
            break
        log.info("cut policy %s rejected for %s: %s", pol.name, loaded.name, failure)
    if chosen.name != "bytelevel-lines" and not ok_pre:
        chosen.reason += f" ({why})"
    loaded.info["policy"] = chosen
    return chosen
