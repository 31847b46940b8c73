"""The Parquet export's two ways to its parts, side by side: ranges of record ids against one routing scan (issue 29).

    MASHBILL_STORE_MEMORY=1GB .venv/bin/python bench/parquet_export.py --store DIR --spec A.yaml [--spec B.yaml]

For each spec, `Store.export_parquet` of the same read-only store twice, each in a process of its own (so each
side's peak RSS is its own), alternating, --repeat times: once with every part read by a range of record ids (each
part a scan of the whole table, as every export did until this bench was written), once with the records routed to
their parts in one scan (`EXPORT_RANGE_PARTS` set to 0 and to no limit in turn). The exports are written under a
temporary folder, not the store's own parquet/. Both must hold the same rows and values in the same order (same=0
otherwise, and exit status 1). CPU seconds, wall seconds and peak RSS of each side's process (Python's start, ~1
CPU-s, counted on both sides), the best run.

Last line: records= ranges_cpu_s= routed_cpu_s= speedup_cpu= ranges_s= routed_s= ranges_peak_mb= routed_peak_mb=
same= load1=
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def export_once(store_dir: Path, spec: Path, out: Path, routed: bool) -> dict:
    """One export in this process (the child's side); what it wrote and how many records."""
    import mashbill.factory.store as store_module
    from mashbill.factory.store import Store
    from mashbill.specs import load_spec

    store_module.EXPORT_RANGE_PARTS = 0 if routed else sys.maxsize
    rs = load_spec(spec)
    with Store.open(store_dir, read_only=True) as store:
        store.root = out  # the export goes under `out`, not into the store's own parquet/
        path = store.export_parquet(rs.spec.name, rs.spec.version, rs.hash)
    import pyarrow.parquet as pq

    return {"path": str(path), "records": pq.ParquetFile(path).metadata.num_rows}


def run_side(store_dir: Path, spec: Path, out: Path, routed: bool) -> dict:
    """One export in a child process: its CPU seconds, wall seconds and peak RSS (os.wait4), and what it wrote."""
    from bench.measured import run_measured

    run = run_measured([sys.executable, __file__, "--child", "--store", store_dir, "--spec", spec, "--out", out]
                       + (["--routed"] if routed else []))
    if run.code:
        raise SystemExit(f"the {'routed' if routed else 'ranges'} export of {spec.name} failed (status {run.code}): "
                         f"{run.tail(400)}")
    got = json.loads(run.stdout.decode().strip().splitlines()[-1])
    return {**got, "cpu": run.cpu_s, "wall": run.wall_s, "peak_mb": run.peak_mb}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--spec", type=Path, action="append", required=True)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--routed", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--compare", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(export_once(args.store, args.spec[0], args.out, args.routed)))
        return 0
    if args.compare:
        import pyarrow.parquet as pq

        return 0 if pq.read_table(args.compare[0]).equals(pq.read_table(args.compare[1])) else 1

    sides = ("ranges", "routed")
    total = {side: {"cpu": 0.0, "wall": 0.0, "peak_mb": 0.0} for side in sides}
    records, same = 0, True
    with tempfile.TemporaryDirectory(prefix="mashbill-export-") as tmp:
        for spec in args.spec:
            best = {side: {"cpu": float("inf"), "wall": float("inf"), "peak_mb": 0.0} for side in sides}
            paths = {}
            for _ in range(args.repeat):
                for side in sides:
                    got = run_side(args.store, spec, Path(tmp) / side, side == "routed")
                    best[side] = {"cpu": min(best[side]["cpu"], got["cpu"]),
                                  "wall": min(best[side]["wall"], got["wall"]),
                                  "peak_mb": max(best[side]["peak_mb"], got["peak_mb"])}
                    paths[side], n = got["path"], got["records"]
            # compared in a child: a parent that held both tables would lend its size to every later child's peak
            # (a forked child's ru_maxrss counts the parent's pages it started with)
            equal = subprocess.run([sys.executable, __file__, "--store", str(args.store), "--spec", str(spec),
                                    "--compare", paths["ranges"], paths["routed"]]).returncode == 0
            same &= equal
            records += n
            for side in sides:
                for key in ("cpu", "wall"):
                    total[side][key] += best[side][key]
                total[side]["peak_mb"] = max(total[side]["peak_mb"], best[side]["peak_mb"])
            print(f"{spec.name}: {n:,} records, ranges {best['ranges']['cpu']:.2f} CPU-s "
                  f"{best['ranges']['wall']:.2f} s {best['ranges']['peak_mb']:.0f} MB, routed "
                  f"{best['routed']['cpu']:.2f} CPU-s {best['routed']['wall']:.2f} s "
                  f"{best['routed']['peak_mb']:.0f} MB, same rows: {equal} | load1 {os.getloadavg()[0]:.2f}",
                  flush=True)
    r, o = total["ranges"], total["routed"]
    print(f"records={records} ranges_cpu_s={r['cpu']:.2f} routed_cpu_s={o['cpu']:.2f} "
          f"speedup_cpu={r['cpu'] / o['cpu']:.2f} ranges_s={r['wall']:.2f} routed_s={o['wall']:.2f} "
          f"ranges_peak_mb={r['peak_mb']:.0f} routed_peak_mb={o['peak_mb']:.0f} same={int(same)} "
          f"load1={os.getloadavg()[0]:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
