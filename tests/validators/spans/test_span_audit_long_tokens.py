"""Issue 28: the per-run llama.cpp cross-check on ordinary text. Tokens longer than 32 bytes (a Markdown table rule,
runs of spaces, newline-plus-indent), a byte a vocabulary has no token for, and a tokenizer that is not its source
must end as totals, verdicts and report lines, never as a traceback. The reference here is llama.cpp called
directly on text built by concatenation, not Mashbill's span code."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from mashbill.cli import main
from mashbill.validators.errors import SpanAuditError
from mashbill.validators.spans.spans import SpanEngine, TrainingExample, audit
from mashbill.validators.tokenizers.tokenizer import resolve_chat_template
from vhelpers import llamacpp_reference, vocab

llama_cpp = pytest.importorskip("llama_cpp")

FAMILIES = {"smollm2": "embedded:smollm2-135m-instruct", "llama3": "llama-bpe", "qwen2": "qwen2", "gpt2": "gpt-2",
            "starcoder": "starcoder"}
def _tokref(name: str) -> str:
    ref = FAMILIES[name]
    return ref if ref.startswith("embedded:") else str(vocab(ref))


def _chatml(messages) -> str:
    """ChatML as the generation-marker template renders it (no default system prompt)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def _validate(tmp_path, rows, tokenizer, *extra):
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "report.json"
    res = CliRunner().invoke(main, ["validate", str(src), "--format", "messages", "--tokenizer", tokenizer,
                                    "--chat-template", "chatml", "--max-seq-len", "4096", "--report", str(out),
                                    "--no-expectations", "--no-pii", *extra])
    return res, out


DASH_ROW = {"messages": [{"role": "user", "content": "table?"}, {"role": "assistant", "content": "-" * 64 + "\nok"}]}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_64_dashes_give_llamacpps_total_with_the_cross_check_on(tmp_path, family):
    """A 64-dash table rule is one token of 64 bytes in most of these vocabularies; llama-cpp-python's detokenize
    returns nothing for a piece over 32 bytes, which crashed the cross-check."""
    tokref = _tokref(family)
    res, out = _validate(tmp_path, [DASH_ROW], tokref)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text(encoding="utf-8"))
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer

    path = load_tokenizer(tokref).path
    want = len(llamacpp_reference(path).tokenize(_chatml(DASH_ROW["messages"]).encode("utf-8"), add_bos=False, special=True))
    assert report["span"]["tokens"]["max"] == want
    cross = report["span"]["audit"]["cross_check"]
    assert cross["tokenizer"] == "llama.cpp" and cross["compared"] == 1 and cross["mismatches"] == 0


def test_the_longest_tokens_of_every_vocabulary_are_read_whole():
    """Each family's 50 longest tokens come back from the cross-check's reader with all their bytes."""
    from mashbill.validators.tokenizers.llamacpp_vocab import LlamaCppVocab
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer

    for family in FAMILIES:
        loaded = load_tokenizer(_tokref(family))
        ref = LlamaCppVocab.open(loaded.path)
        longest = ref.longest_tokens(50)
        assert len(longest) == 50 and len(ref.piece(longest[0])) > 32, family
        for t in longest:
            piece = ref.piece(t)
            text = piece.decode("utf-8", errors="strict")
            assert ref.ids(text, False) != [] and ref.encode(text, False)[1][-1][1] == len(text), (family, t, piece)


def test_a_byte_without_a_token_is_compared_not_a_crash(smollm2):
    """SmolLM2 has no token for the byte 0x1D: llama.cpp and the trainer's tokenizer both drop it."""
    assert llamacpp_reference(smollm2.path).tokenize(b"a\x1db", add_bos=False, special=True) == \
        smollm2.tok.encode("a\x1db", add_special_tokens=False)
    engine = SpanEngine(smollm2, resolve_chat_template(smollm2, "chatml"))
    examples = [TrainingExample("ctl", ({"role": "user", "content": "x\x1dy"},
                                        {"role": "assistant", "content": "a\x1db"})),
                TrainingExample("txt", text_prompt="p\x1d:", text_completion=" q\x1d")]
    got = audit(engine, examples, engine.fast(examples), sample=10)
    assert got["cross_check"]["compared"] == 2 and got["cross_check"]["mismatches"] == 0
    assert got["findings"] == []


def test_a_tokenizer_that_is_not_its_source_is_a_finding_per_record(qwen2, llama3):
    """Llama 3's vocabulary posing as the Qwen2 GGUF: every compared record gets SPAN011 and a report line; the run
    goes on."""
    impostor = replace(llama3, path=qwen2.path, facts=dict(qwen2.facts), info={})
    engine = SpanEngine(impostor, resolve_chat_template(impostor, "chatml"))
    examples = [TrainingExample(f"s{i}", ({"role": "user", "content": f"question {i}: which model?"},
                                          {"role": "assistant", "content": f"answer {i} 中文 ünïcode"}))
                for i in range(4)]
    got = audit(engine, examples, engine.fast(examples), sample=10)
    assert got["cross_check"]["compared"] == 4 and got["cross_check"]["mismatches"] == 4
    assert sorted(k for k, _ in got["findings"]) == ["s0", "s1", "s2", "s3"]
    assert {v.code for _, v in got["findings"]} == {"SPAN011"}
    assert all("llama.cpp gives" in line for line in got["lines"]) and len(got["lines"]) == 4


def test_a_checker_that_cannot_run_is_one_line_naming_the_file(tmp_path, qwen2):
    """The second tokenizer's own failure (here: its source file is not a GGUF) is SpanAuditError (one line, exit 2),
    never a traceback."""
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF but not really")
    engine = SpanEngine(replace(qwen2, path=bad, info={}), resolve_chat_template(qwen2, "chatml"))
    examples = [TrainingExample("r1", ({"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}))]
    with pytest.raises(SpanAuditError, match="broken.gguf"):
        audit(engine, examples, engine.fast(examples), sample=10)


def test_validate_with_a_mismatching_cross_check_reports_and_exits_1(tmp_path, qwen2, llama3):
    """Through check_spans: the finding is a verdict in the report's counts and a line in its problems."""
    from mashbill.validators.run import Report, add_audit_findings

    impostor = replace(llama3, path=qwen2.path, facts=dict(qwen2.facts), info={})
    engine = SpanEngine(impostor, resolve_chat_template(impostor, "chatml"))
    examples = [TrainingExample("r1", ({"role": "user", "content": "q 中文"}, {"role": "assistant", "content": "a ü"}))]
    aud = audit(engine, examples, engine.fast(examples), sample=10)
    report = Report("x", "file")
    report.keys = ["r1"]
    add_audit_findings(report, aud)
    assert report.counts() == {"SPAN011": 1} and report.has_rejects
    assert len(report.problems) == 1 and report.problems[0].startswith("r1:")


NASTY = ["-" * 64 + "\nok", " " * 200, "\n" + " " * 40 + "return x", "| a |\n|" + "-" * 120 + "|",
         "".join(chr(c) for c in range(1, 32)) + "\x7f", "a\x1db", "Привет こんにちは مرحبا नमस्ते", "\u200b\u200d\ufeff",
         "\t" * 70, "💩" * 40, "\r\n" * 50, "<|im_start|>", "<|endoftext|>" * 3, "=" * 100, "_" * 70, "." * 100]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_validate_takes_every_nasty_row_of_every_family(tmp_path, family):
    """Each row through the CLI with the cross-check on every row: a report and exit 0/1, never a traceback; the
    lone surrogate row is FMT001."""
    rows = [{"messages": [{"role": "system", "content": "S " + c}, {"role": "user", "content": c + " q"},
                          {"role": "assistant", "content": f"A{i} " + c}]} for i, c in enumerate(NASTY)]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"messages": [{"role": "user", "content": "\\ud800"}, '
                   '{"role": "assistant", "content": "x"}]}\n', encoding="utf-8")
    out = tmp_path / "report.json"
    res = CliRunner().invoke(main, ["validate", str(src), "--format", "messages", "--tokenizer", _tokref(family),
                                    "--chat-template", "chatml", "--max-seq-len", "4096", "--report", str(out),
                                    "--no-expectations", "--no-pii", "--audit-sample", "100"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    assert res.exit_code == 1, res.output  # the FMT001 row is a reject
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["counts"].get("FMT001") == 1 and "SPAN011" not in report["counts"]
    cross = report["span"]["audit"]["cross_check"]
    assert cross["compared"] == len(NASTY) and cross["mismatches"] == 0


def test_a_span_pass_puts_the_finding_where_one_pass_over_all_rows_had_it(qwen2, llama3):
    """Through validate's SpanPass (batches, the audit at the end): a record's SPAN011 comes after its rule verdicts
    and before its own span verdicts, as when the audit ran before the verdicts of one pass over every row."""
    from mashbill.factory.records import Verdict
    from mashbill.specs.model import TrainerProfile
    from mashbill.validators.data.inputs import Row
    from mashbill.validators.run import Options, Report, SpanPass

    impostor = replace(llama3, path=qwen2.path, facts=dict(qwen2.facts), info={})
    template = resolve_chat_template(impostor, "chatml")
    report = Report("x", "file")
    rows = [Row(f"r{i}", examples=[TrainingExample(f"r{i}", ({"role": "user", "content": f"q {i} 中文 " * 30},
                                                             {"role": "assistant", "content": "a ü"}))])
            for i in range(3)]
    report.add("r1", [Verdict("HR001", "reject", "a rule's verdict", "validate")])
    spans = SpanPass(Options(profile=TrainerProfile(tokenizer="x", max_seq_len=16, loss="assistant-only")), report)
    spans.engine, spans.loaded, spans.template = SpanEngine(impostor, template), impostor, template
    for row in rows:  # one batch a row
        spans.add([row], keep=True)
    spans.finish()
    codes = [v.code for v in report.verdicts["r1"]]
    assert codes[:2] == ["HR001", "SPAN011"] and len(codes) > 2 and all(c.startswith("SPAN") for c in codes[2:])
    assert report.sections["span"]["audit"]["audited"] == 3 and len(report.problems) == 3
