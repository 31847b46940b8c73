"""`mashbill validate` by this checkout beside an earlier revision, on the same store, alternating (issue 29).

    .venv/bin/python bench/validate_before.py --store DIR --spec A.yaml [--spec B.yaml] --before REV [--repeat 2]

REV's source (`git archive`, imported ahead of this checkout) validates a copy of the store with the migrations it
lacks undone (tests/curation/revision.py); this checkout validates the store itself, which must be migrated (open it
once for writing). Every run is `mashbill validate SPEC --store STORE --no-write -q --audit-sample 20 --json`, REV
first, --repeat times; wall seconds, CPU seconds and peak RSS of the command (os.wait4), and the seconds Python's
cycle collector ran in it (gc.callbacks, from a sitecustomize on PYTHONPATH; timing every collection costs little).
The reports must be the same but for timings and the span engine's own work (its cut policy's reason and the pieces
it tokenized, printed when they differ); identical=0 otherwise (and exit status 1). Figures are the best run of each
side, summed over the specs.

Last line: records= before_s= after_s= before_cpu_s= after_cpu_s= speedup_cpu= before_gc_s= after_gc_s=
before_peak_rss_mb= peak_rss_mb= identical= load1=
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GC_TIMER = '''import atexit, gc, sys, time
_spent, _start = [0.0, 0], [0.0]
def _timed(phase, info):
    if phase == "start":
        _start[0] = time.perf_counter()
    else:
        _spent[0] += time.perf_counter() - _start[0]
        _spent[1] += 1
gc.callbacks.append(_timed)
atexit.register(lambda: sys.stderr.write(f"bench-gc-seconds {_spent[0]:.3f} {_spent[1]}\\n"))
'''


def validate(spec: Path, store: Path, pythonpath: str) -> dict:
    """wall s, CPU s, peak RSS MB, collector s and the report without timings of one validation."""
    from bench.measured import run_measured, validation_findings
    from tests.factory.rehearsal_run import MASHBILL

    run = run_measured([MASHBILL, "validate", spec, "--store", store, "--no-write", "-q", "--audit-sample", "20",
                        "--json"], env={**os.environ, "PYTHONPATH": pythonpath}, cwd=tempfile.gettempdir())
    if run.code not in (0, 1):
        raise SystemExit(f"validate {spec.name} --store {store} exited {run.code}: {run.tail(400)}")
    report, work = validation_findings(run.stdout)
    gc_s = re.search(r"bench-gc-seconds ([\d.]+)", run.stderr.decode(errors="replace"))
    report.pop("source")  # the store's path: REV validates a copy
    # the two revisions' span engines may cut differently (a faster cut policy tokenizes fewer pieces): how, not what
    how = {"cut_policy_reason": (report.get("span") or {}).pop("cut_policy_reason", None),
           "pieces_tokenized": work.get("pieces_tokenized")}
    return {"wall": run.wall_s, "cpu": run.cpu_s, "rss": run.peak_mb,
            "gc": float(gc_s.group(1)) if gc_s else float("nan"), "report": report, "how": how}


def main() -> int:
    from tests.curation.revision import checkout, store_for_revision

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--spec", type=Path, action="append", required=True)
    ap.add_argument("--before", required=True, help="the earlier revision (a commit, tag or branch)")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mashbill-validate-before-"))
    try:
        timer = tmp / "timer"
        timer.mkdir()
        (timer / "sitecustomize.py").write_text(GC_TIMER)
        pkg = checkout(args.before, tmp / "rev")
        old_store = store_for_revision(args.store, pkg, tmp / "store")
        sides = {"before": (old_store, f"{pkg}{os.pathsep}{timer}"), "after": (args.store, str(timer))}
        best: dict[str, dict[str, dict]] = {"before": {}, "after": {}}
        identical, records = True, 0
        for spec in args.spec:
            for i in range(args.repeat):
                runs = {}
                for side, (store, path) in sides.items():
                    runs[side] = r = validate(spec, store, path)
                    print(f"{spec.name} {side:>6}: {r['wall']:.2f}s wall, {r['cpu']:.2f}s CPU, collector "
                          f"{r['gc']:.2f}s, peak {r['rss']:.0f} MB; load1 {os.getloadavg()[0]:.2f}", flush=True)
                    if spec.name not in best[side] or r["cpu"] < best[side][spec.name]["cpu"]:
                        best[side][spec.name] = r
                if runs["before"]["how"] != runs["after"]["how"]:
                    print(f"{spec.name}: the span engine's work (not compared): before {runs['before']['how']}, "
                          f"after {runs['after']['how']}")
                same = runs["before"]["report"] == runs["after"]["report"]
                identical &= same
                if not same:
                    a, b = runs["before"]["report"], runs["after"]["report"]
                    differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
                    print(f"{spec.name}: REPORTS DIFFER in {differ}")
            records += best["after"][spec.name]["report"]["records"]

        def total(side, key):
            return sum(r[key] for r in best[side].values())

        print(f"records={records} before_s={total('before', 'wall'):.2f} after_s={total('after', 'wall'):.2f} "
              f"before_cpu_s={total('before', 'cpu'):.2f} after_cpu_s={total('after', 'cpu'):.2f} "
              f"speedup_cpu={total('before', 'cpu') / total('after', 'cpu'):.2f} "
              f"before_gc_s={total('before', 'gc'):.2f} after_gc_s={total('after', 'gc'):.2f} "
              f"before_peak_rss_mb={max(r['rss'] for r in best['before'].values()):.0f} "
              f"peak_rss_mb={max(r['rss'] for r in best['after'].values()):.0f} identical={int(identical)} "
              f"load1={os.getloadavg()[0]:.2f}")
        return 0 if identical else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
