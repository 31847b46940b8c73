"""`mashbill predict`: inputs are read (and bad ones refused by file and line) before any model is loaded.
(Predictions of real exported students: tests/exporters/.)"""

from __future__ import annotations

from tests.cli.conftest import error_lines, invoke


def test_bad_inputs_are_named_by_file_and_line(tmp_path):
    rows = tmp_path / "q.jsonl"
    rows.write_text('{"text": "Was ist 7 hoch 5?"}\n{"text": 5}\n', encoding="utf-8")
    res = invoke("predict", tmp_path / "missing.onnx", rows)
    assert res.exit_code == 2 and error_lines(res) == [f"error: {rows}:2: field 'text' (or 'query'): expected a "
                                                       "string"], res.output
    rows.write_text('{"text": "ok"}\nnot json\n', encoding="utf-8")
    res = invoke("predict", tmp_path / "missing.onnx", rows, "--json")
    assert res.exit_code == 2 and f"{rows}:2: not JSON" in res.stderr and res.stdout == ""
    res = invoke("predict", tmp_path / "missing.onnx", "Was ist 7 hoch 5?")
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and "missing.onnx" in res.stderr, res.output


def test_an_empty_request_is_refused(tmp_path):
    """Issue 26: `predict ""` labelled an empty request. Refused before any model is loaded."""
    for text in ("", "   "):
        res = invoke("predict", tmp_path / "missing.onnx", text)
        assert res.exit_code == 2 and len(error_lines(res)) == 1 and "empty request" in res.stderr, res.output
    rows = tmp_path / "q.jsonl"
    rows.write_text('{"text": "Was ist 7 hoch 5?"}\n{"query": " "}\n', encoding="utf-8")
    res = invoke("predict", tmp_path / "missing.onnx", rows)
    assert res.exit_code == 2 and error_lines(res) == [f"error: {rows}:2: field 'text' (or 'query'): an empty "
                                                       "request"], res.output


def test_a_txt_file_that_is_not_utf8_is_one_line_naming_the_line(tmp_path):
    """Issue 26: a .txt file that is not UTF-8 was a traceback."""
    rows = tmp_path / "q.txt"
    rows.write_bytes("Was ist 7 hoch 5?\n".encode() + "Größe in Zoll\n".encode("latin-1"))
    res = invoke("predict", tmp_path / "missing.onnx", rows)
    assert res.exit_code == 2 and len(error_lines(res)) == 1, res.output
    assert f"{rows}:2: not UTF-8 text" in res.stderr
