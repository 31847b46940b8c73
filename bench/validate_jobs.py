"""`mashbill validate --jobs N` beside one process, on the same store, alternating: wall, CPU and the report.

    .venv/bin/python bench/validate_jobs.py --records 100000            # a rehearsal store (replay teacher, merged)
    .venv/bin/python bench/validate_jobs.py --store DIR --spec A.yaml --spec B.yaml [--jobs 2] [--repeat 2]

With --records, the scale rehearsal (bench/scale.py's stages, tests/factory/rehearsal_run.py) builds a merged store of
N replay-teacher records (complexity, category and plan specs) first; --store and --spec take one already made.
Every run is `mashbill validate SPEC --store STORE --no-write -q --audit-sample 20 --json` with --jobs 1 and --jobs N,
one after the other, --repeat times; wall seconds, and CPU seconds of the command and its worker processes (os.wait4).
The reports must be the same but for timings and the count of pieces tokenized (each worker keeps its own cache);
identical=0 otherwise (and exit status 1). Peak RSS is the largest single process's, not the sum over workers.

Last line: records= jobs= wall_1_s= wall_n_s= speedup_wall= cpu_ratio= identical= load1=
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def validate(spec: Path, store: Path, jobs: int) -> tuple[float, float, float, dict]:
    """(wall s, CPU s of the command and its workers, peak RSS MB, the report without timings)."""
    from bench.measured import run_measured, validation_findings
    from tests.factory.rehearsal_run import MASHBILL

    run = run_measured([MASHBILL, "validate", spec, "--store", store, "--no-write", "-q", "--audit-sample", "20",
                        "--json", "--jobs", jobs])
    if run.code not in (0, 1):
        raise SystemExit(f"validate {spec.name} --jobs {jobs} exited {run.code}: {run.tail(400)}")
    return run.wall_s, run.cpu_s, run.peak_mb, validation_findings(run.stdout)[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, help="build a merged rehearsal store of this many records first")
    ap.add_argument("--store", type=Path)
    ap.add_argument("--spec", type=Path, action="append", default=[])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store, specs = args.store, args.spec
        if args.records:
            from tests.factory.rehearsal_run import rehearse

            root = Path(tmp) / "run"
            rehearse(root, args.records, until="merge", log=lambda *a: None)
            store, specs = root / "merged", sorted((root / "specs").glob("*.yaml"))
        if store is None or not specs:
            ap.error("give --records, or --store and --spec")
        totals = {1: [0.0, 0.0], args.jobs: [0.0, 0.0]}
        identical, records = True, 0
        for spec in specs:
            reports = {}
            for round_ in range(args.repeat):
                for jobs in (1, args.jobs):
                    wall, cpu, peak, report = validate(spec, store, jobs)
                    totals[jobs][0] += wall
                    totals[jobs][1] += cpu
                    reports.setdefault(jobs, report)
                    print(f"{spec.stem:24s} round {round_ + 1} jobs {jobs}: {report['records']:>8,} records  wall "
                          f"{wall:7.2f}s  cpu {cpu:7.2f}s  peak {peak:6.0f} MB  load1 {os.getloadavg()[0]:.2f}",
                          flush=True)
            same = reports[1] == reports[args.jobs]
            identical &= same
            records += reports[1]["records"]
            print(f"{spec.stem:24s} reports identical: {same}")
    (w1, c1), (wn, cn) = totals[1], totals[args.jobs]
    print(f"records={records} jobs={args.jobs} wall_1_s={w1 / args.repeat:.1f} wall_n_s={wn / args.repeat:.1f} "
          f"speedup_wall={w1 / wn:.2f} cpu_ratio={cn / c1:.2f} identical={int(identical)} "
          f"load1={os.getloadavg()[0]:.2f}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
