"""Making an example bank from a store (curation/examples_bank.py, `mashbill spec examples`): usable records only,
the train side of the split only, rows a spec's `examples` section loads back (docs/yield.md)."""

from __future__ import annotations

import json

from mashbill.curation.examples_bank import bank_rows, write_bank
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from mashbill.specs.examples import load_bank
from tests.conftest import run_cli
from tests.curation.conftest import PLANS, add_records


def test_usable_train_records_become_bank_rows(lib, tmp_path):
    rs = load_spec(lib.write("bank-src", curation={"splits": {"train": 0.6, "eval": 0.2, "test": 0.2}}))
    store_path = tmp_path / "store"
    with Store.open(store_path) as store:
        records = add_records(store, rs, rejected_by_validation={"What is 17.5% of 4,360?": "ARG001"},
                              parse_failures=("Was ist 7 hoch 5 minus 1000?",))
        rows, counts = bank_rows(rs, store)
        usable = {s.record.id for s in store.usable(rs.hash) if s.usability.usable}
    assert counts["usable"] == len(usable) == len(records) - 2
    assert 0 < counts["train"] < counts["usable"] and counts["train"] + counts["left_out_eval_test"] == counts["usable"]
    assert {r["record_id"] for r in rows} <= usable
    for row in rows:
        assert row["output"] == PLANS[row["query"]] and row["split"] == "train" and row["accepted_by"] == "gate"
    out = write_bank(rows, tmp_path / "bank@1.jsonl")
    loaded = load_bank(out)
    assert [r.id for r in loaded] == [r["id"] for r in rows] and len({r.id for r in loaded}) == len(rows)
    # the command writes the same file
    got = run_cli("spec", "examples", str(rs.path), "--out", tmp_path / "cli@1.jsonl", "--store", store_path,
                  "--json", check=True)
    assert json.loads(got.stdout)["train"] == counts["train"]
    assert (tmp_path / "cli@1.jsonl").read_bytes() == out.read_bytes()
