"""Issue 10's minimal rows: the span gate must agree with the tokenizer the trainer really uses (llama.cpp's, for a
GGUF source), and the fast path with the full render. Each test failed before the fix; llama.cpp is called directly
here, not through Mashbill's own reference, so a shared mistake cannot pass."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mashbill.cli import main
from mashbill.validators.spans.spans import SpanEngine, TrainingExample, judge
from mashbill.validators.tokenizers.tokenizer import resolve_chat_template
from vhelpers import llamacpp_reference, vocab

llama_cpp = pytest.importorskip("llama_cpp")

def _lc_ids(path, text: str, add_special: bool) -> list[int]:
    return llamacpp_reference(path).tokenize(text.encode("utf-8"), add_bos=add_special, special=True)


def _codes(report_path) -> dict:
    return json.loads(report_path.read_text(encoding="utf-8"))["counts"]


def test_smollm2_isolates_digits_so_the_target_fits(tmp_path, smollm2):
    """smollm pre-tokenizer isolates digits: "\\n\\n1." is "\\n\\n", "1", "." as in llama.cpp (transformers' converter
    made it 4 tokens), so the target ends at token 26 of 27 and fits a window of 26."""
    assert smollm2.tok.encode("\n\n1.", add_special_tokens=False) == _lc_ids(smollm2.path, "\n\n1.", False) == [1116, 33, 30]
    row = {"messages": [{"role": "user", "content": "Steps:\n\n1. a\n\n2. b"},
                        {"role": "assistant", "content": "Done:\n\n1. x"}]}
    src = tmp_path / "row.jsonl"
    src.write_text(json.dumps(row) + "\n", encoding="utf-8")
    seen = {}
    for window in (26, 25):
        out = tmp_path / f"r{window}.json"
        res = CliRunner().invoke(main, ["validate", str(src), "--format", "messages", "--tokenizer",
                                        "embedded:smollm2-135m-instruct", "--chat-template", "chatml", "--max-seq-len",
                                        str(window), "--report", str(out), "--no-expectations", "--no-pii"])
        assert res.exit_code in (0, 1), res.output
        seen[window] = _codes(out)
    assert "SPAN001" not in seen[26]
    assert "SPAN001" in seen[25]  # the last target token (<|im_end|>) is beyond a window of 25
    text = smollm2.tok.apply_chat_template(row["messages"], chat_template=resolve_chat_template(smollm2, "chatml"),
                                           tokenize=False)
    assert len(_lc_ids(smollm2.path, text, False)) == 27


@pytest.mark.parametrize("name", ["llama-bpe", "qwen2", "gpt-2"])
def test_every_llama_cpp_test_vector_matches(request, name):
    loaded = request.getfixturevalue({"llama-bpe": "llama3", "qwen2": "qwen2", "gpt-2": "gpt2"}[name])
    path = vocab(name)
    # each input is followed by the separator line, each output by a line break
    ins = path.with_name(path.name + ".inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")[:-1]
    outs = path.with_name(path.name + ".out").read_text(encoding="utf-8").split("\n")[:-1]
    assert len(ins) == len(outs) > 30
    for text, ids in zip(ins, outs):
        assert loaded.tok.encode(text, add_special_tokens=False) == [int(x) for x in ids.split()], text


def test_llama3_ignore_merges(llama3):
    assert len(llama3.tok.encode("Cửa Việt", add_special_tokens=False)) == 3
    assert llama3.tok.encode("Cửa Việt", add_special_tokens=False) == _lc_ids(llama3.path, "Cửa Việt", False)


def test_llama3_has_only_its_own_special_tokens(llama3):
    ids = llama3.tok.encode("a <|endoftext|> b", add_special_tokens=False)
    assert ids == _lc_ids(llama3.path, "a <|endoftext|> b", False)
    assert len(llama3.tok.encode("<|endoftext|>", add_special_tokens=False)) == 7
    assert len(llama3.tok) == 128256  # nothing added beyond the file's vocabulary


def test_llama3_plain_text_rows_get_their_bos(llama3):
    engine = SpanEngine(llama3, None, loss="completion-only")
    ex = TrainingExample("t", text_prompt="Question: what is 2+2?\nAnswer:", text_completion=" 4")
    full = ex.text_prompt + ex.text_completion + llama3.tok.eos_token
    want_total = len(_lc_ids(llama3.path, full, True))
    want_start = len(_lc_ids(llama3.path, ex.text_prompt, True))
    assert _lc_ids(llama3.path, "a", True)[0] == 128000  # the file says add BOS
    for res in (engine.fast([ex])[0], engine.naive(ex)):
        assert res.total == want_total and res.ranges == ((want_start, want_total),)


def test_fast_path_prompt_ending_inside_a_special_token_string(smollm2):
    engine = SpanEngine(smollm2, None, loss="completion-only")
    ex = TrainingExample("t", text_prompt="x <", text_completion="|im_start|>y")
    fast, naive = engine.fast([ex])[0], engine.naive(ex)
    assert fast.signature() == naive.signature()
    assert fast.ranges[0][0] == len(_lc_ids(smollm2.path, "x <", True))
    assert fast.total == len(_lc_ids(smollm2.path, "x <|im_start|>y" + smollm2.tok.eos_token, True))


def test_piece_cache_overflow_does_not_crash(qwen2):
    engine = SpanEngine(qwen2, resolve_chat_template(qwen2, "chatml"))
    engine.counter.cache_limit = 20  # far fewer than the pieces of one chunk: the cache is cleared mid-chunk
    examples = [TrainingExample(f"k{i}", ({"role": "system", "content": f"System {i}.\nLine two {i * 7}."},
                                          {"role": "user", "content": f"Question {i}?\nMore {i}."},
                                          {"role": "assistant", "content": f"Answer {i}.\nDone {i * 3}."}))
                for i in range(40)]
    for ex, res in zip(examples, engine.fast(examples, chunk=10)):  # later chunks reuse cached pieces
        assert res.signature() == engine.naive(ex).signature()


def _target_text(loaded, engine, ex, res) -> str:
    text = loaded.tok.apply_chat_template(list(ex.messages), chat_template=engine.template, tokenize=False)
    ids = loaded.tok(text, add_special_tokens=False)["input_ids"]
    return "".join(loaded.tok.decode(ids[s:e]) for s, e in res.ranges)


def test_template_without_markers_locates_the_real_assistant_turn(smollm2):
    engine = SpanEngine(smollm2, resolve_chat_template(smollm2, None))  # SmolLM2's own template: no markers
    ex = TrainingExample("p", ({"role": "user", "content": "Pick (a) or (b)."}, {"role": "assistant", "content": "a"}))
    res = engine.fast([ex])[0]
    assert res.signature() == engine.naive(ex).signature()
    assert _target_text(smollm2, engine, ex, res) == "a<|im_end|>"
    assert res.target_start >= 38
    assert "SPAN002" in [v.code for v in judge(res, 38, "right", "assistant-only").verdicts]


LLAMA31_LIKE = (
    "{{- bos_token }}{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
    "{{- 'Cutting Knowledge Date: December 2023\\nToday Date: 26 Jul 2024\\n\\n' }}{{- '<|eot_id|>' }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
    "'<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}")


def test_template_without_markers_does_not_mark_the_users_words(llama3):
    engine = SpanEngine(llama3, LLAMA31_LIKE)
    ex = TrainingExample("b", ({"role": "user", "content": "Extract the city: I moved to Berlin.\n"},
                               {"role": "assistant", "content": "Berlin"}))
    res = engine.fast([ex])[0]
    assert res.signature() == engine.naive(ex).signature()
    assert _target_text(llama3, engine, ex, res) == "Berlin<|eot_id|>"
    text = llama3.tok.apply_chat_template(list(ex.messages), chat_template=LLAMA31_LIKE, tokenize=False)
    assert res.target_end == len(llama3.tok(text, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("content", ["", "  \n"])
def test_empty_assistant_turn_is_its_own_finding(smollm2, content):
    engine = SpanEngine(smollm2, resolve_chat_template(smollm2, None))
    ex = TrainingExample("e", ({"role": "user", "content": "Hi"}, {"role": "assistant", "content": content}))
    res = engine.fast([ex])[0]
    assert res.signature() == engine.naive(ex).signature()
    assert [v.code for v in judge(res, 4096, "right", "assistant-only").verdicts] == ["SPAN008"]
