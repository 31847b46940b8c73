"""`mashbill sql QUERY`: read-only SQL over the store."""

from __future__ import annotations

import click

from mashbill.cli._common import echo_json, json_option, out, store_option


@click.command()
@click.argument("query")
@store_option
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True,
              help="Output format of the result rows.")
@json_option(help="Print the rows as a JSON list of objects (the same as --format json).")
def command(query, store_path, fmt, as_json):
    """Run a read-only SQL query against the store (tables: runs, records, verdicts, teacher_calls, events).

    The query sees the store's tables and nothing else: it cannot write, ATTACH, INSTALL or LOAD extensions,
    or read or write files (COPY, read_csv, read_parquet, the store's own Parquet exports included);
    DuckDB's enable_external_access=false, extension autoload/autoinstall off and lock_configuration=true.

    \b
    Example:
      mashbill sql "SELECT kind, status, count(*) FROM records GROUP BY ALL ORDER BY ALL"
    """
    import duckdb

    from mashbill.errors import StoreError
    from mashbill.factory.store import Store

    with Store.open(store_path, read_only=True, sandbox=True) as store:
        try:
            table = store.sql(query)
        except duckdb.Error as exc:
            raise StoreError(f"SQL error: {str(exc).splitlines()[0]}") from None
    if fmt == "json" or as_json:
        echo_json(table.to_pylist())
    elif fmt == "csv":
        import csv
        import sys

        w = csv.writer(sys.stdout)
        w.writerow(table.column_names)
        w.writerows(zip(*[c.to_pylist() for c in table.columns]))
    else:
        from rich.table import Table

        t = Table(*table.column_names)
        for row in table.to_pylist():
            t.add_row(*[str(v) for v in row.values()])
        out.print(t)
