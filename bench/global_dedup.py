"""The one global step that grows fastest, past one machine's memory: LSH candidate pairs in numpy (as validation
finds them, the whole signature matrix in memory) beside the same pairs from DuckDB over band keys on disk, capped
at a memory limit (issue 29: "where one machine stops", and whether a dataframe engine spanning machines is needed).

    nice -n 10 .venv/bin/python bench/global_dedup.py --sizes 1000000,4000000 --memory 2GB

Records are synthetic MinHash signatures (128 x uint64, the validators' default: 16 bands of 8 rows), random but for
1% planted near-duplicates (a row's neighbour with 3 of its 128 bins changed), made chunk by chunk from a seed, so
both paths see the same rows. numpy: `validators.data.dedup.candidate_pairs` on the whole matrix, in its own
process. DuckDB: each chunk's band keys (the same splitmix64 mix of each band's rows) written to Parquet as the
chunk is made (what per-shard validation could keep), then one statement: the buckets holding more than one row,
each member paired with its bucket's first row and with its predecessor (candidate_pairs' rule), in its own
process under `SET memory_limit`, spilling beyond it. Both pair sets must be equal, or the bench exits 1 (above
--numpy-max records only DuckDB runs: numpy's matrix would not fit).

Per size and path: the pair step's wall s, the whole process's wall s, CPU s and peak RSS (os.wait4). Last line:
records= numpy_pairs_s= duckdb_pairs_s= numpy_s= duckdb_s= numpy_cpu_s= duckdb_cpu_s= numpy_peak_mb= duckdb_peak_mb=
numpy_bytes_per_record= duckdb_bytes_per_record= identical= memory_limit= load1=
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PERM, BANDS, CHUNK = 128, 16, 250_000


def chunk_signatures(seed: int, index: int, n: int) -> np.ndarray:
    rng = np.random.default_rng([seed, index])
    sig = rng.integers(0, 2**63, size=(n, PERM), dtype=np.uint64)
    planted = np.nonzero(rng.random(n) < 0.01)[0]
    planted = planted[planted > 0]
    sig[planted] = sig[planted - 1]
    for _ in range(3):  # three bins changed: most bands still match, as near-duplicate queries do
        sig[planted, rng.integers(0, PERM, size=planted.size)] = rng.integers(0, 2**63, size=planted.size,
                                                                              dtype=np.uint64)
    return sig


def chunks(records: int):
    for i, start in enumerate(range(0, records, CHUNK)):
        yield i, start, min(CHUNK, records - start)


def band_keys(sig: np.ndarray) -> np.ndarray:
    """n x BANDS keys, each the bucket candidate_pairs puts the row in for that band."""
    from mashbill.validators.data.dedup import band_key

    return np.stack([band_key(sig, b, BANDS) for b in range(BANDS)], axis=1)


def run_numpy(records: int, seed: int, out: Path) -> None:
    from mashbill.validators.data.dedup import candidate_pairs

    sig = np.empty((records, PERM), dtype=np.uint64)
    for i, start, n in chunks(records):
        sig[start:start + n] = chunk_signatures(seed, i, n)
    t0 = time.perf_counter()
    pairs = candidate_pairs(sig, BANDS)
    out.with_suffix(".step").write_text(f"{time.perf_counter() - t0:.3f}")
    np.save(out, pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))])


def run_duckdb(records: int, seed: int, out: Path, folder: Path, memory: str) -> None:
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    keys_dir = folder / "band_keys"
    keys_dir.mkdir()
    for i, start, n in chunks(records):
        k = band_keys(chunk_signatures(seed, i, n))
        rows = np.arange(start, start + n, dtype=np.int64)
        pq.write_table(pa.table({"band": np.repeat(np.arange(BANDS, dtype=np.uint8)[None, :], n, 0).ravel(),
                                 "key": k.ravel(), "row": np.repeat(rows, BANDS)}), keys_dir / f"{i:05d}.parquet")
    t0 = time.perf_counter()
    con = duckdb.connect(str(folder / "scratch.duckdb"))
    con.execute(f"SET memory_limit = '{memory}'")
    con.execute(f"SET temp_directory = '{folder / 'spill'}'")
    src = f"read_parquet('{keys_dir}/*.parquet')"
    pairs = con.execute(
        f"WITH k AS (SELECT band, key, row FROM {src}), "
        "d AS (SELECT band, key FROM k GROUP BY band, key HAVING count(*) > 1), "
        "m AS (SELECT k.* FROM k SEMI JOIN d USING (band, key)), "
        "w AS (SELECT row, min(row) OVER b AS first, lag(row) OVER (b ORDER BY row) AS prev FROM m "
        "      WINDOW b AS (PARTITION BY band, key)) "
        "SELECT DISTINCT lo, hi FROM (SELECT first AS lo, row AS hi FROM w WHERE first < row "
        "                             UNION ALL SELECT prev, row FROM w WHERE prev < row) ORDER BY lo, hi"
    ).fetchnumpy()
    out.with_suffix(".step").write_text(f"{time.perf_counter() - t0:.3f}")
    np.save(out, np.stack([pairs["lo"].astype(np.int64), pairs["hi"].astype(np.int64)], axis=1))


def measured(args: list[str]) -> tuple[float, float, float]:
    from bench.measured import run_measured

    got = run_measured([sys.executable, __file__, *args], capture=False)
    if got.code != 0:
        sys.exit(f"{args[0]} failed with status {got.code}")
    return got.wall_s, got.cpu_s, got.peak_mb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000,4000000")
    ap.add_argument("--memory", default="2GB", help="DuckDB's memory_limit")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--numpy-max", type=int, default=8_000_000,
                    help="above this many records only DuckDB runs (numpy holds ~1.1 KB a record: 24 GiB is ~20M)")
    ap.add_argument("--path", choices=["numpy", "duckdb"], help=argparse.SUPPRESS)
    ap.add_argument("--records", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--folder", help=argparse.SUPPRESS)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if a.path == "numpy":
        return run_numpy(a.records, a.seed, Path(a.out))
    if a.path == "duckdb":
        return run_duckdb(a.records, a.seed, Path(a.out), Path(a.folder), a.memory)
    line = ""
    for records in (int(s) for s in a.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="mashbill-global-dedup-") as tmp:
            tmp = Path(tmp)
            print(f"== {records:,} records (load {os.getloadavg()[0]:.2f})", flush=True)
            common = ["--records", str(records), "--seed", str(a.seed)]
            numpy = records <= a.numpy_max
            if numpy:
                nw, nc, nr = measured(["--path", "numpy", *common, "--out", str(tmp / "numpy.npy")])
            dw, dc, dr = measured(["--path", "duckdb", *common, "--out", str(tmp / "duckdb.npy"),
                                   "--folder", str(tmp), "--memory", a.memory])
            got = np.load(tmp / "duckdb.npy")
            ds = float((tmp / "duckdb.step").read_text())
            if numpy:
                same = np.array_equal(np.load(tmp / "numpy.npy"), got)
                ns = float((tmp / "numpy.step").read_text())
            else:  # not compared: what numpy would hold does not fit; the count of planted pairs is the check
                same, ns, nw, nc, nr = None, float("nan"), float("nan"), float("nan"), float("nan")
            disk = sum(f.stat().st_size for f in (tmp / "band_keys").iterdir())
            if numpy:
                print(f"  numpy   pairs {ns:7.2f}s  process wall {nw:7.2f}s  cpu {nc:7.2f}s  peak {nr:7.0f} MB  "
                      "(signatures made and held in memory)")
            else:
                print(f"  numpy   not run: ~{records * 1.1e3 / 2**30:.0f} GB of signatures in memory")
            print(f"  duckdb  pairs {ds:7.2f}s  process wall {dw:7.2f}s  cpu {dc:7.2f}s  peak {dr:7.0f} MB  (band keys "
                  f"written chunk by chunk, {disk / records:.0f} bytes a record on disk, then one statement)  "
                  f"{len(got):,} pairs, identical: {same}", flush=True)
            line = (f"records={records} numpy_pairs_s={ns:.1f} duckdb_pairs_s={ds:.1f} numpy_s={nw:.1f} "
                    f"duckdb_s={dw:.1f} numpy_cpu_s={nc:.1f} duckdb_cpu_s={dc:.1f} numpy_peak_mb={nr:.0f} "
                    f"duckdb_peak_mb={dr:.0f} numpy_bytes_per_record={nr * 2**20 / records:.0f} "
                    f"duckdb_bytes_per_record={dr * 2**20 / records:.0f} "
                    f"identical={'n/a' if same is None else int(same)} memory_limit={a.memory} "
                    f"load1={os.getloadavg()[0]:.2f}")
            print(line, flush=True)
            if same is False:
                sys.exit(1)


if __name__ == "__main__":
    main()
