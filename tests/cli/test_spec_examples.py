"""`mashbill spec check` on a spec whose example bank is broken: it fails with one line naming the bank file, the
row's line and the field (docs/specs.md, docs/yield.md)."""

from __future__ import annotations

import json

from tests.conftest import run_cli
from tests.specs.test_examples_spec import bank_row, spec_with_bank


def test_spec_check_names_the_bank_line_and_field(tmp_path):
    good, bad = bank_row(1, "Compute 12 times 7."), bank_row(2, "Explain tides.")
    del bad["output"]
    path = spec_with_bank(tmp_path, [good, bad])
    got = run_cli("spec", "check", path)
    assert got.returncode != 0
    fail = [line for line in got.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fail) == 1 and f"{tmp_path / 'bank@1.jsonl'}:2: field 'output':" in fail[0], got.stdout
    (tmp_path / "bank@1.jsonl").write_text(json.dumps(good) + "\n", encoding="utf-8")
    got = run_cli("spec", "check", path)
    assert "FAIL spec bank-plan@1" in got.stdout and "specs.lock" in got.stdout  # the bank is fine: only the lock is left
