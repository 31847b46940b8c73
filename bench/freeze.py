"""`snapshot freeze` throughput on a large synthetic store (issues 11, 29: goal >= 200,000 rows/s at 260,000 records).

    python bench/freeze.py [--records 260000] [--repeat 1] [--before REV]

The store is built once (accepted plan records of the library's quickstart-plan@2 spec, one validation
run over all of them, every 97th record rejected by it) and cached under ~/.cache/mashbill/bench/; a rerun reuses it.
Each repeat freezes it with tokens=False into a fresh folder, in a process of its own, and times the whole
`freeze` call (open the store, select, balance, split, write Parquet, manifest) with that process's peak RSS.
Queries are random pseudo-word sentences, and every 500th is a near duplicate of the one before, so grouping
and the split have real work. Last line: machine-readable.

With `--before REV` (a git revision, e.g. the commit before a speed change) the same store is also frozen by
that revision's code (`git archive` into a temporary folder, imported ahead of this checkout), each freeze in
its own process, and the two are printed side by side with CPU seconds (steadier than wall time on a shared
machine); the bench then checks that both snapshots hold byte-identical files (the manifest may differ only in
frozen_at, integrity and the store path) and exits 1 when they do not. `--before 479ded1` compares with the
last row-by-row freeze (issue 29 made it columnar).

    python bench/freeze.py --store DIR --spec SPEC --before REV [--floor] [--repeat 3]

freezes a store you have (a rehearsal's merged store, validated: `bench/scale.py --keep`) as `snapshot freeze`
does (with token counts), both revisions on copies; rows/s counts the snapshot's examples. `--floor` also times,
after each pair, what this snapshot format cannot go below: the spec loaded, the usable records' columns (their
example keys hashed over the stored prompts) and prompts read as the freeze reads them, written as one Parquet
file; `floor_rows_per_s=` joins the last line. Then the raw floor: the accepted records' key, output, query and
prompt moved by DuckDB and Arrow alone from the store file into one Parquet file in the store's order, nothing
selected, joined or sorted (`raw_floor_rows_per_s=`), and the same for a format that keeps each distinct system
message once (`once_floor_rows_per_s=`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mashbill.factory.records import Record, SpecRef, TeacherCall, Verdict
from mashbill.factory.store import Store
from mashbill.specs import find_spec, load_spec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the revision helpers live beside the tests
from tests.curation.revision import checkout, same_snapshot, store_for_revision  # noqa: E402

SPEC = "quickstart-plan@2"
CATS = ["math", "coding", "legal", "research", "general", "medical"]
TOOLS = [("calculate", "expression"), ("day_of_week", "date"), ("convert_units", "quantity")]
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


SYLLABLES = ("ka ri to me su na lo vi de pa ge mu ba zo fi ne ru sa ti ko la we ha ju ye xo qi ce do gu "
             "ma ni po se bu le ta vo").split()
VOCAB = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in ("", "n", "s", "r")]


def _query(i: int) -> str:
    # 6-11 pseudo-words drawn per record, so queries are as unrelated as real ones; every 500th is a near copy
    # of the one before (one word added), so near-duplicate grouping has real clusters to find
    j = i - 1 if i % 500 == 1 else i
    rng = random.Random(j)
    words = [rng.choice(VOCAB) for _ in range(rng.randint(6, 11))]
    return " ".join(words + (["please"] if i % 500 == 1 else [])).capitalize() + "?"


def _plan(i: int) -> list[dict]:
    cat = CATS[i % len(CATS)]
    plan = [{"task": f"Answer {WORDS[i % 26]} {i}", "category": cat}]
    if i % 3 == 0:
        tool, arg = TOOLS[i % len(TOOLS)]
        plan.append({"task": f"Compute step {i}", "category": "precision_tools", "mcp_tool": tool,
                     "mcp_args": {arg: str(i)}})
    return plan


def build(path: Path, n: int) -> None:
    rs = load_spec(find_spec(SPEC))
    ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
    tmp = path.with_name(path.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    with Store.open(tmp) as store:
        run = store.begin_run(spec_name=rs.spec.name, spec_version=rs.spec.version, spec_hash=rs.hash,
                              kind="plan", backend="llama_cpp", model="bench", model_sha256="0" * 64,
                              model_info={}, sampling=rs.spec.teacher.sampling.model_dump())
        results: dict[str, list] = {}
        batch = 20_000
        for start in range(0, n, batch):
            records, calls = [], []
            for i in range(start, min(n, start + batch)):
                lang = "de" if i % 4 == 0 else "en"
                q = _query(i)
                rid = hashlib.sha256(f"{rs.hash}:{i}".encode()).hexdigest()
                msgs = ({"role": "system", "content": "You plan."}, {"role": "user", "content": q})
                records.append(Record(rid, "plan", {"query": q, "lang": lang, "type": "bench"}, _plan(i), None, ref,
                                      "accepted", msgs, {"lang": lang, "framing": "A"}))
                calls.append(TeacherCall(rid, rid[:16], 1, "llama_cpp", "bench", 0.1 + (i % 100) / 1000, 300, 0,
                                         40, "stop"))
                results[rid] = [Verdict("HR001", "reject", "bench", "validate")] if i % 97 == 0 else []
            store.write_batch(run, records, {}, calls)
        store.finish_run(run, "completed", {"requested": n, "accepted": n})
        store.record_validation(spec_hash=rs.hash, source="store", results=results, counts={})
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)






def child(store: Path, out: Path, spec: str) -> None:
    """One timed freeze in this process; prints one JSON line. The bench's own store is frozen without token
    counts (its records have none); a store of `--store` as `snapshot freeze` freezes it."""
    from mashbill.curation.snapshots.snapshot import freeze

    import mashbill

    t0, c0 = time.perf_counter(), time.process_time()
    res = freeze(find_spec(spec), store_path=store, name="bench", version="1", out_dir=out, tokens=spec != SPEC)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rows = sum(res.manifest["splits"]["counts"].values()) + res.manifest["rejects"]["total"]
    import resource

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the child's peak: this one freeze
    print(json.dumps({"wall": wall, "cpu": cpu, "rows": rows, "path": str(res.path), "code": mashbill.__file__,
                      "records": res.manifest["selection"]["records"], "rss_mb": rss_mb,
                      "examples": res.manifest["selection"]["examples"]}))


def floor_child(store: Path, out: Path, spec: str) -> None:
    """What this snapshot format cannot go below: the spec loaded, the plain records' columns (their example keys
    hashed over the stored prompts and outputs) and prompts read from the store as a freeze reads them, and written
    as one Parquet file; no selection of the others, labels, balance, split or manifest. Prints one JSON line."""
    import resource

    import pyarrow as pa
    import pyarrow.parquet as pq

    from mashbill.curation.selection.labels import dims_for
    from mashbill.curation.snapshots.snapshot_columns import paths_for

    t0, c0 = time.perf_counter(), time.process_time()
    rs = load_spec(find_spec(spec), seed_rows=False)  # as the freeze loads it
    parts = {"spec": time.perf_counter() - t0}
    dims = dims_for(rs.spec.kind, rs.spec.curation.quotas.dims)
    with Store.open(store, read_only=True) as st:
        t = time.perf_counter()
        plain, _ = st.plain_usable(rs.hash, paths_for(rs.spec.kind, dims), "sft")
        parts["columns"] = time.perf_counter() - t
        t = time.perf_counter()
        prompts = st.prompts_of(plain.column("record_id"))
        parts["prompts"] = time.perf_counter() - t
    t = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"key": plain.column("key"), "prompt": prompts, "completion": plain.column("output")}),
                   out / "floor.parquet", compression="zstd")
    parts["write"] = time.perf_counter() - t
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    del plain, prompts
    raw = raw_floor(store, rs.hash, out)
    print(json.dumps({"wall": wall, "cpu": cpu, "rows": raw.pop("rows"), "parts": parts, "raw": raw,
                      "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


RAW_PROMPT = """from_json(messages, '[{"role":"VARCHAR","content":"VARCHAR"}]')"""


def raw_floor(store: Path, spec_hash: str, out: Path) -> dict:
    """What DuckDB and Arrow alone take to move the accepted records of a spec hash from the store file into one
    Parquet file (issue 29): their key, output, query and prompt in the store's order, nothing selected, joined,
    sorted or labelled: a floor for any freeze of this format on this machine (`store_s`). And the same for a format
    that keeps each distinct first (system) message once and a record's other messages beside its id (`once_s`; that
    table is made first, untimed). The store file is opened read-only with DuckDB itself: this
    measures the engine, not a path the product takes (that goes through `Store`)."""
    import warnings

    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    # the DB-API's Arrow output copies the rows once more (~0.3 s of these prompts against a relation's): the floor
    # is an upper bound by that much
    warnings.filterwarnings("ignore", message="Arrow output on a DB-API result")
    memory = os.environ.get("MASHBILL_STORE_MEMORY")
    where = "FROM records WHERE spec_hash = ? AND status = 'accepted'"
    found: dict = {}
    with duckdb.connect(str(store / "mashbill.duckdb"), read_only=True) as con:
        if memory:
            con.execute(f"SET memory_limit = '{memory}'")
        con.execute("SET enable_progress_bar = false")
        t = time.perf_counter()
        cols = con.execute(f"SELECT record_id, sft_key, output, json_extract_string(input, '$.query') AS q {where}",
                           [spec_hash]).to_arrow_reader().read_all()
        found["columns"] = time.perf_counter() - t
        t = time.perf_counter()
        prompts = con.execute(f"SELECT {RAW_PROMPT} AS prompt {where}", [spec_hash]).to_arrow_reader().read_all()
        found["prompts"] = time.perf_counter() - t
        t = time.perf_counter()
        pq.write_table(pa.table({**{n: cols.column(n) for n in cols.column_names}, "prompt": prompts.column(0)}),
                       out / "raw.parquet", compression="zstd", write_statistics=False)
        found["write"] = time.perf_counter() - t
        del prompts
        once = duckdb.connect(str(out / "once.duckdb"))  # the records' prompts split, as that format would keep them
        try:
            once.register("_split", con.execute(f"SELECT record_id, messages->>'$[0].content' AS head, "
                                                f"{RAW_PROMPT}[2:] AS rest {where}", [spec_hash]).to_arrow_reader())
            once.execute("CREATE TABLE split AS SELECT * FROM _split")
            once.unregister("_split")
            once.execute("CREATE TABLE heads AS SELECT DISTINCT head FROM split ORDER BY head")
            once.execute("CREATE TABLE rows AS SELECT s.record_id, h.rowid AS head_id, s.rest FROM split s "
                         "JOIN heads h USING (head) ORDER BY s.record_id")
            once.execute("DROP TABLE split")
            once.execute("CHECKPOINT")
            t = time.perf_counter()
            heads = once.execute("SELECT rowid AS head_id, head FROM heads").to_arrow_reader().read_all()
            rest = once.execute("SELECT head_id, rest FROM rows").to_arrow_reader().read_all()
            found["once_prompts"] = time.perf_counter() - t
            t = time.perf_counter()
            pq.write_table(pa.table({**{n: cols.column(n) for n in cols.column_names}, **{n: rest.column(n) for n in
                                     rest.column_names}}), out / "once.parquet", compression="zstd",
                           write_statistics=False)
            pq.write_table(heads, out / "once-heads.parquet", compression="zstd", write_statistics=False)
            found["once_write"] = time.perf_counter() - t
            found["heads"] = heads.num_rows
        finally:
            once.close()
    found["rows"] = cols.num_rows
    found["store_s"] = found["columns"] + found["prompts"] + found["write"]
    found["once_s"] = found["columns"] + found["once_prompts"] + found["once_write"]
    return found


def timed(store: Path, out: Path, pythonpath: Path | None = None, spec: str = SPEC, mode: str = "--child") -> dict:
    env = dict(os.environ)
    if pythonpath is not None:  # ahead of the editable install's finder, so REV's code is what runs
        env["PYTHONPATH"] = str(pythonpath)
    proc = subprocess.run([sys.executable, __file__, mode, str(store), str(out), spec], env=env, capture_output=True,
                          text=True)
    if proc.returncode:
        sys.exit(f"freeze failed ({'before' if pythonpath else 'after'}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])




def floor_line(store: Path, spec: str, tmp: Path, k: int, n: int) -> dict:
    f = timed(store, tmp / f"floor-{k}", spec=spec, mode="--floor-child")
    raw = f["raw"]
    print(f"         floor {f['wall']:.2f}s wall {f['cpu']:.2f}s cpu {f['rss_mb']:.0f} MB | "
          + " ".join(f"{name} {s:.2f}s" for name, s in f["parts"].items()), flush=True)
    print(f"     raw floor {raw['store_s']:.2f}s | {f['rows']} accepted records | columns {raw['columns']:.2f}s prompts "
          f"{raw['prompts']:.2f}s write {raw['write']:.2f}s | first message kept once ({raw['heads']} distinct): "
          f"{raw['once_s']:.2f}s, prompts {raw['once_prompts']:.2f}s write {raw['once_write']:.2f}s", flush=True)
    return f


def compare(store: Path, rev: str, repeat: int, n: int | None, spec: str = SPEC, floor: bool = False) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="mashbill-freeze-before-"))
    try:
        pkg = checkout(rev, tmp / "rev")
        old_store = store_for_revision(store, pkg, tmp / "store")  # the revision may predate a store migration
        before, after, floors, diffs = [], [], [], []
        for k in range(repeat):
            b = timed(old_store, tmp / f"before-{k}", pkg, spec)
            a = timed(store, tmp / f"after-{k}", spec=spec)
            n = n or a["examples"]
            assert b["code"].startswith(str(pkg)) and not a["code"].startswith(str(tmp)), (b["code"], a["code"])
            diffs = same_snapshot(Path(b["path"]), Path(a["path"]))
            before.append(b)
            after.append(a)
            print(f"run {k + 1}: before {b['wall']:.2f}s wall {b['cpu']:.2f}s cpu {b['rss_mb']:.0f} MB | after "
                  f"{a['wall']:.2f}s wall {a['cpu']:.2f}s cpu {a['rss_mb']:.0f} MB | {a['rows']} rows | "
                  f"identical: {not diffs} | load1 {os.getloadavg()[0]:.2f}", flush=True)
            if floor:
                floors.append(floor_line(store, spec, tmp, k, n))
        bw, bc = min(r["wall"] for r in before), min(r["cpu"] for r in before)
        aw, ac = min(r["wall"] for r in after), min(r["cpu"] for r in after)
        print(f"{'':12}{'before ' + rev[:12]:>22}{'after':>14}{'ratio':>8}")
        print(f"{'wall s':12}{bw:22.2f}{aw:14.2f}{bw / aw:8.2f}")
        print(f"{'cpu s':12}{bc:22.2f}{ac:14.2f}{bc / ac:8.2f}")
        br, ar = max(r["rss_mb"] for r in before), max(r["rss_mb"] for r in after)
        print(f"{'records/s':12}{n / bw:22,.0f}{n / aw:14,.0f}")
        print(f"{'cpu rows/s':12}{n / bc:22,.0f}{n / ac:14,.0f}")
        print(f"{'peak RSS MB':12}{br:22,.0f}{ar:14,.0f}")
        if diffs:
            print(f"NOT IDENTICAL: {diffs}")
        print(f"records={n} before_s={bw:.2f} after_s={aw:.2f} before_cpu_s={bc:.2f} after_cpu_s={ac:.2f} "
              f"before_rows_per_s={n / bw:.0f} freeze_rows_per_s={n / aw:.0f} freeze_cpu_rows_per_s={n / ac:.0f} "
              f"speedup_cpu={bc / ac:.2f} before_peak_rss_mb={br:.0f} peak_rss_mb={ar:.0f} "
              f"identical={int(not diffs)} goal_rows_per_s=200000 "
              + (f"floor_rows_per_s={n / min(f['wall'] for f in floors):.0f} "
                 f"raw_floor_rows_per_s={n / min(f['raw']['store_s'] for f in floors):.0f} "
                 f"once_floor_rows_per_s={n / min(f['raw']['once_s'] for f in floors):.0f} " if floors else "")
              + f"load1={os.getloadavg()[0]:.2f}")
        return 1 if diffs else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] in ("--child", "--floor-child"):
        (child if sys.argv[1] == "--child" else floor_child)(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=260_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--before", metavar="REV", help="also freeze with this git revision's code and compare")
    ap.add_argument("--store", type=Path, help="freeze this store (validated) instead of the bench's own")
    ap.add_argument("--spec", help="with --store: the spec to freeze (a path or name@version)")
    ap.add_argument("--floor", action="store_true", help="with --before: also time what the format cannot go below")
    args = ap.parse_args()
    if bool(args.store) != bool(args.spec) or ((args.floor or args.store) and not args.before):
        ap.error("--store and --spec go together, and they and --floor need --before")
    if args.store:
        return compare(args.store, args.before, args.repeat, None, args.spec, args.floor)
    cache = Path(os.environ.get("MASHBILL_BENCH_DIR", Path.home() / ".cache" / "mashbill" / "bench"))
    store = cache / f"freeze-v2-{args.records}"
    if not (store / "mashbill.duckdb").is_file():
        t0 = time.perf_counter()
        build(store, args.records)
        print(f"built {store} with {args.records} records in {time.perf_counter() - t0:.1f}s", flush=True)
    if args.before:
        return compare(store, args.before, args.repeat, args.records, floor=args.floor)
    runs = []
    for k in range(args.repeat):  # each freeze in its own process, so its peak RSS is its own
        out = Path(tempfile.mkdtemp(prefix="mashbill-freeze-bench-"))
        try:
            r = timed(store, out)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        print(f"run {k + 1}: {r['records']} records, {r['rows']} rows written in {r['wall']:.2f}s wall, "
              f"{r['cpu']:.2f}s cpu ({args.records / r['wall']:,.0f} records/s), peak RSS {r['rss_mb']:.0f} MB, "
              f"load1 {os.getloadavg()[0]:.2f}", flush=True)
        runs.append(r)
    best, cpu = min(r["wall"] for r in runs), min(r["cpu"] for r in runs)
    rss = max(r["rss_mb"] for r in runs)
    print(f"records={args.records} freeze_s={best:.2f} freeze_cpu_s={cpu:.2f} "
          f"freeze_rows_per_s={args.records / best:.0f} "
          f"freeze_cpu_rows_per_s={args.records / cpu:.0f} peak_rss_mb={rss:.0f} goal_rows_per_s=200000 "
          f"goal_peak_rss_mb=4096 load1={os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
