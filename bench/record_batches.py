"""The store's batch reader (windows of row ids) beside the reader it replaced (ranges of record ids) (issue 29).

    MASHBILL_STORE_MEMORY=1GB .venv/bin/python bench/record_batches.py --store DIR --spec A.yaml [--spec B.yaml]

For each spec, in one process on the same read-only store: `Store.record_batches` (rows as read, as validation
reads them) and the earlier reader, kept here as the baseline it is (each batch's last id by a top-N of the ids
after the last batch, then its rows by a range of record ids: every batch scans the whole table, since sha256 ids
leave no row group to skip), alternating, --repeat times; CPU seconds of each, the best run. Both must give the same
rows, each once (same=0 otherwise, and exit status 1).

With --checks-profile P (a store whose records have own checks kept by `validate --per-record`), the same for
reading each batch with its records' kept checks: `Store.record_batches_with_checks` beside the lookup it replaced
(each batch's ids joined against the whole `record_checks` table, kept here as the baseline), the rows and their
checks compared.

Last line: records= before_cpu_s= after_cpu_s= speedup_cpu= same= load1=
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def by_record_id_ranges(con, spec_hash: str, status: str, batch_size: int = 20_000):
    """The reader until a09fe17 (factory/store.py `record_batches`), as it was, on a DuckDB connection of its own."""
    from mashbill.factory.store import _RECORD_SELECT

    where, params, after = ["spec_hash = ?", "status = ?"], [spec_hash, status], None
    while True:
        cond = where + (["record_id > ?"] if after is not None else [])
        args = params + ([after] if after is not None else [])
        last = con.execute("SELECT max(record_id), count(*) FROM (SELECT record_id FROM records WHERE "
                             + " AND ".join(cond) + f" ORDER BY record_id LIMIT {batch_size})", args).fetchall()[0]
        if not last[1]:
            return
        rows = sorted(con.execute(_RECORD_SELECT + " WHERE " + " AND ".join(cond + ["record_id <= ?"]),
                                    args + [last[0]]).fetchall())
        after = rows[-1][0]
        yield rows
        if last[1] < batch_size:
            return


def with_looked_up_checks(con, batches, spec_hash: str, profile: str):
    """The kept-checks lookup until issue 29's last session (factory/store_queries.py `record_checks`), as it was,
    per batch of rows: the batch's ids registered as a table and joined against every kept check."""
    import pyarrow as pa

    for rows in batches:
        con.register("_q_checks", pa.table({"record_id": pa.array([r[0] for r in rows], pa.string())}))
        try:
            found = dict(con.execute(
                "SELECT c.record_id, c.checked FROM record_checks c JOIN _q_checks USING (record_id) "
                "WHERE c.spec_hash = ? AND c.checks_profile = ?", [spec_hash, profile]).fetchall())
        finally:
            con.unregister("_q_checks")
        yield [row + (found.get(row[0]),) for row in rows]


def with_kept_checks(batches):
    """`Store.record_batches_with_checks`' batches in the baseline's shape (each row with its check or None)."""
    for rows, found in batches:
        yield [row + (found.get(row[0]),) for row in rows]


def timed(batches) -> tuple[float, int, str]:
    """CPU seconds to read every batch, the rows, and a digest of the rows in id order (each row once)."""
    t0 = time.process_time()
    rows = [row for batch in batches for row in batch]
    cpu = time.process_time() - t0
    rows.sort()
    if len({r[0] for r in rows}) != len(rows):
        return cpu, len(rows), "duplicates"
    h = hashlib.sha256()
    for row in rows:  # row by row: one repr of every row at once would hold another copy of the store's text
        h.update(repr(row).encode())
    return cpu, len(rows), h.hexdigest()


def main() -> int:
    import duckdb

    from mashbill.factory.store import DB_NAME, MEMORY_ENV, Store
    from mashbill.specs import load_spec

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--spec", type=Path, action="append", required=True)
    ap.add_argument("--status", default="accepted")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--checks-profile", help="compare reading the records with their checks kept under this profile")
    args = ap.parse_args()
    total = {"before": 0.0, "after": 0.0}
    records, same = 0, True
    memory = os.environ.get(MEMORY_ENV)
    con = duckdb.connect(str(args.store / DB_NAME), read_only=True,
                         config={"memory_limit": memory} if memory else {})
    with Store.open(args.store, read_only=True) as store:
        for spec in args.spec:
            spec_hash = load_spec(spec).hash
            best = {"before": float("inf"), "after": float("inf")}
            digests = set()
            for _ in range(args.repeat):
                if args.checks_profile:
                    sides = (("before", with_looked_up_checks(con, store.record_batches(
                                 spec_hash=spec_hash, status=args.status, decoded=False), spec_hash,
                                 args.checks_profile)),
                             ("after", with_kept_checks(store.record_batches_with_checks(
                                 spec_hash, args.checks_profile, args.status))))
                else:
                    sides = (("before", by_record_id_ranges(con, spec_hash, args.status)),
                             ("after", store.record_batches(spec_hash=spec_hash, status=args.status, decoded=False)))
                for side, batches in sides:
                    cpu, n, digest = timed(batches)
                    best[side] = min(best[side], cpu)
                    digests.add((n, digest))
            same &= len(digests) == 1
            n = next(iter(digests))[0]
            records += n
            for side in total:
                total[side] += best[side]
            before, after = (("checks looked up per batch", "checks in row-id windows") if args.checks_profile
                             else ("by record-id ranges", "by row-id windows"))
            print(f"{spec.name}: {n:,} records, {before} {best['before']:.2f} CPU-s, {after} {best['after']:.2f}, "
                  f"same rows: {len(digests) == 1} | load1 {os.getloadavg()[0]:.2f}", flush=True)
    con.close()
    print(f"records={records} before_cpu_s={total['before']:.2f} after_cpu_s={total['after']:.2f} "
          f"speedup_cpu={total['before'] / total['after']:.2f} same={int(same)} load1={os.getloadavg()[0]:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
