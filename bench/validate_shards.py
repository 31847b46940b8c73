"""Validation split as on a SLURM array: `validate --per-record` on each shard store where it was made, the merge,
then `validate` of the merged store reading the kept checks, beside one validation of the merged store that checks
every record itself (`--recheck`), on the same records.

    .venv/bin/python bench/validate_shards.py --records 100000     # a rehearsal (replay teacher, 8 shard stores)
    .venv/bin/python bench/validate_shards.py --run DIR             # a rehearsal folder kept by bench/scale.py --keep

Steps: the shard stores are copied (the originals stay as they are) and merged once as they are (the size of a
merged store without kept checks); then, spec by spec, each copy gets `validate SPEC --store SHARD --per-record -q`,
one after the other (on a cluster they run at once, one per array task: the array waits for the slowest); the
copies are merged again (timed); then on that merged store `validate SPEC --no-write --json` (kept checks read) and
the same with `--recheck`, alternating, --repeat times. The two reports must be the same but for timings, the pieces
tokenized and the per_record section; identical=0 otherwise (and exit status 1). CPU seconds are each command's
own and its children's (os.wait4).

Last line: records= shards= shard_cpu_s= shard_max_wall_s= merge_s= after_merge_s= full_s= speedup_after_merge=
kept_bytes_per_record= after_merge_peak_mb= full_peak_mb= identical= load1=
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PEAK = [0.0]


def mashbill(*args, ok=(0,)) -> tuple[float, float, bytes]:
    """(wall s, CPU s of the command and its children, stdout) of one `mashbill` command; its peak RSS (MB, the
    largest process's) in PEAK[0]."""
    from bench.measured import run_measured
    from tests.factory.rehearsal_run import MASHBILL

    run = run_measured([MASHBILL, *args])
    if run.code not in ok:
        raise SystemExit(f"mashbill {' '.join(map(str, args))} exited {run.code}: {run.tail()}")
    PEAK[0] = run.peak_mb
    return run.wall_s, run.cpu_s, run.stdout


def report_of(stdout: bytes) -> dict:
    from bench.measured import validation_findings

    report = validation_findings(stdout)[0]
    report.pop("per_record", None)
    return report


def size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, help="run the rehearsal up to its merge with this many records first")
    ap.add_argument("--run", type=Path, help="a rehearsal folder (shards/s<i>, specs/*.yaml)")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("MASHBILL_BENCH_TMP")) as tmp:
        tmp = Path(tmp)
        run = args.run
        if args.records:
            from tests.factory.rehearsal_run import rehearse

            run = tmp / "run"
            rehearse(run, args.records, until="merge", log=lambda *a: None)
        if run is None:
            ap.error("give --records or --run")
        specs = sorted((run / "specs").glob("*.yaml"))
        shards = []
        from mashbill.factory.store import Store

        for src in sorted((run / "shards").iterdir()):
            shards.append(tmp / "shards" / src.name)
            shutil.copytree(src, shards[-1])
            Store.open(shards[-1]).close()  # migrated to this Mashbill's schema, as the array's would be
        plain = tmp / "plain"
        mashbill("merge", plain, *shards)
        shard_cpu, shard_wall = 0.0, {s: 0.0 for s in shards}
        for spec in specs:
            for shard in shards:
                wall, cpu, _ = mashbill("validate", spec, "--store", shard, "--per-record", "-q", "--audit-sample",
                                        "20", ok=(0, 1))
                shard_cpu += cpu
                shard_wall[shard] += wall
                print(f"{spec.stem:24s} {shard.name}: --per-record wall {wall:6.2f}s  cpu {cpu:6.2f}s  peak "
                      f"{PEAK[0]:5.0f} MB  load1 {os.getloadavg()[0]:.2f}", flush=True)
        merged = tmp / "merged"
        merge_s, _, _ = mashbill("merge", merged, *shards)
        kept_bytes = size(merged) - size(plain)
        print(f"merge of {len(shards)} shard stores with their kept checks: {merge_s:.2f}s; merged store "
              f"{size(merged) / 1e6:.1f} MB, {size(plain) / 1e6:.1f} MB without kept checks", flush=True)
        after = full = 0.0
        peaks = {"kept": 0.0, "recheck": 0.0}
        identical, records = True, 0
        for spec in specs:
            reports = {}
            for round_ in range(args.repeat):
                for mode in ("kept", "recheck"):
                    extra = ("--recheck",) if mode == "recheck" else ()
                    wall, cpu, out = mashbill("validate", spec, "--store", merged, "--no-write", "-q", "--json",
                                              "--audit-sample", "20", *extra, ok=(0, 1))
                    got = json.loads(out)
                    if mode == "kept":
                        after += wall
                        assert got["per_record"]["checked_here"] == 0, got["per_record"]
                    else:
                        full += wall
                    reports.setdefault(mode, report_of(out))
                    peaks[mode] = max(peaks[mode], PEAK[0])
                    print(f"{spec.stem:24s} round {round_ + 1} {mode:8s}: {got['records']:>8,} records  wall "
                          f"{wall:7.2f}s  cpu {cpu:7.2f}s  peak {PEAK[0]:6.0f} MB  load1 {os.getloadavg()[0]:.2f}",
                          flush=True)
            same = reports["kept"] == reports["recheck"]
            identical &= same
            records += reports["kept"]["records"]
            print(f"{spec.stem:24s} reports identical: {same}")
    print(f"records={records} shards={len(shards)} shard_cpu_s={shard_cpu:.1f} "
          f"shard_max_wall_s={max(shard_wall.values()):.1f} merge_s={merge_s:.1f} after_merge_s={after / args.repeat:.1f} "
          f"full_s={full / args.repeat:.1f} speedup_after_merge={full / after:.2f} "
          f"kept_bytes_per_record={kept_bytes / max(1, records):.0f} after_merge_peak_mb={peaks['kept']:.0f} "
          f"full_peak_mb={peaks['recheck']:.0f} identical={int(identical)} "
          f"load1={os.getloadavg()[0]:.2f}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
