"""The span audit: a stratified sample, the naive re-check and the second-tokenizer cross-check."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mashbill.validators.spans.spans import SpanEngine, TrainingExample, audit, stratified_sample
from mashbill.validators.tokenizers.tokenizer import resolve_chat_template


def _single(i):
    return TrainingExample(f"s{i}", ({"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}))


def _multi(i):
    return TrainingExample(f"m{i}", ({"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": "a"},
                                     {"role": "user", "content": "fix it"}, {"role": "assistant", "content": "b"}))


def _text(i):
    return TrainingExample(f"t{i}", text_prompt=f"Q{i}:", text_completion=" A")


def test_rare_shapes_are_always_sampled(qwen2):
    engine = SpanEngine(qwen2, resolve_chat_template(qwen2, "chatml"))
    examples = [_single(i) for i in range(3000)] + [_multi(0), _text(0), _text(1)]
    results = engine.fast(examples)
    for seed in range(5):
        pick = stratified_sample(examples, results, 200, seed)
        keys = {examples[i].key for i in pick}
        assert len(pick) == 200 and {"m0", "t0", "t1"} <= keys
    assert stratified_sample(examples, results, 200, 1) == stratified_sample(examples, results, 200, 1)
    assert stratified_sample(examples[:50], results[:50], 200) == list(range(50))
    assert stratified_sample(examples, results, 0) == []  # --audit-sample 0 audits nothing


def test_cross_check_catches_a_tokenizer_that_is_not_its_source(qwen2, llama3):
    """A converter regression (here: Llama 3's vocabulary posing as the Qwen2 GGUF) passes the naive re-check, since
    fast and naive share the tokenizer, but not the cross-check against llama.cpp on the source file: each compared
    example gets a SPAN011 finding (the run goes on)."""
    pytest.importorskip("llama_cpp")
    impostor = replace(llama3, path=qwen2.path, facts=dict(qwen2.facts), info={})
    engine = SpanEngine(impostor, resolve_chat_template(impostor, "chatml"))
    examples = [_single(i) for i in range(5)] + [_text(0)]
    fast = engine.fast(examples)
    got = audit(engine, examples, fast, sample=10)
    assert got["cross_check"]["mismatches"] == got["cross_check"]["compared"] == 6
    assert {v.code for _, v in got["findings"]} == {"SPAN011"}
    assert all(" llama.cpp gives " in line for line in got["lines"])
    honest = SpanEngine(qwen2, resolve_chat_template(qwen2, "chatml"))
    got = audit(honest, examples, honest.fast(examples), sample=10)
    assert got["cross_check"] == {"tokenizer": "llama.cpp", "compared": 6, "mismatches": 0, "skipped": None}
    assert got["findings"] == [] and got["lines"] == []


def test_cross_check_of_a_hugging_face_folder_reads_tokenizer_json_directly():
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer
    from vhelpers import llama32_folder

    loaded = load_tokenizer(str(llama32_folder()))
    engine = SpanEngine(loaded, resolve_chat_template(loaded, "chatml"))
    examples = [_single(i) for i in range(3)] + [_multi(0), _text(0), _text(1)]
    got = audit(engine, examples, engine.fast(examples), sample=10)
    assert got["cross_check"]["compared"] == 6 and got["cross_check"]["tokenizer"].startswith("tokenizers")
    text = engine.fast([_text(0)])[0]
    assert text.total == len(loaded.tok("Q0: A" + loaded.tok.eos_token)["input_ids"])  # BOS and EOS counted
