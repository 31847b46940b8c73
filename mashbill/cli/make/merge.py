"""`mashbill merge OUT_STORE SHARD_STORE...`: combine shard stores into one, verifying there is no overlap."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from mashbill.cli._common import console, echo_json, json_option, out

_DIR = click.Path(file_okay=False, path_type=Path)


@click.command()
@click.argument("out_store", type=_DIR)
@click.argument("shard_stores", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--require-complete", is_flag=True, help="Fail when a shard i/n of a spec is missing.")
@json_option(help="Print the merge report as JSON.")
def command(out_store, shard_stores, require_complete, as_json):
    """Merge SHARD_STOREs (from `mashbill generate --shard i/n --store ...`) into OUT_STORE.

    Records, their verdicts, teacher calls, runs and events are copied in one transaction. The same
    record id in two stores is an error unless both copies are identical (then it is kept once); a
    record that failed in one store and finished in another keeps the finished copy. Every record
    written by a run labelled i/n must belong to slice i. Merging again is a no-op; merging after a
    shard was resumed adds what is new. Parquet exports of OUT_STORE are rewritten at the end.

    Refused in one line (exit 2), writing nothing: a shard store whose run is still running (a killed
    run: re-run its generate first, which resumes it), one spec name@version under two hashes, and an
    OUT_STORE folder that holds files but no store. A refused merge into a new folder leaves none.

    A queries spec's merged pool is screened for duplicates across shards (each shard only checked its
    own): the later copy gets a SYN020 verdict and leaves the pool; the summary says how many were
    dropped and which cells are short of their quota.

    \b
    Example:
      mashbill merge ./merged ./shard_0 ./shard_1 ./shard_2 ./shard_3 --require-complete
    """
    from mashbill.factory.shards import merge_stores

    report = merge_stores(out_store, list(shard_stores), require_complete=require_complete)
    pools = _synthesis_pools(out_store, report.warnings)
    for w in report.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")
    if as_json:
        echo_json({**report.as_dict(), "synthesis": pools})
        return
    table = Table(title=f"merged into {report.out}")
    for col in ("shard store", "shard", "records", "inserted", "identical", "replaced"):
        table.add_column(col)
    for s in report.sources:
        table.add_row(s["path"], ", ".join(s["shards"]) or "-", str(s["records"]), str(s["inserted"]),
                      str(s["identical"]), str(s["replaced"]))
    out.print(table)
    for ref, info in report.specs.items():
        statuses = ", ".join(f"{k} {v}" for k, v in info.get("records", {}).items())
        missing = f"; missing shards {', '.join(info['missing'])}" if info["missing"] else ""
        out.print(f"spec {ref}: {statuses}{missing}")
    out.print(f"new records {report.inserted}, replaced failed {report.replaced}, already present {report.identical}, "
              f"runs added {report.runs}")
    for p in pools:
        short = ", ".join(f"{c} {n}" for c, n in p["cells_short"].items())
        out.print(f"{p['spec']}: {p['queries']} queries of a target of {p['target']}, cross-shard duplicates dropped "
                  f"{p['cross_shard_dropped']} ({p['dropped_now']} by this merge); "
                  + (f"cells short of their quota: {short}" if short else "every cell meets its quota"))


def _synthesis_pools(out_store: Path, warnings: list[str]) -> list[dict]:
    """Drop the cross-shard duplicates of each queries spec in the merged store (`validators.queries.pool_merge`)."""
    from mashbill.curation.reports.report_synth import stored_spec_resolver
    from mashbill.factory.store import Store
    from mashbill.validators.queries.pool_merge import drop_cross_shard_duplicates

    pools = []
    with Store.open(out_store) as store:
        resolve = stored_spec_resolver(store)
        for name, version, shash, _ in store.stored_specs(kinds=["queries"]):
            rs = resolve(name, version, shash)
            if rs is None:
                warnings.append(f"{name}@{version}: its spec file is not found, so duplicates across shards were not "
                                "checked; merge again where the spec is")
                continue
            pools.append(drop_cross_shard_duplicates(store, rs))
    return pools
