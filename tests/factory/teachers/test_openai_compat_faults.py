"""A run against a server that injects faults into 20% of the records, then a re-run.

Every requested input must end accepted, rejected with a reason code, or failed with its last
error; requested = accepted + rejected + failed (checked against the store); the re-run asks for
exactly the failed ones and nothing else.
"""

from __future__ import annotations

from teacher_helpers import records, sql, tag

from mashbill.cli.make.generate import run_generate

N = 100
# Every fifth record (20%) gets one fault plan; "always" faults outlast the retries of the first run
# (3 attempts) and clear on the 4th attempt, i.e. in the re-run.
PLANS = ["500", "429", "hang", "close", "nonjson", "500-always", "close-always", "hang-always", "schema", "truncate"]
EXPECT = {  # plan -> (status of run 1, reject codes, error text in the last attempt of a failed record)
    "500": ("accepted", set(), None), "429": ("accepted", set(), None), "hang": ("accepted", set(), None),
    "close": ("accepted", set(), None), "nonjson": ("accepted", set(), None),
    "500-always": ("failed", {"TEACHER001"}, "HTTP 500"), "close-always": ("failed", {"TEACHER001"}, "connection error"),
    "hang-always": ("failed", {"TEACHER001"}, "timeout after"),
    "schema": ("rejected", {"SCHEMA001"}, None), "truncate": ("rejected", {"TRUNC001"}, None),
}


def plan_for(i: int) -> str | None:
    return PLANS[(i // 5) % len(PLANS)] if i % 5 == 0 else None


def schedule(key: str, attempt: int) -> str | None:
    i = tag(key)
    plan = plan_for(i) if i is not None else None
    if plan is None:
        return None
    fault, _, always = plan.partition("-")
    if always:
        return fault if attempt <= 3 else None
    if fault in ("schema", "truncate"):
        return fault  # the teacher answered; the answer is bad every time
    return fault if attempt == 1 else None


def test_faults_are_accounted_for_and_rerun_retries_exactly_the_failed(write_spec, fault_server, tmp_path):
    server = fault_server(schedule=schedule, hang_s=5.0, retry_after="1")
    spec = write_spec(n=N, runtime={"timeout_s": 2.0, "max_retries": 2, "concurrency": 4, "batch_size": 5})
    store = tmp_path / "store"

    first = run_generate(str(spec), store, progress=False, base_url=server.url)

    # the identity, from the summary and from the store
    assert first.requested == N
    assert first.accepted + first.rejected + first.failed == N
    run = sql(store, "SELECT requested, accepted, rejected, failed, status, calls, retries FROM runs")
    assert len(run) == 1
    requested, accepted, rejected, failed, status, calls, retries = run[0]
    assert status == "completed"
    assert requested == accepted + rejected + failed == N
    by_status = dict(sql(store, "SELECT status, count(*) FROM records GROUP BY ALL"))
    assert by_status == {k: v for k, v in {"accepted": accepted, "rejected": rejected, "failed": failed}.items() if v}
    assert calls == sql(store, "SELECT count(*) FROM teacher_calls")[0][0]
    assert retries == calls - N

    # each record ends as its fault plan says
    rows = sql(store, "SELECT r.record_id, r.status, json_extract_string(r.input, '$.query'), "
                      "list(v.code ORDER BY v.code), any_value(v.detail) FILTER (WHERE v.code = 'TEACHER001') "
                      "FROM records r LEFT JOIN verdicts v USING (record_id) GROUP BY ALL")
    failed_ids = set()
    for rid, status, query, codes, teacher_detail in rows:
        plan = plan_for(tag(query))
        expected_status, expected_codes, error = EXPECT.get(plan, ("accepted", set(), None))
        assert status == expected_status, (query, plan, status, codes)
        assert expected_codes <= set(c for c in codes if c), (query, plan, codes)
        if status == "failed":
            failed_ids.add(rid)
            # every attempt is stored with its error, and the record's verdict carries the last one
            attempts = sql(store, "SELECT attempt, error FROM teacher_calls WHERE record_id = ? ORDER BY attempt", [rid])
            assert [a for a, _ in attempts] == [1, 2, 3]
            assert all(e for _, e in attempts)
            assert error in attempts[-1][1]
            assert attempts[-1][1][:100] in teacher_detail
        elif plan in ("500", "429", "hang", "close", "nonjson"):
            attempts = sql(store, "SELECT error FROM teacher_calls WHERE record_id = ? ORDER BY attempt", [rid])
            assert attempts[0][0] and attempts[-1][0] is None, (plan, attempts)
    assert len(failed_ids) == 6 and failed == 6 and rejected == 4

    # the 429 was answered with Retry-After; the same key came back after it
    keys_429 = [k for k, attempt, fault in server.log if fault == "429"]
    assert keys_429 and all(any(k2 == k and a == 2 for k2, a, _ in server.log) for k in keys_429)

    # the re-run asks for exactly the failed records, which now succeed
    second = run_generate(str(spec), store, progress=False, base_url=server.url)
    assert second.requested == len(failed_ids) == second.accepted + second.rejected + second.failed
    run2 = sql(store, "SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")[0][0]
    asked = {r[0] for r in sql(store, "SELECT DISTINCT record_id FROM teacher_calls WHERE run_id = ?", [run2])}
    assert asked == failed_ids
    final = records(store)
    assert len(final) == N
    assert {s for s, _, _ in final.values()} == {"accepted", "rejected"}
    assert sum(s == "rejected" for s, _, _ in final.values()) == 4
    # a failed record is replaced, never stored twice; its verdicts are the new ones
    assert sql(store, "SELECT count(*) FROM verdicts WHERE code = 'TEACHER001'")[0][0] == 0


def test_credentials_in_the_base_url_reach_the_server_but_never_the_store(write_spec, fault_server, tmp_path):
    """Case 12: `--base-url http://user:key@host/v1` works, and the run's model_info shows `***@` instead."""
    server = fault_server()
    spec = write_spec(n=3)
    url = server.url.replace("http://", "http://user:sk-SECRET123@")
    summary = run_generate(str(spec), tmp_path / "store", progress=False, base_url=url)
    assert summary.accepted == 3
    [(info, args)] = sql(tmp_path / "store", "SELECT CAST(model_info AS VARCHAR), CAST(args AS VARCHAR) FROM runs")
    assert "sk-SECRET123" not in info and "user:" not in info and "sk-SECRET123" not in (args or "")
    assert server.url.replace("http://", "http://***@") in info
