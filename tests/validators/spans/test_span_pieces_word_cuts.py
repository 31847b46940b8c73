"""Word cuts (issue 28, s28): a new piece is counted word by word, cut before a space or an ASCII punctuation
character that follows a letter or digit, never inside an added token. The words' tokens must be the whole text's
tokens, in every byte-level family the fast path runs."""

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
        words = [w for p in counter.split(text) for w in split_words(p, pol.special_set)]
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
    specials = detect_policy(gpt2).special_set
    assert "<|endoftext|>" in specials
    assert WORD_CUT.split("<|endoftext|>") != ["<|endoftext|>"]  # the bare cut would split it
    assert split_words("<|endoftext|>", specials) == ["<|endoftext|>"]
    assert split_words("end.", specials) == ["end", "."]


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
