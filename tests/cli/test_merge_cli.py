"""`mashbill merge OUT SHARD...`: shard stores into one; merging again adds nothing."""

from __future__ import annotations

import json

from tests.cli.conftest import error_lines, invoke


def test_merge_copies_every_record_once(cli_store, tmp_path):
    out = tmp_path / "merged"
    res = invoke("merge", out, cli_store.store, "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["inserted"] == 26 and report["identical"] == 0
    again = json.loads(invoke("merge", out, cli_store.store, "--json").stdout)
    assert again["inserted"] == 0 and again["identical"] == 26  # a second merge is a no-op
    table = invoke("merge", out, cli_store.store)
    assert table.exit_code == 0 and "already present 26" in table.stdout
    rows = json.loads(invoke("sql", "SELECT count(*) AS n FROM records", "--store", out, "--json").stdout)
    assert rows == [{"n": 26}]


def test_merge_of_a_missing_shard_is_bad_input(tmp_path):
    res = invoke("merge", tmp_path / "out", tmp_path / "no-such-shard")
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and "no-such-shard" in res.stderr
