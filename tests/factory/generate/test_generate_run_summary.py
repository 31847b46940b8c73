"""The run summary reads its counts, tokens and teacher seconds from the run's accounting (one set of counters):
records there, probes apart, and the accounting's snapshot and cost over both."""

from __future__ import annotations

from types import SimpleNamespace

from mashbill.factory.generate.accounting import Accounting
from mashbill.factory.generate.generate import RunSummary
from mashbill.factory.teachers.base import TeacherRequest, TeacherResult, attempt

TEACHER = SimpleNamespace(backend="openai", model="m")


def _result(rid: str, *calls: tuple) -> TeacherResult:
    req = TeacherRequest(rid, ({"role": "user", "content": rid},), None, {"max_tokens": 8})
    attempts = [attempt(req, TEACHER, lat, tin, cached, tout, "stop", err, n=i + 1)
                for i, (lat, tin, cached, tout, err) in enumerate(calls)]
    return TeacherResult(req, None if attempts[-1].error else "{}", "stop", attempts)


def test_summary_counts_records_and_the_accounting_adds_probes():
    acct = Accounting(requested=3, prices={"input_per_1m": 1e6, "output_per_1m": 2e6})
    summary = RunSummary("r", "s@1", "h", "store", requested=3, accounting=acct)
    acct.observe(_result("probe", (0.5, 100, 0, 10, None)), None)
    acct.observe(_result("a", (0.25, 7, 2, 3, "HTTP 503"), (0.25, 7, 2, 3, None)), "accepted")
    acct.observe(_result("b", (1.0, 5, 0, 4, None)), "rejected")
    acct.observe(_result("c", (2.0, 0, 0, 0, "timeout")), "failed")
    assert (summary.accepted, summary.rejected, summary.failed) == (1, 1, 1)
    assert (summary.tokens_in, summary.tokens_cached, summary.tokens_out) == (19, 4, 10)  # records only
    assert summary.teacher_s == 3.5
    snap = acct.snapshot(10.0)
    assert (snap["tokens_in"], snap["tokens_cached"], snap["tokens_out"]) == (119, 4, 20)  # probes cost too
    assert snap["teacher_s"] == 4.0 and snap["calls"] == 5 and snap["probe_calls"] == 1 and snap["errors"] == 2
    assert snap["cost"] == (119 - 4) + 4 + 2 * 20
    d = summary.as_dict()
    assert d["accepted"] == 1 and d["tokens_in"] == 19 and d["calls"] == 5 and d["teacher_s"] == 3.5
    # each attempt is the teacher_calls row it will be stored as, numbered in order
    assert [c.attempt for c in _result("x", (0.1, 1, 0, 1, "e"), (0.1, 1, 0, 1, None)).attempts] == [1, 2]


def test_reject_codes_count_records_and_verdicts_apart():
    """Issue 26: "rejected 51 (... PLAN011: 2 ...)" was 2 verdicts on 1 record. Codes count records; the
    verdicts are counted beside them."""
    from mashbill.cli._common import code_counts
    from mashbill.factory.generate.generate import _count
    from mashbill.factory.records import Verdict

    summary = RunSummary("r", "s@1", "h", "store", requested=2)
    _count(summary, [Verdict("PLAN011", "reject", "task 1 cut"), Verdict("PLAN011", "reject", "task 2 cut"),
                     Verdict("PLAN003", "reject", "x"), Verdict("DRIFT001", "warn", "w")])
    _count(summary, [Verdict("PLAN003", "reject", "y")])
    d = summary.as_dict()
    assert d["reject_codes"] == {"PLAN003": 2, "PLAN011": 1}
    assert d["reject_verdicts"] == {"PLAN003": 2, "PLAN011": 2}
    assert code_counts(d["reject_codes"], d["reject_verdicts"]) == "PLAN003 2, PLAN011 1 (2 verdicts)"
