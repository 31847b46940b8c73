"""Merging 8 shard stores: this checkout beside an earlier revision, on the same stores (issue 29).

    .venv/bin/python bench/merge.py --records 100000 --before 7f4ce86

The shard stores are the scale rehearsal's (tests/factory/rehearsal_run.py: replay-teacher records of three kinds
through `mashbill generate --shard i/8`, two shards killed with SIGKILL and resumed), built once under
MASHBILL_BENCH_DIR (default ~/.cache/mashbill/bench/merge-N). Each merge is `mashbill merge OUT s0 .. s7
--require-complete` in its own process (wall, CPU and peak RSS from os.wait4), then the same command again into
the same output (every copy is already there: what a re-run after more shards costs). With --before, REV's code
(`git archive`, imported ahead of this checkout) merges the same stores first; the two merged stores must hold the
same rows, table by table (row counts and a sum of row hashes), and the same Parquet exports (rows in the same
order), or the bench exits 1.

Last line: records= before_s= merge_s= before_cpu_s= merge_cpu_s= speedup_cpu= before_peak_rss_mb= peak_rss_mb=
again_before_s= again_s= identical= goal_merge_s=60 load1=
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.curation.revision import checkout  # noqa: E402
from tests.factory.rehearsal_run import (Runner, export_digests, generate, prepare, start_server,  # noqa: E402
                                         table_digests)

SHARDS = 8


def build(folder: Path, records: int, seed: int = 7) -> None:
    """The rehearsal's generate stage into folder/shards/s0..s7 (replay server, 2 shards killed and resumed); the
    file `built` marks a finished build (its specs name their seed files by absolute path, so it stays where built)."""
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "logs").mkdir(parents=True)
    (folder / "specs").mkdir()
    run = Runner(folder)
    prep = prepare(folder, records)
    server, url = start_server(folder, seed)
    try:
        st = generate(run, prep, url, shards=SHARDS)
    finally:
        server.kill()
        server.wait()
    print(f"built {SHARDS} shard stores of {records:,} records in {st.wall_s:.0f}s (killed and resumed: "
          f"{st.killed})", flush=True)
    (folder / "built").write_text(f"{records}\n")


def merge(shards: Path, out: Path, pythonpath: Path | None) -> dict:
    """One `mashbill merge` (REV's code when pythonpath is given) in its own process: wall, CPU s, peak RSS MB."""
    env = {"PYTHONPATH": str(pythonpath)} if pythonpath else None  # ahead of the editable install's finder
    out.parent.mkdir(parents=True, exist_ok=True)
    run = Runner(out.parent)
    (out.parent / "logs").mkdir(exist_ok=True)
    st = run.stage("merge", 0)
    t0 = time.perf_counter()
    run.wait(run.start("merge", out, *[shards / f"s{i}" for i in range(SHARDS)], "--require-complete", env=env))
    return {"wall": time.perf_counter() - t0, "cpu": st.cpu_s, "rss_mb": st.peak_rss_mb}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--before", metavar="REV", help="also merge with this git revision's code and compare")
    args = ap.parse_args()
    cache = Path(os.environ.get("MASHBILL_BENCH_DIR", Path.home() / ".cache" / "mashbill" / "bench"))
    folder = cache / f"merge-{args.records}"
    if not (folder / "built").is_file():
        build(folder, args.records)
    shards = folder / "shards"
    tmp = Path(tempfile.mkdtemp(prefix="mashbill-merge-bench-"))
    try:
        sides = [("before", checkout(args.before, tmp / "rev")), ("after", None)] if args.before else [("after", None)]
        res = {}
        for name, pkg in sides:
            code = subprocess.run([sys.executable, "-c", "import mashbill.factory.shards as m; print(m.__file__)"],
                                  env={**os.environ, **({"PYTHONPATH": str(pkg)} if pkg else {})}, capture_output=True,
                                  text=True, check=True, cwd=tmp).stdout.strip()  # not this checkout on sys.path
            assert code.startswith(str(pkg)) if pkg else code.startswith(str(ROOT)), (name, code)  # which code merges
            out = tmp / name / "merged"
            first = merge(shards, out, pkg)
            again = merge(shards, out, pkg)
            res[name] = {**first, "again": again["wall"], "digests": {**table_digests(out), **export_digests(out)}}
            print(f"{name:>6}: {first['wall']:.2f}s wall, {first['cpu']:.2f}s CPU, peak {first['rss_mb']:.0f} MB; "
                  f"again {again['wall']:.2f}s wall, peak {again['rss_mb']:.0f} MB; "
                  f"{res[name]['digests']['records'][0]:,} records; load1 {os.getloadavg()[0]:.2f}", flush=True)
        a, b = res["after"], res.get("before")
        same = b is None or a["digests"] == b["digests"]
        if not same:
            print("NOT IDENTICAL: " + ", ".join(t for t in sorted(a["digests"].keys() | b["digests"].keys())
                                                if a["digests"].get(t) != b["digests"].get(t)))
        nb = (lambda k, f="{:.2f}": f.format(b[k]) if b else "n/a")
        speedup = f"{b['cpu'] / a['cpu']:.2f}" if b else "n/a"
        print(f"records={args.records} before_s={nb('wall')} merge_s={a['wall']:.2f} before_cpu_s={nb('cpu')} "
              f"merge_cpu_s={a['cpu']:.2f} speedup_cpu={speedup} "
              f"before_peak_rss_mb={nb('rss_mb', '{:.0f}')} peak_rss_mb={a['rss_mb']:.0f} "
              f"again_before_s={nb('again')} again_s={a['again']:.2f} identical={int(same)} goal_merge_s=60 "
              f"load1={os.getloadavg()[0]:.2f}")
        return 0 if same else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
