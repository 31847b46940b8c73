"""Selection honours validation and human review decisions (the review_decisions table, issue 6)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pyarrow.parquet as pq
import pytest

from mashbill.curation.selection.select import select_records
from mashbill.curation.snapshots.pull import load_snapshot
from mashbill.curation.snapshots.snapshot import freeze
from mashbill.errors import MashbillError
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.curation.conftest import SEEDS, add_records

T0 = datetime(2026, 1, 1, 12, 0, 0)


def decide(store, record_id, reviewer, decision, *, corrected=None, valid=None, status="submitted", minutes=0):
    when = T0 + timedelta(minutes=minutes)
    store.con.execute("INSERT INTO review_decisions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                      [record_id, reviewer, status, decision, None if corrected is None else json.dumps(corrected),
                       valid, None, json.dumps({"decision": decision}), when, when, "plan-r@1"])


@pytest.fixture
def reviewed(lib, tmp_path):
    spec = lib.write("plan-r", seeds=SEEDS[:8])
    rs = load_spec(spec)
    with Store.open(tmp_path / "store") as store:
        recs = {r.input["query"]: r for r in add_records(store, rs, rejected_by_validation={
            "Was ist 7 hoch 5 minus 1000?": "HR001"})}
        q = list(recs)
        decide(store, recs[q[0]].id, "ann", "reject")  # human-rejected
        fixed = [{"task": "Compute it", "category": "precision_tools", "mcp_tool": "calculate",
                  "mcp_args": {"expression": "7**5-1000"}}]
        decide(store, recs[q[1]].id, "ann", "reject", corrected=fixed, valid=True)  # validation-rejected, corrected
        decide(store, recs[q[2]].id, "ann", "accept")
        decide(store, recs[q[2]].id, "bob", "reject")  # disagreement
        decide(store, recs[q[3]].id, "ann", "reject", corrected=[{"task": "x", "category": "math"}], valid=False)
        decide(store, recs[q[4]].id, "ann", "accept")
        decide(store, recs[q[5]].id, "ann", "reject", status="draft")  # not submitted: no decision
        decide(store, recs[q[6]].id, "ann", "reject", minutes=0)
        decide(store, recs[q[6]].id, "ann", "accept", minutes=5)  # the reviewer changed their mind: latest wins
    return spec, tmp_path / "store", recs, q, fixed


def test_review_decisions_shape_the_selection(reviewed):
    spec, store, recs, q, fixed = reviewed
    rs = load_spec(spec)
    with Store.open(store, read_only=True) as s:
        sel = select_records(s, rs)
    chosen = {c.record.input["query"]: c for c in sel.candidates}
    out = {x.query: x for x in sel.excluded}
    assert out[q[0]].codes == ("REVIEW001",)
    assert chosen[q[1]].output == fixed and chosen[q[1]].origin == "review-correction"  # correction wins over HR001
    assert out[q[2]].codes == ("REVIEW003",)
    # an invalid correction is ignored; the reviewer's reject stands
    assert out[q[3]].codes == ("REVIEW001",)
    assert chosen[q[4]].review == "accepted" and chosen[q[5]].review is None and chosen[q[6]].review == "accepted"
    assert chosen[q[7]].review is None
    assert sel.review == {"require_review": False, "records": 8, "reviewed": 6, "accepted": 2, "corrected": 1,
                          "rejected": 2, "disagreements": 1, "invalid_corrections": 1,
                          "accepted_but_failed_validation": 0, "unreviewed": 2}
    assert [r.id for r, _ in sel.corrections] == [recs[q[1]].id]


def test_freeze_writes_corrections_and_requires_review_when_the_spec_says_so(reviewed, lib):
    spec, store, recs, q, fixed = reviewed
    res = freeze(spec, store_path=store, name="r", version="1", tokens=False)
    ds = load_snapshot(res.path, "messages")
    targets = {m["messages"][1]["content"]: json.loads(m["messages"][2]["content"]) for s in ds for m in ds[s]}
    assert targets[q[1]] == fixed  # the corrected plan is what gets trained
    assert q[0] not in targets and q[2] not in targets and q[3] not in targets
    assert len(targets) == 5
    rows = [r for s in ("train", "eval", "test") for r in pq.read_table(res.path / "data" / f"{s}.parquet").to_pylist()]
    assert {r["query"]: r["source"] for r in rows}[q[1]] == "review-correction"
    assert res.manifest["review"]["corrected"] == 1 and res.manifest["rejects"]["by_code"]["REVIEW001"] == 2
    # the same records under a spec that requires review: only reviewed-accepted or corrected ones.
    # Curation settings are not part of the spec hash, so the stored records (and decisions) still apply.
    strict = lib.write("plan-r", seeds=SEEDS[:8], curation={"require_review": True})
    assert load_spec(strict).hash == recs[q[1]].spec.hash
    res2 = freeze(strict, store_path=store, name="r-strict", version="1", tokens=False)
    kept = {r["query"] for s in ("train", "eval", "test") for r in pq.read_table(
        res2.path / "data" / f"{s}.parquet").to_pylist()}
    assert kept == {q[1], q[4], q[6]}  # corrected, accepted, accepted after a change of mind
    assert res2.manifest["rejects"]["by_code"]["REVIEW002"] == 2  # the draft-only and the unreviewed record


def test_a_spec_without_records_in_the_store_is_refused(lib, tmp_path):
    spec = lib.write("plan-s", seeds=SEEDS[:2])
    with Store.open(tmp_path / "store") as s:
        with pytest.raises(MashbillError, match="has no records of plan-s@1"):
            select_records(s, load_spec(spec))
