"""`mashbill sql`: read-only SQL over the store, as a table, CSV or JSON."""

from __future__ import annotations

import json

from tests.cli.conftest import error_lines, invoke

COUNT = "SELECT status, count(*) AS n FROM records GROUP BY status ORDER BY status"


def test_sql_json_csv_and_table(cli_store):
    res = invoke("sql", COUNT, "--store", cli_store.store, "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert rows == [{"status": "accepted", "n": 25}, {"status": "rejected", "n": 1}]
    assert json.loads(invoke("sql", COUNT, "--store", cli_store.store, "--format", "json").stdout) == rows
    csv = invoke("sql", COUNT, "--store", cli_store.store, "--format", "csv")
    assert csv.exit_code == 0 and csv.stdout.splitlines() == ["status,n", "accepted,25", "rejected,1"]
    table = invoke("sql", COUNT, "--store", cli_store.store)
    assert table.exit_code == 0 and "accepted" in table.stdout and "25" in table.stdout


def test_sql_is_read_only_and_errors_are_one_line(cli_store):
    res = invoke("sql", "DELETE FROM records", "--store", cli_store.store)
    assert res.exit_code == 2 and len(error_lines(res)) == 1, res.output
    res = invoke("sql", "SELEC 1", "--store", cli_store.store)
    assert res.exit_code == 2 and error_lines(res) == [line for line in res.stderr.splitlines() if line], res.output
    assert error_lines(res)[0].startswith("error: SQL error")
    after = json.loads(invoke("sql", "SELECT count(*) AS n FROM records", "--store", cli_store.store, "--json").stdout)
    assert after == [{"n": 26}]  # the DELETE was refused, nothing lost
