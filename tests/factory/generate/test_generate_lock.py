"""`generate` runs `spec check`'s lock check (case 9): a spec that does not match its lock is refused before
any teacher call; `--allow-unlocked` runs a draft and records it on the run."""

from __future__ import annotations

import json

from teacher_helpers import run_cli, sql


def test_an_edited_locked_spec_is_refused_and_a_draft_run_is_recorded(write_spec, fault_server, tmp_path):
    server = fault_server()
    spec = write_spec(n=4)  # locked in tmp_path/specs.lock
    spec.write_text(spec.read_text(encoding="utf-8").replace("max_tokens: 48", "max_tokens: 47"), encoding="utf-8")
    store = tmp_path / "store"
    args = ["generate", spec, "--store", store, "--base-url", server.url, "--no-progress"]
    refused = run_cli(*args)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "content changed" in refused.stderr and "--allow-unlocked" in refused.stderr
    assert server.log == [] and not (store / "mashbill.duckdb").exists()  # refused before any work

    run_cli(*args, "--allow-unlocked", check=True)
    [(status, stored_args)] = sql(store, "SELECT status, CAST(args AS VARCHAR) FROM runs")
    recorded = json.loads(stored_args)
    assert status == "completed" and recorded["allow_unlocked"] is True and "content changed" in recorded["unlocked"]
