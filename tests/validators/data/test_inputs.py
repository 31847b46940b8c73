"""Reading dataset files Mashbill did not make; bad rows become FMT verdicts naming file and row."""

from __future__ import annotations

import json

import pytest

from mashbill.validators.data.inputs import read_rows
from mashbill.validators.errors import ValidationInputError

SYS = {"role": "system", "content": "Plan."}
USER = {"role": "user", "content": "What is 17% of 2840?"}
ASST = {"role": "assistant", "content": "[]"}


def _write(path, rows, raw_lines=()):
    with open(path, "wb") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False).encode("utf-8") + b"\n")
        for line in raw_lines:
            f.write(line + b"\n")
    return path


def test_messages_and_bad_rows(tmp_path):
    p = _write(tmp_path / "chat.jsonl", [
        {"messages": [SYS, USER, ASST]},
        {"conversations": [{"from": "human", "value": "Hallo, wie geht es dir?"}, {"from": "gpt", "value": "Gut."}]},
        {"prompt": "x", "completion": "y"},
        {"messages": [SYS, USER]},
        {"messages": [SYS, {"role": "user"}, ASST]},
        {"messages": [SYS, {"role": "wizard", "content": "x"}, ASST]},
        [1, 2],
    ], raw_lines=[b'{"messages": [', b'{"messages": "caf\xe9"}'])
    rows = read_rows(p, "messages")
    assert [r.ok for r in rows] == [True, True] + [False] * 7
    assert rows[0].query == "What is 17% of 2840?" and rows[0].target == "[]"
    assert rows[1].examples[0].messages[0] == {"role": "user", "content": "Hallo, wie geht es dir?"}
    assert rows[1].meta["lang"] == "de" and rows[0].meta["lang"] == "en"
    codes = [(r.key, r.problems[0].code) for r in rows[2:]]
    assert codes == [("chat.jsonl:3", "FMT003"), ("chat.jsonl:4", "FMT002"), ("chat.jsonl:5", "FMT002"),
                     ("chat.jsonl:6", "FMT002"), ("chat.jsonl:7", "FMT001"), ("chat.jsonl:8", "FMT001"),
                     ("chat.jsonl:9", "FMT001")]
    details = [r.problems[0].detail for r in rows[2:]]
    assert "prompt-completion fields" in details[0]
    assert "no assistant message" in details[1]
    assert "messages[1]' (user) has no content" in details[2]
    assert "role 'wizard'" in details[3]
    assert "not valid JSON" in details[5]
    assert "not UTF-8 (invalid byte 0xe9" in details[6]


def test_prompt_completion_alpaca_preference(tmp_path):
    pc = read_rows(_write(tmp_path / "pc.jsonl", [
        {"prompt": "Q: 2+2?\nA:", "completion": " 4"},
        {"prompt": [SYS, USER], "completion": [ASST]},
        {"prompt": [USER], "completion": "4"},
        {"prompt": "only"},
    ]), "prompt-completion")
    assert pc[0].examples[0].text_prompt == "Q: 2+2?\nA:" and pc[0].examples[0].messages is None
    assert pc[1].examples[0].prompt_len == 2 and len(pc[1].examples[0].messages) == 3
    assert [r.problems[0].code for r in pc[2:]] == ["FMT002", "FMT002"]
    assert "missing completion" in pc[3].problems[0].detail

    alp = tmp_path / "a.json"
    alp.write_text(json.dumps([{"instruction": "Übersetze", "input": "Hello", "output": "Hallo"},
                               {"instruction": "Say hi", "output": "hi"}, {"instruction": "x"}]), encoding="utf-8")
    rows = read_rows(alp, "alpaca")
    assert rows[0].examples[0].messages[0]["content"] == "Übersetze\n\nHello" and rows[0].examples[0].prompt_len == 1
    assert rows[0].key == "a.json:1" and rows[2].problems[0].code == "FMT002"

    pref = read_rows(_write(tmp_path / "p.jsonl", [
        {"prompt": [USER], "chosen": [{"role": "assistant", "content": "good"}],
         "rejected": [{"role": "assistant", "content": "bad"}]},
        {"chosen": [USER, {"role": "assistant", "content": "good"}], "rejected": [USER, ASST]},
        {"prompt": "p", "chosen": "a", "rejected": "b"},
        {"prompt": "p", "chosen": "a"},
    ]), "preference")
    assert [e.part for e in pref[0].examples] == ["chosen", "rejected"]
    assert pref[1].examples[0].prompt_len == 1  # implicit prompt: the shared first turn
    assert pref[2].examples[1].text_completion == "b"
    assert pref[3].problems[0].code == "FMT002"


def test_unreadable_files(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValidationInputError, match=r"empty.jsonl: the file is empty"):
        read_rows(tmp_path / "empty.jsonl", "messages")
    with pytest.raises(ValidationInputError, match="file not found"):
        read_rows(tmp_path / "nope.jsonl", "messages")
    with pytest.raises(ValidationInputError, match="is a directory"):
        read_rows(tmp_path, "messages")
    (tmp_path / "arr.json").write_text("[{", encoding="utf-8")
    with pytest.raises(ValidationInputError, match=r"arr.json: line 1: not valid JSON"):
        read_rows(tmp_path / "arr.json", "alpaca")


def test_a_lone_surrogate_is_a_row_finding_not_a_crash(tmp_path):
    """JSON may escape half a surrogate pair ("\\ud800"); the string it decodes to has no UTF-8 form, so no tokenizer
    can take it (issue 28: a TypeError deep in tokenizers)."""
    p = tmp_path / "s.jsonl"
    p.write_text('{"prompt": "a \\ud800 b", "completion": "c"}\n{"prompt": "fine \\ud83d\\ude00", "completion": "d"}\n',
                 encoding="utf-8")
    bad, good = read_rows(p, "prompt-completion")
    assert [v.code for v in bad.problems] == ["FMT001"] and "\\ud800" in bad.problems[0].detail
    assert "s.jsonl:1" in bad.problems[0].detail
    assert good.ok and good.examples[0].text_prompt == "fine 😀"


def test_rows_python_cannot_read_safely_are_fmt001_and_the_rest_are_read(tmp_path):
    """Nesting that would exhaust Python's stack, NaN, an integer of 5,000 digits: a verdict for the row that names
    file and line, never a traceback for the file."""
    good = {"messages": [SYS, USER, ASST]}
    p = _write(tmp_path / "chat.jsonl", [], raw_lines=[
        json.dumps(good).encode(),
        b'{"messages": ' + b"[" * 3000 + b"]" * 3000 + b"}",
        b'{"messages": [{"role": "user", "content": "x", "w": NaN}]}',
        b'{"messages": [], "n": ' + b"7" * 5000 + b"}",
        json.dumps(good).encode(),
    ])
    rows = read_rows(p, "messages")
    assert [r.ok for r in rows] == [True, False, False, False, True]
    bad = [(r.key, r.problems[0].code, r.problems[0].detail) for r in rows[1:4]]
    assert [(k, c) for k, c, _ in bad] == [("chat.jsonl:2", "FMT001"), ("chat.jsonl:3", "FMT001"),
                                           ("chat.jsonl:4", "FMT001")]
    assert "nested deeper than 64 levels" in bad[0][2] and "NaN is not JSON" in bad[1][2]
    assert "4,300 digits" in bad[2][2]
    deep = tmp_path / "alpaca.json"
    deep.write_text("[" + json.dumps({"instruction": "x", "output": "y"}) + ", " + "[" * 3000 + "]" * 3000 + "]")
    with pytest.raises(ValidationInputError, match=r"alpaca.json: line 1: not valid JSON \(nested deeper than 64"):
        read_rows(deep, "alpaca")
