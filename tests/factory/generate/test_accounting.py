"""Accounting stored per run: calls, retries, tokens, latency percentiles, accept rate, rate, ETA and
cost from the spec's prices; progress events while the run goes; the live display on the CLI."""

from __future__ import annotations

import pytest
from teacher_helpers import loads, run_cli, sql, tag

from mashbill.cli.make.generate import run_generate
from mashbill.errors import SpecError
from mashbill.specs import load_spec

PRICES = {"input_per_1m": 1.0, "output_per_1m": 2.0, "gpu_hour": 3.6, "gpus": 2}


def test_accounting_and_cost_are_stored_with_the_run(write_spec, fault_server, tmp_path):
    server = fault_server(schedule=lambda key, attempt: "500" if tag(key) == 1 and attempt == 1 else None)
    spec = write_spec(n=12, teacher={"prices": PRICES}, runtime={"progress_every_s": 0.001, "batch_size": 4})
    store = tmp_path / "store"
    summary = run_generate(str(spec), store, progress=False, base_url=server.url)
    row = sql(store, "SELECT calls, retries, tokens_in, tokens_out, wall_s, cost, CAST(stats AS VARCHAR) FROM runs")[0]
    calls, retries, tokens_in, tokens_out, wall_s, cost, stats = row
    stats = loads(stats)
    assert (calls, retries) == (13, 1) == (summary.as_dict()["calls"], summary.as_dict()["retries"])
    assert tokens_in > 0 and tokens_out > 0
    expected = tokens_in * 1.0 / 1e6 + tokens_out * 2.0 / 1e6 + wall_s / 3600 * 3.6 * 2
    assert cost == pytest.approx(expected, rel=1e-3)
    assert stats["accept_rate"] == 1.0 and stats["errors"] == 1 and stats["eta_s"] == 0.0
    assert set(stats["latency_s"]) == {"p50", "p90", "p99"} and stats["latency_s"]["p50"] > 0
    progress = [loads(d) for d, in sql(store, "SELECT CAST(detail AS VARCHAR) FROM events WHERE kind = 'progress'")]
    assert len(progress) == 3 and [p["done"] for p in progress] == [4, 8, 12]
    assert all(p["requested"] == 12 and "eta_s" in p and "records_per_s" in p for p in progress)


def test_unknown_price_keys_are_refused(write_spec):
    spec = write_spec(teacher={"prices": {"usd_per_token": 1.0}})
    with pytest.raises(SpecError, match="unknown price key"):
        load_spec(spec)


def test_cli_shows_live_progress_and_a_summary(write_spec, fault_server, tmp_path):
    server = fault_server()
    spec = write_spec(n=6, teacher={"prices": PRICES})
    proc = run_cli("generate", spec, "--store", tmp_path / "store", "--base-url", server.url, check=True)
    # stderr is a pipe here: the plain progress lines (a terminal gets the live bar)
    assert "fault-plan@1: 6/6 records" in proc.stderr and "records/min" in proc.stderr
    assert "accepted" in proc.stdout
