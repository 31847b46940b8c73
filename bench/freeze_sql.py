"""What a freeze made of DuckDB statements would cost, beside today's freeze of the same store (issue 29: the goal
of 200,000 rows/s; docs/scale.md, "What the two open goals would take").

    python bench/freeze_sql.py --store DIR --spec SPEC [--repeat 2]

A measurement for a decision, not a freeze: nothing here is used by the product. It takes a validated store (a
rehearsal's merged store: `bench/scale.py --keep`) and a label spec (complexity, as the rehearsal freezes), then,
each in a process of its own and each timed inside it (Python's start not counted):

1. today's `snapshot freeze` of that store (with token counts, as the command does), for the reference;
2. the same selection, labels, groups, split and rejects as DuckDB statements over a store that keeps each distinct
   system message once, written as Parquet by DuckDB: the design the docs describe (a store migration, a snapshot
   format 2 with the heads in a file of their own, a split rule SQL can express).

It reads the store's DuckDB file directly, as `bench/freeze.py --floor` does: it measures a layout the `Store` does
not have. The store of (2) is prepared first and timed apart (`prepare_s`): the store's tables attached read-only,
and beside them each accepted record's messages as a head id (its first message, kept once in `heads`) and its
other messages as a native list of structs, which is what a store migration would keep. What (2) does, each a statement:
- selection: a record is usable when accepted, its latest validation mark passed, no judge's reject and no review
  row (the common path of `factory.usable`; a store with review rows would need today's walk for those records);
- labels and cell: the output's `complexity` and the language (input, else meta, else "none"), cell `complexity/lang`;
- groups: the near-duplicate cluster validation kept for the record, else its example key;
- split: groups within a cell in the order of their id (a sha256 hex: stable and pseudo-random, where DuckDB's
  `hash` is not promised to stay the same across versions), each on the side its midpoint in the running count falls
  in (train, eval, test by the spec's ratios): a window function, not today's walk that sends each group to the side
  furthest below its share, so it is another rule (a versioned change of every split);
- leakage: groups on more than one side, lower-cased queries found on more than one side, and usable records that
  validation's duplicate check did not cluster. Validation's clusters join every two queries equal after its
  normalisation (NFKC, case, punctuation), so with every record clustered, groups on one side each imply today's
  check of normalised queries; folding them again in SQL (a regular expression) took 0.6 s at 439,521 rows;
- rejects: every other record of the spec with its verdict codes; counts per split and cell for a manifest;
- write: each split's rows (ordered by cell and key) with their head id and other messages, the heads once, the
  rejects: one Parquet file each, zstd.
Not done by (2), and in today's freeze: quotas and oversampling (the rehearsal's spec sets none), token counts (the
rehearsal's validation kept them; (2) reads the kept column), the judge's export, run statistics, the dataset card,
hashing the files and the manifest. Both must select the same records: the bench says so, or exits 1.

Last line: machine-readable (`freeze_rows_per_s=` today's, `sql_rows_per_s=` the statements', on the examples).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

SPLITS = ("train", "eval", "test")


def prepare(store: Path, spec_hash: str, out: Path) -> dict:
    """A side database holding each accepted record's messages as (head id, other messages) and each distinct head
    once: what a store that split messages when it wrote them would hold. Returns its path and timings."""
    import duckdb

    t = time.perf_counter()
    db = out / "once.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"ATTACH '{store / 'mashbill.duckdb'}' AS s (READ_ONLY)")
    con.execute("""CREATE TEMP TABLE split AS SELECT record_id,
                   from_json(messages, '[{"role":"VARCHAR","content":"VARCHAR"}]') AS m
                   FROM s.records WHERE spec_hash = ? AND status = 'accepted'""", [spec_hash])
    con.execute("CREATE TABLE heads AS SELECT row_number() OVER (ORDER BY head) - 1 AS head_id, head "
                "FROM (SELECT DISTINCT m[1] AS head FROM split)")
    con.execute("CREATE TABLE record_prompts AS SELECT s.record_id, h.head_id, s.m[2:] AS rest "
                "FROM split s JOIN heads h ON h.head = s.m[1] ORDER BY s.record_id")
    heads = con.execute("SELECT count(*) FROM heads").fetchone()[0]
    con.execute("DROP TABLE split")
    con.execute("CHECKPOINT")
    con.close()
    return {"db": str(db), "prepare_s": time.perf_counter() - t, "heads": heads}


def sql_child(store: Path, once: Path, out: Path, spec: str) -> None:
    """The freeze as statements (see the module's docstring); prints one JSON line."""
    import duckdb

    from mashbill.specs import find_spec, load_spec

    t0, c0 = time.perf_counter(), time.process_time()
    parts: dict[str, float] = {}

    def lap(name: str, since: list) -> None:
        now = time.perf_counter()
        parts[name] = now - since[0]
        since[0] = now

    since = [t0]
    rs = load_spec(find_spec(spec), seed_rows=False)
    ratios = rs.spec.curation.splits
    lap("spec", since)
    con = duckdb.connect(str(once), read_only=True)
    con.execute(f"ATTACH '{store / 'mashbill.duckdb'}' AS s (READ_ONLY)")
    con.execute("SET preserve_insertion_order = false")
    con.execute(
        "CREATE TEMP TABLE latest AS SELECT record_id, arg_max({'p': passed, 'g': near_group, 'v': validation_id}, "
        "validated_at) AS m FROM s.record_validations WHERE record_id IN "
        "(SELECT record_id FROM s.records WHERE spec_hash = ?) GROUP BY record_id", [rs.hash])
    con.execute(
        "CREATE TEMP TABLE sel AS SELECT r.record_id, r.sft_key AS key, r.status, l.m.p AS passed, "
        "l.m.g AS near_group, l.m.v AS validation_id, "
        "EXISTS (SELECT 1 FROM s.verdicts v WHERE v.record_id = r.record_id AND v.stage = 'judge' "
        "AND v.severity = 'reject') AS judged, "
        "EXISTS (SELECT 1 FROM s.review_decisions d WHERE d.record_id = r.record_id) AS reviewed, "
        "r.input ->> '$.query' AS query, "
        "coalesce(r.input ->> '$.lang', r.meta ->> '$.lang', 'none') AS lang, "
        "r.output ->> '$.complexity' AS complexity, json(r.output)::VARCHAR AS completion, "
        "r.output, r.raw FROM s.records r LEFT JOIN latest l USING (record_id) WHERE r.spec_hash = ?", [rs.hash])
    lap("select", since)
    con.execute(
        "CREATE TEMP TABLE ex AS SELECT record_id, key, query, lang, complexity, completion, "
        "complexity || '/' || lang AS cell, coalesce(near_group, key) AS grp FROM sel "
        "WHERE status = 'accepted' AND passed AND NOT judged AND NOT reviewed")
    lap("labels", since)
    con.execute(
        "CREATE TEMP TABLE sides AS WITH g AS (SELECT grp, min(cell) AS cell, count(*) AS n "
        "FROM ex GROUP BY grp), w AS (SELECT grp, n, "
        "sum(n) OVER (PARTITION BY cell ORDER BY grp ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) - n "
        "AS before, sum(n) OVER (PARTITION BY cell) AS total FROM g) "
        "SELECT grp, CASE WHEN (before + n / 2) / total < ? THEN 0 WHEN (before + n / 2) / total < ? THEN 1 "
        "ELSE 2 END AS side FROM w", [ratios.train, ratios.train + ratios.eval])
    lap("split", since)
    # validation's clusters hold every pair of queries equal after its normalisation, so groups on one side each
    # imply the normalised check; the statement checks lower-cased queries besides (today's check folds more)
    leak = con.execute(
        "WITH e AS (SELECT x.grp, x.query, s.side FROM ex x JOIN sides s USING (grp)) SELECT "
        "(SELECT count(*) FROM (SELECT grp FROM e GROUP BY grp HAVING min(side) <> max(side))), "
        "(SELECT count(*) FROM (SELECT lower(query) AS q FROM e WHERE query <> '' GROUP BY q "
        "HAVING min(side) <> max(side))), "
        "(SELECT count(*) FROM sel WHERE near_group IS NULL AND status = 'accepted' AND passed)").fetchone()
    lap("leakage", since)
    out.mkdir(parents=True, exist_ok=True)
    (out / "data").mkdir(exist_ok=True)
    counts = {}
    con.execute("CREATE TEMP TABLE rows AS SELECT x.*, s.side, p.head_id, p.rest, l.m.v AS validation_id FROM ex x "
                "JOIN sides s USING (grp) JOIN record_prompts p USING (record_id) JOIN latest l USING (record_id)")
    for j, split in enumerate(SPLITS):
        con.execute(
            f"COPY (SELECT key AS example_id, record_id, 'sft' AS row_kind, query, lang, "
            f"json_object('complexity', complexity, 'lang', lang)::VARCHAR AS labels, cell, "
            f"[complexity] AS class_labels, head_id, rest AS prompt_rest, completion, grp AS \"group\", "
            f"validation_id FROM rows WHERE side = {j} ORDER BY cell, key) "
            f"TO '{out / 'data' / f'{split}.parquet'}' (FORMAT parquet, COMPRESSION zstd)")
    lap("write", since)
    whole_cpu = time.process_time()
    for j, split in enumerate(SPLITS):  # the same rows with whole prompts, as format 1 keeps them (timed apart)
        con.execute(
            f"COPY (SELECT x.key AS example_id, x.record_id, 'sft' AS row_kind, x.query, x.lang, "
            f"json_object('complexity', x.complexity, 'lang', x.lang)::VARCHAR AS labels, x.cell, "
            f"[x.complexity] AS class_labels, list_prepend(h.head, p.rest) AS prompt, x.completion, "
            f"x.grp AS \"group\", l.m.v AS validation_id FROM ex x JOIN sides s USING (grp) "
            f"JOIN record_prompts p USING (record_id) JOIN heads h USING (head_id) JOIN latest l USING (record_id) "
            f"WHERE s.side = {j} ORDER BY x.cell, x.key) "
            f"TO '{out / 'data' / f'{split}-whole.parquet'}' (FORMAT parquet, COMPRESSION zstd)")
    lap("write_whole", since)
    whole_cpu = time.process_time() - whole_cpu
    con.execute(f"COPY (SELECT head_id, head.role AS role, head.content AS content FROM heads ORDER BY head_id) "
                f"TO '{out / 'heads.parquet'}' (FORMAT parquet, COMPRESSION zstd)")
    con.execute(
        "COPY (SELECT s.record_id, list(v.code ORDER BY v.code) AS codes, any_value(s.query) AS query, "
        "coalesce(any_value(s.completion), any_value(s.raw)) AS output FROM sel s "
        "LEFT JOIN s.verdicts v ON v.record_id = s.record_id AND v.severity = 'reject' "
        "WHERE NOT (s.status = 'accepted' AND s.passed AND NOT s.judged AND NOT s.reviewed) "
        f"GROUP BY s.record_id ORDER BY s.record_id) TO '{out / 'rejects.parquet'}' (FORMAT parquet, "
        "COMPRESSION zstd)")
    lap("rejects", since)
    for side, n in con.execute("SELECT s.side, count(*) FROM ex x JOIN sides s USING (grp) GROUP BY s.side"
                               ).fetchall():
        counts[SPLITS[side]] = n
    cells = con.execute("SELECT s.side, x.cell, count(*) FROM ex x JOIN sides s USING (grp) GROUP BY ALL "
                        "ORDER BY ALL").fetchall()
    rejected = con.execute("SELECT count(*) FROM sel WHERE NOT (status = 'accepted' AND passed AND NOT judged "
                           "AND NOT reviewed)").fetchone()[0]
    reviewed = con.execute("SELECT count(*) FROM sel WHERE reviewed").fetchone()[0]
    (out / "manifest.json").write_text(json.dumps({"counts": counts, "cells": [list(c) for c in cells],
                                                   "rejects": rejected, "leakage": leak}, indent=2))
    lap("stats", since)
    con.close()
    wall, cpu = time.perf_counter() - t0 - parts["write_whole"], time.process_time() - c0 - whole_cpu
    print(json.dumps({"wall": wall, "cpu": cpu, "whole": wall - parts["write"] + parts["write_whole"],
                      "examples": sum(counts.values()), "rejects": rejected,
                      "reviewed": reviewed, "counts": counts, "leak": list(leak), "parts": parts,
                      "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def run_child(args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{args[1]} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    if len(sys.argv) == 6 and sys.argv[1] == "--sql-child":
        sql_child(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True, help="a validated store (a rehearsal's merged store)")
    ap.add_argument("--spec", required=True, help="the label spec to freeze (a path or name@version)")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    from freeze import timed
    from mashbill.specs import find_spec, load_spec

    spec_hash = load_spec(find_spec(args.spec), seed_rows=False).hash
    tmp = Path(tempfile.mkdtemp(prefix="mashbill-freeze-sql-"))
    try:
        prep = prepare(args.store, spec_hash, tmp)
        print(f"prepared: each accepted record's messages as a head id and the rest, {prep['heads']} distinct heads, "
              f"in {prep['prepare_s']:.1f}s (a store migration's work, not a freeze's) | load1 "
              f"{os.getloadavg()[0]:.2f}", flush=True)
        today, sql = [], []
        for k in range(args.repeat):
            a = timed(args.store, tmp / f"today-{k}", spec=args.spec)  # bench/freeze.py's own timed freeze
            b = run_child([__file__, "--sql-child", str(args.store), prep["db"], str(tmp / f"sql-{k}"), args.spec])
            a["counts"] = json.loads((Path(a["path"]) / "manifest.json").read_text())["splits"]["counts"]
            today.append(a)
            sql.append(b)
            print(f"run {k + 1}: today {a['wall']:.2f}s wall {a['cpu']:.2f}s cpu {a['rss_mb']:.0f} MB, "
                  f"{a['examples']} examples {a['counts']} | statements {b['wall']:.2f}s wall {b['cpu']:.2f}s cpu "
                  f"{b['rss_mb']:.0f} MB, {b['examples']} examples {b['counts']} (whole prompts {b['whole']:.2f}s) | "
                  + " ".join(f"{n} {s:.2f}s" for n, s in b["parts"].items())
                  + f" | leaks (groups, queries, unclustered) {b['leak']} | load1 {os.getloadavg()[0]:.2f}", flush=True)
        a, b = today[-1], sql[-1]
        same = a["examples"] == b["examples"] and a["rows"] - a["examples"] == b["rejects"]
        if not same:
            print(f"NOT THE SAME SELECTION: today {a['examples']} examples, {a['rows'] - a['examples']} left out; "
                  f"statements {b['examples']}, {b['rejects']} ({b['reviewed']} reviewed)")
        tw, tc = min(r["wall"] for r in today), min(r["cpu"] for r in today)
        sw, sc = min(r["wall"] for r in sql), min(r["cpu"] for r in sql)
        n = a["examples"]
        print(f"records={a['records']} examples={n} freeze_s={tw:.2f} freeze_cpu_s={tc:.2f} sql_s={sw:.2f} "
              f"sql_cpu_s={sc:.2f} freeze_rows_per_s={n / tw:.0f} sql_rows_per_s={n / sw:.0f} "
              f"ratio={tw / sw:.2f} sql_whole_s={min(r['whole'] for r in sql):.2f} "
              f"sql_whole_rows_per_s={n / min(r['whole'] for r in sql):.0f} prepare_s={prep['prepare_s']:.1f} "
              f"same_selection={int(same)} "
              f"sql_peak_rss_mb={max(r['rss_mb'] for r in sql):.0f} goal_rows_per_s=200000 "
              f"load1={os.getloadavg()[0]:.2f}")
        return 0 if same else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
