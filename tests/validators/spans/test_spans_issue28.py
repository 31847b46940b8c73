"""Issue 28: no count is lost when the piece cache refills in the middle of a chunk, and one SPAN008 rule for every
template. The fast method is compared with the full render + tokenize (the trainer's own call)."""

from __future__ import annotations

import pytest

from mashbill.validators.spans.spans import SpanEngine, TrainingExample
from mashbill.validators.tokenizers.tokenizer import resolve_chat_template


def _text_rows(n: int) -> list[TrainingExample]:
    """Plain prompt/completion rows whose prompt ends inside a piece (no cut at the prompt's end), so that the
    prompt is counted on its own, through the cache, after the chunk's pieces were cached."""
    return [TrainingExample(f"t{i}", text_prompt=f"Question {i}: what is {i} plus {i * 7} and",
                            text_completion=f"{i * 8}?\nIt is {i * 8}.") for i in range(n)]


def _chat_rows(n: int) -> list[TrainingExample]:
    """Conversations whose completion starts with a space or a CJK character: no cut where the prompt (rendered
    with the generation prompt) ends."""
    return [TrainingExample(f"m{i}", ({"role": "user", "content": f"Frage {i}: wie viel ist {i} mal {i}?"},
                                      {"role": "assistant", "content": (" " if i % 2 else "答") + f"{i * i} ist es"}))
            for i in range(n)]


@pytest.mark.parametrize("limit", [1, 9, 40])
@pytest.mark.parametrize("path", ["plain-prompt", "messages"])
def test_cache_refill_inside_a_chunk_loses_no_count(qwen2, path, limit):
    if path == "plain-prompt":
        engine = SpanEngine(qwen2, None, loss="completion-only")
        examples = _text_rows(70)
    else:
        engine = SpanEngine(qwen2, resolve_chat_template(qwen2, "chatml"), loss="completion-only")
        examples = _chat_rows(70)
    engine.counter.cache_limit = limit
    fast = engine.fast(examples, chunk=32)
    assert engine.counter.refills >= 2  # the cache did fill up and refill, inside chunks too
    for ex, f in zip(examples, fast):
        n = engine.naive(ex)
        assert f.error is None and f.signature() == n.signature(), f"{ex.key}: fast {f.signature()} != {n.signature()}"


WHITESPACE_TURNS = ["", " ", "\n", " \n\t "]


@pytest.mark.parametrize("tok_name,template", [("qwen2", "chatml"), ("smollm2", "chatml"), ("smollm2", None),
                                               ("llama3", "chatml")])
@pytest.mark.parametrize("loss", ["assistant-only", "last-turn"])
def test_a_whitespace_only_assistant_turn_is_span008_under_every_template(request, tok_name, template, loss):
    """ChatML with generation markers used to accept what a template without markers rejected."""
    loaded = request.getfixturevalue(tok_name)
    engine = SpanEngine(loaded, resolve_chat_template(loaded, template), loss=loss)
    examples = [TrainingExample(f"w{i}", ({"role": "user", "content": "Plan it."},
                                          {"role": "assistant", "content": w}))
                for i, w in enumerate(WHITESPACE_TURNS)]
    examples.append(TrainingExample("ok", ({"role": "user", "content": "Plan it."},
                                           {"role": "assistant", "content": " [1]"})))
    fast = engine.fast(examples)
    for ex, f in zip(examples, fast):
        n = engine.naive(ex)
        assert f.signature() == n.signature()
        if ex.key == "ok":
            assert f.error is None and f.trained > 0
        else:
            assert f.error is not None and f.error[0] == "SPAN008", (ex.key, f.error)


def _longest_token_rows(loaded, n: int = 50) -> list[TrainingExample]:
    """Rows built around the vocabulary's n longest tokens (as llama.cpp spells them): in a table, in code, after
    control bytes and non-Latin text, in assistant turns, user turns and plain prompt/completion rows."""
    from mashbill.validators.tokenizers.llamacpp_vocab import LlamaCppVocab

    ref = LlamaCppVocab.open(loaded.path)
    out = []
    for i, t in enumerate(ref.longest_tokens(n)):
        w = ref.piece(t).decode("utf-8")
        if i % 3 == 2:
            out.append(TrainingExample(f"l{i}", text_prompt=f"Code:\n{w}", text_completion=f"{w}x\x1d\n"))
            continue
        out.append(TrainingExample(f"l{i}", ({"role": "user", "content": f"Tabelle\x1d: {w}| Привет 中文"},
                                             {"role": "assistant", "content": f"| a |\n|{w}|\n{w}ok"})))
    return out


@pytest.mark.parametrize("tok_name", ["smollm2", "llama3", "qwen2", "gpt2"])
def test_the_longest_tokens_of_each_vocabulary_count_and_cross_check(request, tok_name):
    pytest.importorskip("llama_cpp")
    from mashbill.validators.spans.spans import audit

    loaded = request.getfixturevalue(tok_name)
    engine = SpanEngine(loaded, resolve_chat_template(loaded, "chatml"))
    examples = _longest_token_rows(loaded)
    fast = engine.fast(examples, chunk=16)
    for ex, f in zip(examples, fast):
        assert f.error is None and f.signature() == engine.naive(ex).signature(), ex.key
    got = audit(engine, examples, fast, sample=len(examples))
    assert got["cross_check"]["compared"] == len(examples) and got["cross_check"]["mismatches"] == 0
