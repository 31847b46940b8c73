"""The Great Expectations suite per kind, run on a records frame."""

from __future__ import annotations

from mashbill.validators.data.expectations import run_expectations, suite_for


def _rows(n, **over):
    rows = []
    for i in range(n):
        r = {"key": f"r{i}", "query": f"query number {i}", "target_chars": 40, "lang": "de" if i % 2 else "en",
             "n_tasks": 1 + i % 3, "has_precision": float(i % 3 == 0), "has_research": float(i % 4 == 0),
             "single_task": float(i % 3 == 0), "total_tokens": 2600}
        r.update({k: (v(i) if callable(v) else v) for k, v in over.items()})
        rows.append(r)
    return rows


def test_plan_suite_passes_and_fails():
    ok = run_expectations(_rows(40), "plan", max_seq_len=4096)
    assert ok["success"] and ok["failed"] == 0 and ok["evaluated"] == len(suite_for(
        "plan", set(_rows(1)[0]) | {"is_de"}, max_seq_len=4096))
    bad = run_expectations(_rows(40, n_tasks=lambda i: 6 if i == 3 else 2, lang="en", has_precision=0.0,
                                 query=lambda i: None if i == 0 else "q" * 20),
                           "plan", max_seq_len=1536)
    assert not bad["success"]
    failed = {r["why"] for r in bad["results"] if not r["success"]}
    assert failed == {"plans have 1-4 tasks", "both languages are represented (German share 10-90%)",
                      "5-80% of plans use a precision tool", "every record has a query",
                      "every example fits max_seq_len 1536"}
    tasks = next(r for r in bad["results"] if r["why"] == "plans have 1-4 tasks")
    assert tasks["unexpected_count"] == 1 and tasks["unexpected_sample"] == ["6"]


def test_complexity_labels():
    rows = [{"key": str(i), "query": "q" * 10, "label": "moderate" if i else "huge"} for i in range(30)]
    res = run_expectations(rows, "complexity")
    failed = {r["why"] for r in res["results"] if not r["success"]}
    assert failed == {"complexity labels are the four classes", "'moderate' is at most 90% of the labels"}
