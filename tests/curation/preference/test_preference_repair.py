"""Preference pairs from the teacher's real mistakes (source `repair`): a record accepted after a repair gives its
rejected attempt as `rejected` and the accepted repair as `chosen`; a chosen side that `Store.usable` leaves out
never makes a pair."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from mashbill.curation.snapshots.snapshot import freeze
from mashbill.factory.records import Verdict
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.curation.conftest import add_records, calc, one
from tests.curation.preference.test_preference import pref_spec
from tests.curation.selection.test_select import decide

CALC_Q = "What is 1847 * 23 + 519?"
POEM_Q = "Write a short poem about autumn in Hamburg."
DATE_Q = "What day of the week will 25 December 2026 be?"
TETRIS_Q = "Write a Tetris game in Python with pygame."


def _chain(rec, wrong, codes):
    """The attempt rows factory.generate.repair writes for a record accepted at its second attempt."""
    first = {"record_id": rec.id, "attempt": 1, "sample": 0, "repairs": None, "status": "rejected", "output": wrong,
             "raw": json.dumps(wrong), "verdicts": [{"code": c, "severity": "reject", "detail": "test", "stage": "generate"}
                                                    for c in codes], "feedback": None}
    second = {"record_id": rec.id, "attempt": 2, "sample": 0, "repairs": 1, "status": "accepted", "output": rec.output,
              "raw": json.dumps(rec.output), "verdicts": [], "feedback": "Your answer was rejected (repair 1 of 2)."}
    return [first, second]


@pytest.fixture
def repaired(lib, tmp_path):
    spec = lib.write("plan-src")
    rs = load_spec(spec)
    store_path = tmp_path / "store"
    with Store.open(store_path) as s:
        recs = {r.input["query"]: r for r in add_records(s, rs, rejected_by_validation={DATE_Q: "DUP001"})}
        rows = (_chain(recs[CALC_Q], one("general", f"Answer: {CALC_Q}"), ["HR001"])
                + _chain(recs[POEM_Q], calc("Compute a poem", "1 + 1"), ["ARG001", "DRIFT001"])
                + _chain(recs[DATE_Q], one("general", f"Answer: {DATE_Q}"), ["HR001"])  # left out by validation
                + _chain(recs[TETRIS_Q], one("code_reviewer", "Implement Tetris"), ["HR006"]))  # a reviewer rejects it
        run = s.begin_run(spec_name=rs.spec.name, spec_version=1, spec_hash=rs.hash, kind="plan", backend="x",
                          model="m", model_sha256=None, model_info=None, sampling={})
        s.write_batch(run, [], {}, [], rows)
        decide(s, recs[TETRIS_Q].id, "ann", "reject")
    return rs, store_path, recs


def test_a_repaired_record_gives_a_pair_of_its_real_mistake(lib, repaired):
    src, store, recs = repaired
    res = freeze(pref_spec(lib, sources=["repair"]), store_path=store, name="rp", version="1", tokens=False)
    pairs = [r for s in ("train", "eval", "test") for r in pq.read_table(res.path / "data" / f"{s}.parquet").to_pylist()
             if r["row_kind"] == "preference"]
    by_record = {p["record_id"]: p for p in pairs}
    assert set(by_record) == {recs[CALC_Q].id, recs[POEM_Q].id}
    calc_pair, poem_pair = by_record[recs[CALC_Q].id], by_record[recs[POEM_Q].id]
    assert calc_pair["source"] == "repair" and calc_pair["rule"] == "HR001" and calc_pair["rejected_codes"] == ["HR001"]
    assert json.loads(calc_pair["completion"]) == recs[CALC_Q].output
    assert json.loads(calc_pair["rejected"]) == one("general", f"Answer: {CALC_Q}")
    assert poem_pair["rejected_codes"] == ["ARG001", "DRIFT001"]
    assert res.manifest["preference"]["pairs"]["repair"] == 2
    assert res.manifest["preference"]["repaired_records"] == 2
    # the chosen side of every pair is usable, by the one answer; the two left out are not
    with Store.open(store, read_only=True) as s:
        usable = {st.record.id: st.usability.usable for st in s.usable(src.hash)}
    assert all(usable[rid] for rid in by_record)
    assert not usable[recs[DATE_Q].id] and not usable[recs[TETRIS_Q].id]


def test_no_repair_pairs_unless_the_source_is_asked_for(lib, repaired):
    _, store, _ = repaired
    res = freeze(pref_spec(lib, sources=["rule"]), store_path=store, name="r", version="1", tokens=False)
    assert "repair" not in res.manifest["preference"]["pairs"]
