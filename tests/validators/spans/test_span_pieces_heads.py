"""A rendered example's head kept (issue 29): the pieces of everything before the last blank line are glued once and
kept, and an example whose head was seen glues only its last block. Its pieces must be those of the text cut without
any block cache, and their token counts the whole text's, whatever the blank lines, added tokens and tails."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from mashbill.validators.spans.span_pieces import PieceCounter
from mashbill.validators.spans.span_policy import detect_policy

HEADS = ["<|im_start|>system\nYou route requests.\n\nClasses:\n- trivial\n- complex\n\nAnswer in JSON.<|im_end|>\n"
         "<|im_start|>user\n",
         "<|im_start|>system\nKurz.\n\n\n\nNoch kürzer.\n\n<|im_end|>",  # an even run, and an added token last
         "<|im_start|>system\n\n\nLeading blank line.<|im_end|>\n\n<|im_start|>user\n", "Plain head\n\n"]
TAILS = ["What is 17% of 2,340?<|im_end|>\n<|im_start|>assistant\n{\"complexity\":\"moderate\"}<|im_end|>\n",
         "\nodd run of line breaks", "<|im_start|>user\nAn added token first", "", "   spaces\tand tabs  ",
         "Ünïcödé, 中文。\n\nand a blank line in the tail\n\n\n", "x" * 300 + "\n- item\n  indented"]


@pytest.mark.parametrize("name", ["qwen2", "smollm2"])
def test_kept_heads_cut_as_the_text_cut_whole(request, name):
    loaded = request.getfixturevalue(name)  # the test vocab's and the embedded teacher's tokenizers
    policy = detect_policy(loaded)
    assert policy.block_cache  # the path under test
    kept = PieceCounter(loaded, policy, head_limit=5)  # small: the kept heads are cleared and made again
    whole = PieceCounter(loaded, replace(policy, block_cache=False))
    rng = random.Random(29)
    texts = [h + t for h in HEADS for t in TAILS]
    texts += [rng.choice(HEADS) + rng.choice(TAILS) + rng.choice(["", "\n", "\n\n", "\n\n\n"]) + rng.choice(TAILS)
              for _ in range(200)]
    for text in texts:
        got = kept.split(text)
        assert got == whole.split(text), repr(text)
        assert "".join(got) == text
    assert 0 < len(kept.heads) <= 5
    for text in texts[:40]:  # and the counts add up to the whole text's
        assert kept.count_text(text) == len(loaded.backend.encode(text, add_special_tokens=False).ids), repr(text)
