"""One answer to "is this record usable?" (factory.usable through Store.usable), on a real store."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from mashbill.curation.reports.run_stats import review_progress
from mashbill.factory.records import Record, SpecRef, Verdict
from mashbill.factory.store import Store

REF = SpecRef("u", 1, "h" * 64)
T0 = datetime(2026, 1, 1, 12)
PLAN = [{"task": "Answer it", "category": "general"}]
FIXED = [{"task": "Answer it better", "category": "general"}]


def _rec(name: str, status: str = "accepted") -> Record:
    return Record(f"r-{name}", "plan", {"query": name}, PLAN, None, REF, status,
                  ({"role": "user", "content": name},), {})


def _review(rid, reviewer, decision, *, corrected=None, valid=None, minutes=0, status="submitted") -> dict:
    when = T0 + timedelta(minutes=minutes)
    return {"record_id": rid, "reviewer": reviewer, "status": status, "decision": decision,
            "corrected_output": None if corrected is None else json.dumps(corrected), "correction_valid": valid,
            "correction_issues": None, "response_values": "{}", "responded_at": when, "pulled_at": when,
            "dataset": "u@1"}


@pytest.fixture
def store(tmp_path):
    names = ["plain", "val_then_fail", "fail_then_pass", "gen_rejected_review_accepted", "gen_rejected_corrected",
             "review_rejected", "disagree", "mind_changed", "judge_rejected", "judge_rejected_review_accepted",
             "bad_correction", "draft_only"]
    recs = [_rec(n, "rejected" if n.startswith("gen_rejected") else "accepted") for n in names]
    with Store.open(tmp_path / "store") as s:
        run = s.begin_run(spec_name="u", spec_version=1, spec_hash=REF.hash, kind="plan", backend="test",
                          model="m", model_sha256=None, model_info=None, sampling={})
        s.write_batch(run, recs, {r.id: [Verdict("HR001", "reject", "generation rule")] for r in recs
                                  if r.status == "rejected"}, [])
        accepted = [r.id for r in recs if r.status == "accepted"]
        # pass 1: everything passes but fail_then_pass; pass 2 (later) flips those two records' marks
        s.record_validation(spec_hash=REF.hash, source="store", counts={}, results={
            rid: [Verdict("HR002", "reject", "old finding", "validate")] if rid == "r-fail_then_pass" else []
            for rid in accepted})
        s.record_validation(spec_hash=REF.hash, source="store", counts={}, results={
            "r-val_then_fail": [Verdict("HR003", "reject", "new finding", "validate")], "r-fail_then_pass": []})
        s.add_verdicts(run, [(f"r-{n}", Verdict("JUDGE001", "reject", "low score", "judge"))
                             for n in ("judge_rejected", "judge_rejected_review_accepted")])
        s.write_review_decisions([
            _review("r-gen_rejected_review_accepted", "ann", "accept"),
            _review("r-gen_rejected_corrected", "ann", "reject", corrected=FIXED, valid=True),
            _review("r-review_rejected", "ann", "reject"),
            _review("r-disagree", "ann", "accept"), _review("r-disagree", "bob", "reject"),
            _review("r-mind_changed", "ann", "reject", minutes=0),
            _review("r-judge_rejected_review_accepted", "ann", "accept"),
            _review("r-bad_correction", "ann", "accept", corrected=[{"task": "x"}], valid=False),
            _review("r-draft_only", "ann", "reject", status="draft"),
        ])
        # a reviewer's later answer replaces their earlier row (a re-pull), so 'mind_changed' ends accepted
        s.write_review_decisions([_review("r-mind_changed", "ann", "accept", minutes=5)])
    return tmp_path / "store"


def _answers(store, **kw) -> dict[str, tuple]:
    with Store.open(store, read_only=True) as s:
        return {st.record.id[2:]: (st.usability.usable, st.usability.stage, st.usability.codes)
                for st in s.usable(REF.hash, **kw)}


def test_each_record_gets_one_answer(store):
    got = _answers(store)
    assert got == {
        "plain": (True, None, ()),
        "val_then_fail": (False, "validate", ("HR003",)),  # the latest validation mark counts
        "fail_then_pass": (True, None, ()),  # a superseded failing mark does not
        "gen_rejected_review_accepted": (False, "generate", ("HR001",)),  # an accept does not undo a reject
        "gen_rejected_corrected": (True, None, ()),  # a valid correction does: it is what gets trained
        "review_rejected": (False, "review", ("REVIEW001",)),
        "disagree": (False, "review", ("REVIEW003",)),
        "mind_changed": (True, None, ()),
        "judge_rejected": (False, "judge", ("JUDGE001",)),
        "judge_rejected_review_accepted": (True, None, ()),  # a reviewer's accept outranks the judge
        "bad_correction": (True, None, ()),  # the invalid correction is ignored, the accept stands
        "draft_only": (True, None, ()),  # a draft is no decision
    }


def test_required_review_leaves_out_undecided_records(store):
    got = _answers(store, require_review=True)
    assert {k for k, v in got.items() if v[2] == ("REVIEW002",)} == {"plain", "fail_then_pass", "draft_only"}
    assert got["mind_changed"][0] and got["gen_rejected_corrected"][0]


def test_a_correction_the_rules_refuse_now_is_ignored(store):
    got = _answers(store, recheck_for=lambda rec: (lambda value: False))
    assert got["gen_rejected_corrected"] == (False, "generate", ("HR001",))


def test_review_progress_counts_what_selection_decides(store):
    with Store.open(store, read_only=True) as s:
        states = s.usable(REF.hash)
        progress = review_progress(s, [REF.hash])
    decided = [st.decision.state for st in states if st.decision.state != "none"]
    assert progress == {"records": 12, "reviewed": len(decided), "accepted": decided.count("accepted"),
                        "corrected": decided.count("corrected"), "rejected": decided.count("rejected"),
                        "disagreements": decided.count("disagreement"), "unreviewed": 12 - len(decided)}
    assert progress["accepted"] == 4 and progress["corrected"] == 1 and progress["disagreements"] == 1


def test_records_left_out_are_decided_in_columns_as_record_by_record(tmp_path):
    """`Store.plain_left_out` (the freeze's columnar path for rejects) gives each record it decides the stage, codes,
    detail, query and output text that `record_states` and the selection give, and hands back every record it may
    not decide (a review row, never validated, usable, judged)."""
    from mashbill.curation.selection.select import _q, _text

    long = "Länge überschritten: " + "ü\"\\\n" * 90  # past the 300 characters a detail keeps, with escapes
    out = {"tasks": [{"task": "ü \"q\" \\ \n\t\u2028", "n": 1.5e-07}], "b": None, "a": [1, True]}
    cases = {  # name: (status, input, output, raw, verdicts)
        "gen_codes": ("rejected", {"query": "q1"}, None, "{\"tasks\": [", [
            Verdict("TRUNC001", "reject", "cut at length"), Verdict("PARSE001", "reject", "not JSON"),
            Verdict("STYLE01", "penalty", "a penalty is no code"),
            Verdict("HR002", "reject", "validate reject", "validate")]),
        "gen_bare": ("failed", {"query": "q2 ü"}, None, None, []),
        "gen_odd_query": ("rejected", {"query": 5}, out, None, [Verdict("HR001", "reject", "x")]),
        "val_two": ("accepted", {"query": "q3 \"quoted\" \\ \n"}, out, None, [
            Verdict("ARG001", "reject", "b second"), Verdict("ARG001", "reject", "a first"),
            Verdict("ARG002", "reject", long), Verdict("CPLX006", "flag", "a flag is no code")]),
        "val_penalty_only": ("accepted", {"other": "no query"}, [1, 2], None, [Verdict("P1", "penalty", "small")]),
        "val_reviewed": ("accepted", {"query": "q4"}, PLAN, None, [Verdict("HR001", "reject", "y")]),
        "gen_reviewed": ("rejected", {"query": "q5"}, PLAN, None, [Verdict("HR001", "reject", "z")]),
        "never_validated": ("accepted", {"query": "q6"}, PLAN, None, []),
        "usable": ("accepted", {"query": "q7"}, PLAN, None, []),
        "judged": ("accepted", {"query": "q8"}, PLAN, None, []),
    }
    recs = [Record(f"r-{n}", "plan", inp, output, raw, REF, status, ({"role": "user", "content": n},), {})
            for n, (status, inp, output, raw, _) in cases.items()]
    with Store.open(tmp_path / "store") as s:
        run = s.begin_run(spec_name="u", spec_version=1, spec_hash=REF.hash, kind="plan", backend="test",
                          model="m", model_sha256=None, model_info=None, sampling={})
        s.write_batch(run, recs, {f"r-{n}": [v for v in c[4] if v.stage != "validate"] for n, c in cases.items()}, [])
        validated = [n for n, c in cases.items() if c[0] == "accepted" and n != "never_validated"]
        s.record_validation(spec_hash=REF.hash, source="store", counts={}, results={
            f"r-{n}": [v for v in cases[n][4] if v.stage == "validate" or cases[n][0] == "accepted"]
            for n in validated})
        s.record_validation(spec_hash=REF.hash, source="store", counts={}, results={  # (validated with --all)
            "r-gen_codes": [v for v in cases["gen_codes"][4] if v.stage == "validate"]})
        s.add_verdicts(run, [("r-judged", Verdict("JUDGE001", "reject", "low score", "judge"))])
        s.write_review_decisions([_review("r-val_reviewed", "ann", "accept"),
                                  _review("r-gen_reviewed", "ann", "reject")])
    with Store.open(tmp_path / "store", read_only=True) as s:
        ids = sorted(r.id for r in recs)
        rows, rest = s.plain_left_out(REF.hash, ids)
        states = {st.record.id: st for st in s.usable(REF.hash)}
    decided = {row[0]: row[1:] for row in rows}
    assert [row[0] for row in rows] == sorted(decided)  # in record id order
    assert sorted(decided) == sorted(f"r-{n}" for n in ("gen_codes", "gen_bare", "gen_odd_query", "val_two"))
    assert rest == [i for i in ids if i not in decided]
    for rid, (stage, codes, detail, query, text) in decided.items():
        st = states[rid]
        u = st.usability
        assert not u.usable and not st.reviewed
        assert (stage, codes, detail) == (u.stage, u.codes, u.detail), rid
        assert (query, text) == (_q(st.record), _text(st.record.output, st.record.raw)), rid
    assert decided["r-gen_codes"][1] == ("PARSE001", "TRUNC001")
    assert decided["r-gen_bare"][1:3] == (("GEN000",), "status failed")
    assert decided["r-val_two"][1] == ("ARG001", "ARG001", "ARG002")
    assert decided["r-val_two"][2].startswith("a first; b second; Länge") and len(decided["r-val_two"][2]) == 300
    assert states["r-val_penalty_only"].usability.usable  # a penalty fails no validation
    assert decided["r-gen_odd_query"][3] is None and decided["r-gen_codes"][4] == "{\"tasks\": ["
