"""COPY001 with retrieved examples (validators/checker.py): the examples a record is checked against are the bank
rows it was shown (meta.examples.ids), so a plan that copies one of them is caught, and a row it was never shown
does not count (docs/yield.md)."""

from __future__ import annotations

from mashbill.specs import load_spec
from mashbill.validators.checker import RecordChecker
from tests.specs.test_examples_spec import bank_row, spec_with_bank

HAIKU = [{"task": "Write a haiku about snow falling on the rooftops of Munich at night.", "category": "creative_writer"}]


def test_a_plan_that_copies_a_row_it_was_shown_is_copy001(tmp_path):
    rows = [bank_row(1, "Write a haiku about snow on Munich rooftops.", output=HAIKU),
            bank_row(2, "Compute 12 times 7.")]
    rs = load_spec(spec_with_bank(tmp_path, rows))
    checker = RecordChecker.for_spec(rs)
    query = {"query": "Explain how a heat pump heats a house in winter.", "lang": "en"}
    copied = [{"task": HAIKU[0]["task"], "category": "general"}]
    shown = {"examples": {"bank": "bank@1.jsonl", "bank_sha256": rs.files["examples.bank"], "ids": ["b-001", "b-002"]}}
    not_shown = {"examples": {**shown["examples"], "ids": ["b-002"]}}
    codes = lambda meta: {v.code for v in checker.check(query, copied, meta, schema=False)}  # noqa: E731
    assert "COPY001" in codes(shown)
    assert "COPY001" not in codes(not_shown)
    own = [{"task": "Explain how a heat pump heats a house in winter.", "category": "general"}]
    assert "COPY001" not in {v.code for v in checker.check(query, own, shown, schema=False)}
