"""Guards, each driven through a real run against the fault server: preflight gold probes, the rolling
accept-rate monitor, periodic probe re-checks, the latency watchdog and the circuit breaker.
Each must leave its event in the store and (when it stops the run) a clear status and reason."""

from __future__ import annotations

import pytest
from teacher_helpers import loads, run_cli, sql, tag

from mashbill.cli.make.generate import run_generate
from mashbill.factory.generate.guards import plan_tasks, probe_verdict
from mashbill.specs.model import Probe

PROBES = [{"query": "q900 Tell me about Docker volumes.", "categories": ["general", "technical_support"]},
          {"query": "q901 What is 17% of 2840?", "tools": ["calculate"]}]


def events(store, kind=None):
    rows = sql(store, "SELECT kind, CAST(detail AS VARCHAR) FROM events ORDER BY ts")
    return [(k, loads(d)) for k, d in rows if kind is None or k == kind]


def test_preflight_probes_below_threshold_abort_before_bulk_work(write_spec, fault_server, tmp_path):
    server = fault_server()  # answers category "general" and never calls a tool: 1 of 2 probes pass
    spec = write_spec(n=10, guards={"preflight": {"probes": PROBES, "min_pass_rate": 0.6}})
    store = tmp_path / "store"
    proc = run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress")
    assert proc.returncode == 2
    assert "preflight: 50% of 2 gold probes passed" in proc.stderr and "Traceback" not in proc.stderr
    assert sql(store, "SELECT status, requested, accepted + rejected + failed FROM runs") == [("aborted_preflight", 10, 0)]
    assert sql(store, "SELECT count(*) FROM records")[0][0] == 0
    [(_, detail)] = events(store, "preflight_failed")
    assert detail["pass_rate"] == 0.5 and detail["min_pass_rate"] == 0.6
    outcomes = {p["query"][:4]: p for p in detail["probes"]}
    assert outcomes["q900"]["pass"] and not outcomes["q901"]["pass"]
    assert "expected a tool in ['calculate']" in outcomes["q901"]["why"]
    assert all(tag(key) >= 900 for key, _, _ in server.log if tag(key) is not None)  # no record was requested


def test_preflight_probes_at_threshold_let_the_run_go(write_spec, fault_server, tmp_path):
    server = fault_server()
    spec = write_spec(n=10, guards={"preflight": {"probes": PROBES, "min_pass_rate": 0.5}})
    store = tmp_path / "store"
    summary = run_generate(str(spec), store, progress=False, base_url=server.url)
    assert summary.status == "completed" and summary.accepted == 10
    assert [k for k, _ in events(store) if k.startswith("preflight")] == ["preflight_passed"]
    stats = loads(sql(store, "SELECT stats FROM runs")[0][0])
    assert stats["probe_calls"] == 2 and stats["calls"] == 12


def test_accept_rate_monitor_stops_the_run(write_spec, fault_server, tmp_path):
    server = fault_server(schedule=lambda key, attempt: "schema" if tag(key) is not None and tag(key) % 3 else None)
    spec = write_spec(n=60, guards={"accept_rate": {"window": 10, "min_rate": 0.5}},
                      runtime={"concurrency": 1, "batch_size": 5})
    store = tmp_path / "store"
    proc = run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress")
    assert proc.returncode == 3 and "accept rate" in proc.stderr
    status, requested, done = sql(store, "SELECT status, requested, accepted + rejected + failed FROM runs")[0]
    assert status == "aborted" and requested == 60 and 10 <= done < 60
    assert done == sql(store, "SELECT count(*) FROM records")[0][0]  # every answered record is stored
    [(_, detail)] = events(store, "accept_rate_low")
    assert detail["rate"] < 0.5 and detail["window"] == 10
    assert "below guards.accept_rate.min_rate" in events(store, "stopped")[0][1]["reason"]


def test_periodic_probe_recheck_stops_a_teacher_that_degrades(write_spec, fault_server, tmp_path):
    # the probes pass at the preflight, then the server starts answering them wrongly
    def schedule(key, attempt):
        return "schema" if tag(key) == 900 and attempt > 1 else None

    server = fault_server(schedule=schedule)
    spec = write_spec(n=40, guards={"preflight": {"probes": PROBES[:1], "min_pass_rate": 1.0},
                                    "probe_recheck": {"every": 10, "min_pass_rate": 1.0}})
    store = tmp_path / "store"
    summary = run_generate(str(spec), store, progress=False, base_url=server.url)
    assert summary.status == "aborted" and "probe re-check at" in summary.stop_reason
    kinds = [k for k, _ in events(store)]
    assert kinds[0] == "preflight_passed" and "probe_recheck_failed" in kinds and kinds[-1] == "stopped"
    [(_, detail)] = events(store, "probe_recheck_failed")
    assert detail["at_accepted"] >= 10 and detail["probes"][0]["why"].startswith("rejected: SCHEMA001")
    assert 10 <= summary.accepted < 40


@pytest.mark.parametrize("action", ["warn", "stop"])
def test_latency_watchdog(write_spec, fault_server, tmp_path, action):
    # records from q030 on take 0.5 s more than the first thirty
    server = fault_server(schedule=lambda key, attempt: "slow" if (tag(key) or 0) >= 30 else None, slow_s=0.5)
    spec = write_spec(n=40, guards={"latency": {"baseline": 10, "window": 5, "multiple": 3, "action": action}},
                      runtime={"concurrency": 1, "batch_size": 5})
    store = tmp_path / "store"
    summary = run_generate(str(spec), store, progress=False, base_url=server.url)
    [(_, detail)] = events(store, "latency_alert")
    assert detail["recent_median_s"] > 3 * detail["baseline_median_s"]
    if action == "warn":
        assert summary.status == "completed" and summary.accepted == 40
    else:
        assert summary.status == "aborted" and "latency watchdog" in summary.stop_reason
        assert summary.accepted < 40


def test_circuit_breaker_opens_half_opens_and_stops(write_spec, fault_server, tmp_path):
    server = fault_server(schedule=lambda key, attempt: "500" if (tag(key) or 0) >= 10 else None)
    spec = write_spec(n=40, runtime={"concurrency": 1, "batch_size": 2, "max_retries": 0},
                      guards={"circuit_breaker": {"consecutive_failures": 3, "cooldown_s": 0.05, "max_trips": 2}})
    store = tmp_path / "store"
    proc = run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress")
    assert proc.returncode == 3 and "circuit breaker" in proc.stderr
    kinds = [k for k, _ in events(store) if k.startswith("circuit")]
    assert kinds == ["circuit_open", "circuit_half_open", "circuit_stop"]
    assert sql(store, "SELECT status FROM runs")[0][0] == "aborted"
    failed = sql(store, "SELECT count(*) FROM records WHERE status = 'failed'")[0][0]
    assert failed >= 4  # 3 to open, 1 more in half-open; all stored with their error, retried next run
    assert sql(store, "SELECT count(*) FROM records")[0][0] < 40


def test_circuit_breaker_closes_when_the_teacher_recovers(write_spec, fault_server, tmp_path):
    server = fault_server(schedule=lambda key, attempt: "500" if 10 <= (tag(key) or 0) < 15 else None)
    spec = write_spec(n=20, runtime={"concurrency": 1, "batch_size": 2, "max_retries": 0},
                      guards={"circuit_breaker": {"consecutive_failures": 3, "cooldown_s": 0.05, "max_trips": 3}})
    store = tmp_path / "store"
    summary = run_generate(str(spec), store, progress=False, base_url=server.url)
    assert summary.status == "completed" and summary.failed == 5 and summary.accepted == 15
    kinds = [k for k, _ in events(store) if k.startswith("circuit")]
    assert kinds == ["circuit_open", "circuit_half_open", "circuit_open", "circuit_half_open", "circuit_closed"]


def test_probe_verdicts():
    plan = [{"task": "compute", "category": "precision_tools", "mcp_tool": "calculate"}]
    assert probe_verdict(Probe(query="x", tools=["calculate"]), "accepted", plan, []) == (True, "ok")
    assert probe_verdict(Probe(query="x", categories=["research", "code_reviewer"]), "accepted", plan, [])[0] is False
    assert probe_verdict(Probe(query="x"), "rejected", plan, ["SCHEMA001"]) == (False, "rejected: SCHEMA001")
    assert probe_verdict(Probe(query="x"), "failed", None, []) == (False, "teacher did not answer")
    assert probe_verdict(Probe(query="x", fields={"complexity": ["trivial"]}), "accepted",
                         {"complexity": "trivial"}, [])[0]
    assert plan_tasks({"tasks": plan}) == plan and plan_tasks(plan[0]) == plan and plan_tasks("x") == []
