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


def test_sql_cannot_write_read_files_attach_or_install(cli_store, tmp_path):
    """Issue 26: `COPY ... TO` replaced the store's own Parquet export, read_csv read any file, INSTALL tried the
    network. Each is refused in one line (exit 2) and no file is written or changed."""
    store = cli_store.copy(tmp_path / "store")
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file() and p.suffix != ".duckdb" and ".wal" not in p.name}
    secret = tmp_path / "secret.csv"
    secret.write_text("user,password\nroot,hunter2\n", encoding="utf-8")
    parquet = next(iter(p for p in before if p.suffix == ".parquet"), store / "exports" / "x.parquet")
    for query, needle in [
        (f"COPY (SELECT 1 AS a) TO '{parquet}' (FORMAT parquet)", "disabled"),
        (f"COPY (SELECT 1 AS a) TO '{tmp_path / 'out.csv'}'", "disabled"),
        (f"SELECT * FROM read_csv('{secret}')", "disabled"),
        (f"SELECT * FROM read_parquet('{parquet}')", "disabled"),
        ("INSTALL httpfs", ""),
        ("LOAD httpfs", ""),
        (f"ATTACH '{tmp_path / 'other.duckdb'}' AS other", ""),
        ("SET enable_external_access = true", "locked"),
        ("SET lock_configuration = false", "locked"),
    ]:
        res = invoke("sql", query, "--store", store)
        assert res.exit_code == 2 and len(error_lines(res)) == 1, (query, res.output)
        assert needle in error_lines(res)[0], (query, res.output)
        assert "hunter2" not in res.output
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "other.duckdb").exists()
    after = {p: p.read_bytes() for p in store.rglob("*") if p.is_file() and p.suffix != ".duckdb" and ".wal" not in p.name}
    assert after == before
    ok = invoke("sql", "SELECT count(*) AS n FROM records", "--store", store, "--json")
    assert json.loads(ok.stdout) == [{"n": 26}]  # the store's own tables still answer


def test_sql_help_says_what_it_cannot_do():
    res = invoke("sql", "--help")
    text = " ".join(res.stdout.split())
    for claim in ("cannot write, ATTACH, INSTALL or LOAD extensions", "read or write files",
                  "enable_external_access=false", "lock_configuration=true"):
        assert claim in text, claim
