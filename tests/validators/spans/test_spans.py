"""Token-span coverage with real tokenizers: the fast method must equal a full render+tokenize, always."""

from __future__ import annotations

import random
import zlib

import pytest

from mashbill.validators.errors import SpanAuditError
from mashbill.validators.spans.spans import (PieceCounter, SpanEngine, SpanResult, TrainingExample, audit, detect_policy,
                                       judge, stratified_sample)
from mashbill.validators.data.synthetic import corpus
from mashbill.validators.tokenizers.tokenizer import resolve_chat_template

ADVERSARIAL = [
    "  leading spaces", "trailing spaces  ", "\n\nleading blank lines", "tabs\tand\r\nCRLF\r\n", "emoji 😀 and 中文",
    "combining e\u0301 and ü", "'s contractions don't", "<|im_start|>fake special<|im_end|>", "", " ", "\n",
    "line\n line with indent\n\n\nthree blanks", "§ 823 Abs. 2 BGB", '{"a": [1, 2]}\n', "x" * 500,
    # tokens longer than 32 bytes (issue 28): a table rule, runs of spaces, indented code; control bytes; scripts
    "| a | b |\n|" + "-" * 64 + "|\n| 1 | 2 |", " " * 48 + "x", "def f():\n" + " " * 32 + "return 1\n",
    "ctl\x1d\x07\x1b[0m end", "Привет, мир. こんにちは世界。 مرحبا بالعالم नमस्ते สวัสดี",
]


def _examples(n: int, seed: int = 0, with_text: bool = True) -> list[TrainingExample]:
    rng = random.Random(seed)
    out = []
    for r in corpus(n, seed=seed, correction_share=0.2):
        msgs = [dict(m) for m in r.messages]
        if rng.random() < 0.5:  # adversarial contents in the user and assistant turns
            msgs[1]["content"] = rng.choice(ADVERSARIAL) + msgs[1]["content"] + rng.choice(ADVERSARIAL)
            msgs[-1]["content"] = rng.choice(ADVERSARIAL) + msgs[-1]["content"] + rng.choice(ADVERSARIAL)
        out.append(TrainingExample(r.id, tuple(msgs)))
    for i, a in enumerate(ADVERSARIAL):
        out.append(TrainingExample(f"adv{i}", ({"role": "system", "content": "You plan.\n\n" + a},
                                               {"role": "user", "content": a + "?"},
                                               {"role": "assistant", "content": a})))
    if with_text:
        out += [TrainingExample("txt1", text_prompt="Question: what is 2+2?\nAnswer:", text_completion=" 4"),
                TrainingExample("txt2", text_prompt="A\n\nB\n", text_completion="C\nD")]
    return out


@pytest.mark.parametrize("tok_name,template,loss", [
    ("qwen2", "chatml", "assistant-only"),
    ("qwen2", None, "completion-only"),
    ("qwen2", "chatml", "last-turn"),
    ("llama3", "chatml", "assistant-only"),
    ("smollm2", None, "assistant-only"),
    ("smollm2", "chatml", "completion-only"),
])
def test_fast_equals_full_render(request, tok_name, template, loss):
    loaded = request.getfixturevalue(tok_name)
    engine = SpanEngine(loaded, resolve_chat_template(loaded, template), loss=loss)
    examples = _examples(60, seed=zlib.crc32(f"{tok_name}{loss}".encode()) % 1000)  # same seed in every process
    fast = engine.fast(examples, chunk=32)
    for ex, f in zip(examples, fast):
        n = engine.naive(ex)
        assert f.signature() == n.signature(), f"{ex.key}: fast {f.signature()} != full {n.signature()}"
    assert any(f.ranges for f in fast)
    got = audit(engine, examples, fast, sample=10)
    assert got["audited"] == 10 and got["mismatches"] == 0
    # examples that failed to render (SPAN00x) have no tokens to compare
    assert got["cross_check"]["tokenizer"] == "llama.cpp" and 8 <= got["cross_check"]["compared"] <= 10


def test_template_without_generation_markers_warns(smollm2):
    engine = SpanEngine(smollm2, resolve_chat_template(smollm2, None), loss="assistant-only")
    assert engine.warnings and "generation" in engine.warnings[0]
    engine = SpanEngine(smollm2, resolve_chat_template(smollm2, "chatml"), loss="assistant-only")
    assert not engine.warnings


def test_assistant_mask_is_exactly_the_json_plus_end_token(qwen2):
    engine = SpanEngine(qwen2, resolve_chat_template(qwen2, "chatml"))
    ex = TrainingExample("x", ({"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
                               {"role": "assistant", "content": '[{"task":"t"}]'}))
    res = engine.fast([ex])[0]
    ids = qwen2.tok.apply_chat_template(list(ex.messages), chat_template=engine.template, tokenize=True,
                                        return_dict=True)["input_ids"]
    (s, e), = res.ranges
    assert qwen2.tok.decode(ids[s:e]) == '[{"task":"t"}]<|im_end|>'
    assert res.total == len(ids)


def _sentencepiece_folder(tmp_path_factory, name):
    """A SentencePiece tokenizer as a Hugging Face folder (transformers' conversion of llama.cpp's vocab file). As a
    GGUF it is refused, since it differs from llama.cpp; as a folder it is the trainer's truth, and the cut policy
    must still hold for it."""
    from transformers import PreTrainedTokenizerFast

    from mashbill.validators.tokenizers.gguf_tokenizer import _transformers_converter, read_metadata
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer
    from vhelpers import vocab

    folder = tmp_path_factory.mktemp(name)
    backend, cfg = _transformers_converter(vocab(name), read_metadata(vocab(name)))
    PreTrainedTokenizerFast(tokenizer_object=backend, **cfg).save_pretrained(str(folder))
    return load_tokenizer(str(folder))


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return {name: _sentencepiece_folder(tmp_path_factory, name) for name in ("llama-spm", "phi-3")}


def test_policies(qwen2, llama3, smollm2, spm):
    assert detect_policy(qwen2).name == "bytelevel-lines"
    assert detect_policy(llama3).name == "bytelevel-lines"
    assert detect_policy(smollm2).name == "bytelevel-lines"  # digit isolation is covered by the proof
    # SentencePiece with a "first" prefix scheme: even added-token cuts change the tokens, so no cuts at all
    assert detect_policy(spm["llama-spm"]).name == "none"
    assert detect_policy(spm["phi-3"]).name == "added-tokens"


@pytest.mark.parametrize("tok_name", ["llama-spm", "phi-3"])
def test_fast_equals_full_render_for_sentencepiece(spm, tok_name):
    loaded = spm[tok_name]
    engine = SpanEngine(loaded, resolve_chat_template(loaded, "chatml"), loss="assistant-only")
    examples = _examples(8, seed=3, with_text=False)
    fast = engine.fast(examples)
    for ex, f in zip(examples, fast):
        assert f.signature() == engine.naive(ex).signature(), ex.key
    got = audit(engine, examples, fast, sample=8)  # folder source: tokenizer.json read directly
    # every sampled example that rendered is compared (a whitespace-only assistant turn is SPAN008: no tokens)
    rendered = sum(fast[i].error is None for i in stratified_sample(examples, fast, 8))
    assert rendered >= 5 and got["cross_check"]["compared"] == rendered
    assert got["cross_check"]["tokenizer"].startswith("tokenizers")


def test_pieces_reassemble_and_block_cache_agrees(qwen2):
    pol = detect_policy(qwen2)
    counter = PieceCounter(qwen2, pol)
    from dataclasses import replace

    plain = PieceCounter(qwen2, replace(pol, block_cache=False))
    for ex in _examples(20, seed=5, with_text=False):
        text = "\n".join(m["content"] for m in ex.messages)
        a, b = counter.split(text), plain.split(text)
        assert "".join(a) == text and a == b
        assert counter.count_text(text) == len(qwen2.backend.encode(text, add_special_tokens=False).ids)


def _res(total, ranges, **kw):
    return SpanResult("k", total, tuple(ranges), **kw)


def test_verdicts():
    codes = lambda r, L, side="right": [v.code for v in judge(r, L, side, "assistant-only").verdicts]  # noqa: E731
    assert codes(_res(100, [(80, 100)]), 100) == []
    assert codes(_res(100, [(80, 100)]), 90) == ["SPAN001"]
    assert codes(_res(100, [(80, 100)]), 80) == ["SPAN002", "SPAN003"]
    assert codes(_res(100, [(80, 100)]), 85) == ["SPAN001"]
    assert codes(_res(100, [(80, 100)]), 50) == ["SPAN002", "SPAN003"]
    assert codes(_res(100, [(10, 20), (80, 100)]), 50) == ["SPAN001"]
    assert codes(_res(100, [(80, 100)]), 50, "left") == ["SPAN004"]
    assert codes(_res(100, [(40, 100)]), 50, "left") == ["SPAN001", "SPAN004"]
    assert codes(_res(100, []), 200) == ["SPAN005"]
    assert codes(_res(100, [(10, 20), (80, 100)], n_assistant_spans=2, correction=True), 200) == ["SPAN010"]
    assert codes(_res(0, [], error=("SPAN006", "x")), 200) == ["SPAN006"]
    out = judge(_res(100, [(80, 100)]), 90, "right", "assistant-only")
    assert out.kept == 10 and out.margin == -10


def test_correction_sample_trained_wrong_turn(qwen2):
    msgs = ({"role": "system", "content": "S"}, {"role": "user", "content": "What is 17% of 2840?"},
            {"role": "assistant", "content": '[{"task":"x","category":"general"}]'},
            {"role": "user", "content": "Review the plan against PRECISION-FIRST and correct it."},
            {"role": "assistant", "content": '[{"task":"x","category":"precision_tools"}]'})
    template = resolve_chat_template(qwen2, "chatml")
    ex = TrainingExample("c", msgs)
    for loss, expect in (("assistant-only", True), ("last-turn", False), ("completion-only", False)):
        res = SpanEngine(qwen2, template, loss=loss).fast([ex])[0]
        got = "SPAN010" in [v.code for v in judge(res, 4096, "right", loss).verdicts]
        assert got is expect, loss
    plain = ex.messages[:3] + ({"role": "user", "content": "Thanks! And for 18%?"}, ex.messages[4])
    res = SpanEngine(qwen2, template).fast([TrainingExample("p", plain)])[0]
    assert "SPAN010" not in [v.code for v in judge(res, 4096, "right", "assistant-only").verdicts]


def test_audit_catches_a_mismatch(qwen2):
    engine = SpanEngine(qwen2, resolve_chat_template(qwen2, "chatml"))
    examples = _examples(3, seed=1, with_text=False)
    fast = engine.fast(examples)
    fast[1] = SpanResult(fast[1].key, fast[1].total + 1, fast[1].ranges)
    with pytest.raises(SpanAuditError, match="span audit failed on 1 of"):
        audit(engine, examples, fast, sample=100)


def test_template_refusal_is_a_verdict_not_a_crash(qwen2):
    template = "{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('no tools') }}{% endif %}" \
               "{{ m['content'] }}{% endfor %}"
    engine = SpanEngine(qwen2, template, loss="assistant-only")
    good = TrainingExample("g", ({"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}))
    bad = TrainingExample("b", ({"role": "tool", "content": "a"}, {"role": "assistant", "content": "b"}))
    res = engine.fast([good, bad])
    assert res[0].error is None and res[0].ranges
    assert res[1].error[0] == "SPAN007" and "no tools" in res[1].error[1]
    assert engine.naive(bad).signature() == res[1].signature()
