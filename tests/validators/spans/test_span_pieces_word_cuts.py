"""Word cuts (issue 28, s28): a new piece is counted word by word, cut before a space or an ASCII punctuation
character that follows a letter or digit, never inside an added token; and, for a tokenizer whose first
pre-tokenizer isolates every digit (SmolLM2, StarCoder), before and after every ASCII digit (issue 29). The words'
tokens must be the whole text's tokens, in every byte-level family the fast path runs."""

from __future__ import annotations

import pytest

from mashbill.validators.spans.span_pieces import WORD_CUT, PieceCounter, split_words
from mashbill.validators.spans.span_policy import detect_policy
from vhelpers import vocab

TEXTS = [
    '[{"id":"t1","task":"Kunde.","category":"translation","depends_on":"t1"},{"id":"t3","task":"number"}]',
    "don't WE'LL it's x'sa 'Re", "a1b2c3 1234567.89, x_y__z a-b--c (f(x)=y) [k]{v}", "tabs\tand\r\nCRLF\r\n",
    "Übriggebliebenen, gewürfelt; naïve e\u0301. ü. Привет, мир! 中文。中文. مرحبا: नमस्ते|สวัสดี~",
    "x<|im_end|>\n<|im_start|>y<|endoftext|>z<|eot_id|>.", "end<|im_end|>", "ab<fim_prefix>cd", "1²3½x.y",
    "| a | b |\n|" + "-" * 64 + "|\n| 1 | 2 |", "def f():\n" + " " * 32 + "return x.y(1)\n", "ctl\x1d.\x07x\x1b[0m",
    "mcp_args: {\"date_str\": \"2024-07-15\"}\nok.", "x" * 40 + "." + "y" * 40 + "!?",
    "a  1 2\t3\n 4x5 [r213599] 1\u0301 \u0663\u00b2 3.14e-10 0x1F -7 1,000,000 12:30 1st 2nd",
]


def _loaded(name):
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer

    return load_tokenizer(str(vocab(name)))


@pytest.mark.parametrize("name", ["qwen2", "qwen35", "llama-bpe", "gpt-2", "starcoder", "smollm2"])
def test_words_tokenize_as_the_whole_text(name):
    if name == "smollm2":
        from mashbill.validators.tokenizers.tokenizer import load_tokenizer

        loaded = load_tokenizer("embedded:smollm2-135m-instruct")
    else:
        loaded = _loaded(name)
    pol = detect_policy(loaded)
    assert pol.name == "bytelevel-lines" and pol.word_cuts  # the self-check at load accepted the cut
    counter = PieceCounter(loaded, pol)
    cuts = 0
    for text in TEXTS:
        whole = loaded.backend.encode(text, add_special_tokens=False).ids
        words = [w for p in counter.split(text) for w in split_words(p, pol)]
        assert "".join(words) == text
        ids = [i for w in words for i in loaded.backend.encode(w, add_special_tokens=False).ids]
        assert ids == whole, f"{name}: word-wise tokens differ on {text!r}: {words}"
        assert counter.count_text(text) == len(whole)
        cuts += sum(not w.startswith(" ") for w in words[1:])
    assert cuts > 40  # the cut before punctuation really happens (not only before spaces)


def test_json_scaffolding_becomes_words_of_its_own():
    words = WORD_CUT.split(' Kunde.","category":"translation","depends_on":"t1"},{"id":"t3"')
    assert words == [" Kunde", '.","category', '":"translation', '","depends', "_on", '":"t1', '"},{"id', '":"t3',
                     '"']


def test_an_added_token_is_one_word():
    gpt2 = _loaded("gpt-2")
    pol = detect_policy(gpt2)
    assert "<|endoftext|>" in pol.special_set
    assert WORD_CUT.split("<|endoftext|>") != ["<|endoftext|>"]  # the bare cut would split it
    assert split_words("<|endoftext|>", pol) == ["<|endoftext|>"]
    assert split_words("end.", pol) == ["end", "."]


def test_the_self_check_at_load_rejects_an_unsafe_word_cut(monkeypatch):
    import random
    import re

    from mashbill.validators.spans import span_pieces
    from mashbill.validators.spans.span_policy import _policy_holds, _probe_strings

    loaded = _loaded("gpt-2")
    counter = PieceCounter(loaded, detect_policy(loaded))
    probes = _probe_strings(loaded, random.Random(0))
    assert _policy_holds(counter, probes) is None
    # a cut between a space and the letters after it splits GPT-2's " word" pre-token: the check must see it
    monkeypatch.setattr(span_pieces, "WORD_CUT", re.compile(r"(?<= )(?=[^\W_])"))
    assert "word-wise tokens differ" in _policy_holds(counter, probes)


@pytest.mark.parametrize("name,digits", [("qwen2", False), ("qwen35", False), ("llama-bpe", False), ("gpt-2", False),
                                         ("starcoder", True), ("smollm2", True)])
def test_digits_are_cut_only_where_the_first_pre_tokenizer_isolates_them(name, digits):
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer

    loaded = load_tokenizer("embedded:smollm2-135m-instruct") if name == "smollm2" else _loaded(name)
    pol = detect_policy(loaded)
    assert pol.digit_cuts is digits
    words = split_words(" [r213599", pol)
    assert words == ([" [r", "2", "1", "3", "5", "9", "9"] if digits else [" [r213599"])


def test_the_self_check_at_load_rejects_digit_cuts_where_digits_are_isolated_later():
    """Qwen2 isolates digits inside its main regex: "a  1" parts its spaces as " ", " " there, but "a  " alone keeps
    "  " whole, so a cut before a digit would change the tokens. The check at load must see that."""
    import dataclasses
    import random

    from mashbill.validators.spans.span_policy import _policy_holds, _probe_strings

    loaded = _loaded("qwen2")
    pol = detect_policy(loaded)
    assert not pol.digit_cuts
    forced = PieceCounter(loaded, dataclasses.replace(pol, digit_cuts=True))
    probes = _probe_strings(loaded, random.Random(0))
    assert "word-wise tokens differ" in _policy_holds(forced, probes)
    assert _policy_holds(PieceCounter(loaded, pol), probes) is None


def test_a_new_number_costs_no_tokenizer_call_once_its_digits_were_seen():
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer

    loaded = load_tokenizer("embedded:smollm2-135m-instruct")
    counter = PieceCounter(loaded, detect_policy(loaded))
    counter.count_text("ids 0123456789 [r")
    tokenized = []
    raw = counter._count_raw
    counter._count_raw = lambda words: tokenized.extend(words) or raw(words)
    for text in ("ids 987 [r213599", "ids 55 [r4400"):
        assert counter.count_text(text) == len(loaded.backend.encode(text, add_special_tokens=False).ids)
    assert tokenized == []
    counter.count_text("ids 987 [q1")
    assert tokenized == [" [q"]  # a new word still goes to the tokenizer
