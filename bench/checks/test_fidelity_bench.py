"""bench/fidelity.py: gold rows without an expression are left out instead of crashing, an empty denominator
prints n/a, and the data folder follows MASHBILL_QUERIES_DIR."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ddg(tmp_path: Path, rows: list[dict]) -> Path:
    folder = tmp_path / "ddg_goodies_tool_queries"
    folder.mkdir(parents=True)
    (folder / "ddg_goodies_tool_queries.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "test.jsonl").write_text(json.dumps({"question": "Tom has 3 apples and buys 4. How many?",
                                                               "answer": "<<3+4=7>>7"}), encoding="utf-8")
    return tmp_path


def test_gold_rows_without_an_expression_are_left_out(tmp_path):
    import fidelity

    data = _ddg(tmp_path, [
        {"query": "calculator", "triggers": True, "tool": "calculator", "expected": {"args": []}},
        {"query": "calculator online", "triggers": True, "tool": "calculator", "expected": None},
        {"query": "2 + 2", "triggers": True, "tool": "calculator", "expected": {"args": ["2 + 2"]}},
        {"query": "5 kg to lb", "triggers": True, "tool": "unit_conversion",
         "expected": {"fields": {"raw_input": "5", "from_unit": "kilogram", "to_unit": ""}}},
        {"query": "days between", "triggers": True, "tool": "days_between", "expected": {"args": ["bad date"]}},
    ])
    plans, left_out = fidelity.gold_plans(data)
    assert [q for q, _, _ in plans] == ["2 + 2", "Tom has 3 apples and buys 4. How many?"]
    assert left_out == 2


def test_an_empty_denominator_prints_na():
    import fidelity

    assert fidelity.rate(0, 0) == "n/a" and fidelity.rate(1, 8) == "0.1250"


def test_the_data_folder_follows_the_environment(monkeypatch, tmp_path):
    import fidelity

    monkeypatch.setenv("MASHBILL_QUERIES_DIR", str(tmp_path))
    try:
        assert importlib.reload(fidelity).DATA == tmp_path
    finally:
        monkeypatch.delenv("MASHBILL_QUERIES_DIR")
        importlib.reload(fidelity)
