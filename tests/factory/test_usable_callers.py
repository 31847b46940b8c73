"""Review picking and preference samples ask the one usability answer (`Store.usable`, factory/usable.py).

A record the rules leave out (accepted at generation, then failed validation; rejected by a reviewer) is not
drawn by review's random:N and is never the chosen side of a teacher or judge pair; review's other modes and
ordinary stores pick what they picked before.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

import pyarrow.parquet as pq
import yaml

from mashbill.curation.review.select import review_items, select
from mashbill.curation.snapshots.snapshot import freeze
from mashbill.factory.records import Verdict
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.curation.conftest import add_records, lib  # noqa: F401 (fixture)
from tests.curation.preference.test_preference_judge_pairs import GOOD, WRONG, _judge
from tests.curation.preference.test_preference import _pairs, _store_samples, pref_spec, source  # noqa: F401 (fixture)
from tests.factory.synth_specs import judge_section

GOOD_ALT = [{"task": "Calculate 1847 * 23 + 519", "category": "precision_tools", "mcp_tool": "calculate",
             "mcp_args": {"expression": "1847 * 23 + 519"}}]
Q = "What is 1847 * 23 + 519?"
Q2 = "What is 17.5% of 4,360?"
GOOD2 = [{"task": "Compute 17.5% of 4360", "category": "precision_tools", "mcp_tool": "calculate",
          "mcp_args": {"expression": "4360 * 0.175"}}]


def _reject(store: Store, rid: str, dataset: str) -> None:
    when = datetime(2026, 1, 1, 12)
    store.write_review_decisions([{
        "record_id": rid, "reviewer": "ann", "status": "submitted", "decision": "reject", "corrected_output": None,
        "correction_valid": None, "correction_issues": None, "response_values": "{}", "responded_at": when,
        "pulled_at": when, "dataset": dataset}])


def _old_random(store: Store, rs, n: int) -> list[str]:
    """What random:N drew before it asked Store.usable: every record with output, by sha256(seed:id)."""
    ids = [r.id for r in store.records(spec_hash=rs.hash) if r.status != "failed"]
    seed = rs.spec.teacher.sampling.seed
    return sorted(ids, key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())[:n]


def _picked(store: Store, rs, mode: str, arg=None) -> list[str]:
    return [i.record.id for i in select(review_items(store, rs), mode, arg, seed=rs.spec.teacher.sampling.seed)]


def test_review_sampling_leaves_out_what_the_rules_leave_out(lib, tmp_path):
    rs = load_spec(lib.write("plan-src"))
    queries = [s["query"] for s in rs.seeds]
    failed_validation, review_rejected = queries[0], queries[1]
    with Store.open(tmp_path / "ordinary") as s:
        add_records(s, rs)
        n = len(s.records(spec_hash=rs.hash))
        for k in (1, 3, n):  # an ordinary store: random:N draws exactly what it drew before
            assert _picked(s, rs, "random", k) == _old_random(s, rs, k)
    with Store.open(tmp_path / "store") as s:
        recs = {r.input["query"]: r for r in add_records(s, rs, rejected_by_validation={failed_validation: "HR001"})}
        _reject(s, recs[review_rejected].id, "plan-src@1")
        left_out = {recs[failed_validation].id, recs[review_rejected].id}
        drawn = _picked(s, rs, "random", n)
        assert len(drawn) == n - 2 and not left_out & set(drawn)
        assert drawn == [i for i in _old_random(s, rs, n) if i not in left_out]  # the same order, less the two
        # the modes that look for trouble still pick rejected records, and `all` picks everything
        assert recs[failed_validation].id in _picked(s, rs, "flagged")
        assert set(_picked(s, rs, "all")) == {r.id for r in recs.values()}
    with Store.open(tmp_path / "unvalidated") as s:  # review may come before validation
        add_records(s, rs, validate=False)
        assert _picked(s, rs, "random", 2) == _old_random(s, rs, 2)


def _later_validation(store: Store, rs, rid: str) -> None:
    """A second validation pass that fails one sample on a non-rule finding (its latest mark fails)."""
    store.record_validation(spec_hash=rs.hash, source="test-pii", counts={},
                            results={rid: [Verdict("PII001", "reject", "an e-mail address", "validate")]})


def test_a_left_out_teacher_sample_is_never_chosen(lib, source):
    src, store, recs = source
    spec = pref_spec(lib, sources=["teacher"], samples_per_query=3)
    rs = load_spec(spec)
    with Store.open(store) as s:
        good, alt, wrong = _store_samples(s, rs, Q, [GOOD, GOOD_ALT, WRONG])
        steady, _ = _store_samples(s, rs, Q2, [GOOD2, WRONG])  # a query nobody touches: its pair stays
    res = freeze(spec, store_path=store, name="t", version="1", tokens=False)
    pair, kept = sorted(_pairs(res.path), key=lambda p: p["record_id"] == steady.id)
    assert kept["record_id"] == steady.id
    # the control case: one of the two passing samples against the failing one
    assert json.loads(pair["rejected"]) == WRONG and pair["record_id"] in (good.id, alt.id)
    first, other = (good, alt) if pair["record_id"] == good.id else (alt, good)
    with Store.open(store) as s:
        _reject(s, first.id, "plan-pref@1")  # a reviewer rejects the sample that was chosen
    res = freeze(spec, store_path=store, name="t", version="2", tokens=False)
    assert sorted((p["record_id"], json.loads(p["rejected"])) for p in _pairs(res.path)) == \
        sorted([(other.id, WRONG), (steady.id, WRONG)])
    assert res.manifest["preference"]["teacher_samples_left_out"] == 1
    with Store.open(store) as s:
        _later_validation(s, rs, other.id)  # accepted at generation, then failed validation
    res = freeze(spec, store_path=store, name="t", version="3", tokens=False)
    assert [p["record_id"] for p in _pairs(res.path)] == [steady.id]
    assert res.manifest["preference"]["teacher_queries_without_a_passing_sample"] == 1


def test_a_left_out_sample_the_judge_prefers_is_dropped(lib, source):
    src, store, recs = source
    spec = pref_spec(lib, sources=["judge"], samples_per_query=2, min_judge_margin=1.0)
    d = yaml.safe_load(spec.read_text())
    d["judge"] = judge_section()
    spec.write_text(yaml.safe_dump(d, allow_unicode=True))
    rs = load_spec(spec)
    with Store.open(store) as s:
        good, alt = _store_samples(s, rs, Q, [GOOD, GOOD_ALT])
        steady, wrong = _store_samples(s, rs, Q2, [GOOD2, WRONG])  # a pair nobody touches
        for x, y in ((good, alt), (steady, wrong)):
            _judge(s, rs, x, y, 5, 2)
            _judge(s, rs, y, x, 2, 5)
    res = freeze(spec, store_path=store, name="j", version="1", tokens=False)
    assert sorted(p["record_id"] for p in _pairs(res.path)) == sorted([good.id, steady.id])  # the control case
    with Store.open(store) as s:
        _reject(s, good.id, "plan-pref@1")
    res = freeze(spec, store_path=store, name="j", version="2", tokens=False)
    assert [p["record_id"] for p in _pairs(res.path)] == [steady.id]
    codes = [c for r in pq.read_table(res.path / "rejects.parquet").to_pylist() for c in r["codes"]
             if c.startswith("PREF")]
    assert codes == ["PREF009"]

