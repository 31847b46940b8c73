"""`mashbill generate` against the fault-injecting OpenAI-compatible server: the store and the server come from
MASHBILL_STORE and MASHBILL_TEACHER_URL, the summary is JSON, a second run resumes."""

from __future__ import annotations

import json

from tests.cli.conftest import error_lines, invoke


def test_generate_reads_its_store_and_server_from_the_environment(write_spec, fault_server, tmp_path):
    server = fault_server()
    spec = write_spec(n=6)
    env = {"MASHBILL_STORE": str(tmp_path / "env-store"), "MASHBILL_TEACHER_URL": server.url}
    res = invoke("generate", spec, "--no-progress", "--json", env=env)
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["status"] == "completed" and summary["requested"] == 6
    assert summary["accepted"] + summary["rejected"] + summary["failed"] == 6
    assert summary["store"].endswith("env-store") and (tmp_path / "env-store" / "mashbill.duckdb").is_file()
    calls = len(server.log)
    again = json.loads(invoke("generate", spec, "--no-progress", "--json", env=env).stdout)
    assert again["skipped"] == summary["accepted"] + summary["rejected"] and len(server.log) >= calls
    text = invoke("generate", spec, "--no-progress", env=env)
    assert text.exit_code == 0 and "accepted" in text.stdout


def test_generate_of_an_unknown_spec_is_one_line(tmp_path):
    res = invoke("generate", "no-such-spec", "--store", tmp_path / "s")
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and "no-such-spec" in res.stderr, res.output
    assert not (tmp_path / "s").exists()
