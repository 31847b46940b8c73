"""The scale rehearsal (issue 29): N replay-teacher records through every stage in a row, with the cost of each.

    .venv/bin/python bench/scale.py --records 100000
    .venv/bin/python bench/scale.py --sizes 10000,30000,100000       # how each stage's cost grows with n

Complexity, category (routing) and plan records (50/30/20, the reference's 500K : 300K : 200K) come from the replay
teacher (tests/factory/replay_server.py: an OpenAI-compatible server on 127.0.0.1 with a seeded error mix) through
the real `mashbill generate --shard i/8`; two shards are killed with SIGKILL after their first commit and resumed;
then `merge`, `validate` (every kind), `snapshot freeze` and `pull` (complexity), `train check` (the preflight),
`train classify` for a few steps, `export onnx` and `release check`. The stages live in
tests/factory/rehearsal_run.py, which tests/cli/test_merge_scale.py runs at 10K records in CI.

Per stage: wall s, CPU s and peak RSS of its processes, rows/s and bytes on disk per record. After the merge: records
lost, duplicated or failed (must be 0) and whether the verdict counts are the replay mix's. With --sizes, each
stage's CPU-s growth from the smallest to the largest size is compared with n log n; faster growth is flagged.

Bespoke Curator (bespokelabs-curator, in its own environment: --curator-python, default
~/.cache/mashbill-curator-venv/bin/python) asks the same replay server for the same complexity requests with the
same requests in flight (--parallel x --concurrency); its rows/s stands beside one `mashbill generate` process's
over the same seeds (no shards, no kills), each against a fresh server.

Last line: records= gen_rows_per_s= curator_rows_per_s= merge_s= validate_rows_per_s_per_core= freeze_rows_per_s=
preflight_s= peak_rss_mb= bytes_per_record= worst_stage= store_memory=
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CURATOR_PY = Path.home() / ".cache" / "mashbill-curator-venv" / "bin" / "python"
CURATOR_SCRIPT = ROOT / "tests" / "factory" / "replay_curator.py"


def curator_rate(python: Path, url: str, seeds: Path, n: int, in_flight: int) -> float | None:
    """Curator's rows/s over the first n complexity seeds against the replay server, or None without Curator."""
    if not python.exists():
        print(f"curator: no environment at {python} (python -m venv it; pip install bespokelabs-curator)")
        return None
    out = subprocess.run([str(python), str(CURATOR_SCRIPT), "--url", url, "--seeds", str(seeds), "--n", str(n),
                          "--in-flight", str(in_flight)], capture_output=True, text=True,
                         env={**os.environ, "CURATOR_DISABLE_CACHE": "1", "CURATOR_DISABLE_RICH_DISPLAY": "1"})
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        print(f"curator: exited {out.returncode}: {(out.stderr or out.stdout).strip()[-600:]}")
        return None
    res = json.loads(lines[-1])
    print(f"curator: {res['requests']} requests, {res['rows']} rows ({res['parsed']} parsed) in {res['wall_s']:.1f}s "
          f"with {in_flight} in flight: {res['requests'] / res['wall_s']:.0f} requests/s")
    return res["requests"] / res["wall_s"]  # requests answered per second, as the generate stage counts every record


def single_generate_rate(root: Path, url: str, n: int, in_flight: int) -> float:
    """One `mashbill generate` process over the first n complexity seeds with `in_flight` requests: Curator's match."""
    from tests.factory.rehearsal_run import MASHBILL

    spec = root / "specs" / "replay-complexity@1.yaml"
    t0 = time.perf_counter()
    subprocess.run([MASHBILL, "generate", str(spec), "--store", str(root / "single"), "--base-url", url,
                    "--concurrency", str(in_flight), "--limit", str(n), "--no-progress"], check=True,
                   capture_output=True)
    wall = time.perf_counter() - t0
    print(f"mashbill generate (one process, no shards): {n} requests in {wall:.1f}s with {in_flight} in flight: "
          f"{n / wall:.0f} requests/s")
    return n / wall


def server_rps(root: Path, args) -> None:
    """The replay server alone: requests/s over keep-alive connections, with no generate loop in the way."""
    from tests.factory.rehearsal_run import start_server
    from tests.factory.replay_load import requests_per_s
    from tests.factory.replay_server import build_corpus

    server, url = start_server(root, args.seed)
    try:
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        rps = requests_per_s(port, sorted(build_corpus())[0], concurrency=args.parallel * args.concurrency)
        print(f"replay server alone: {rps:,.0f} requests/s with {args.parallel * args.concurrency} connections "
              f"(load {open('/proc/loadavg').read().split()[0]})")
    finally:
        server.kill()
        server.wait()


def one_size(root: Path, n: int, args) -> dict:
    from tests.factory.rehearsal_run import rehearse, start_server

    t0 = time.perf_counter()
    res = rehearse(root, n, shards=args.shards, kill=args.kill, parallel=args.parallel,
                   concurrency=args.concurrency, seed=args.seed, train_steps=args.train_steps, until=args.until)
    print(f"\n== {n:,} records (load {open('/proc/loadavg').read().split()[0]}), "
          f"{time.perf_counter() - t0:.0f}s in all; shards killed and resumed: {res.get('killed')}")
    for st in res["stages"]:
        print("  " + st.line(n))
    bad = 0
    for kind, c in res["counts"].items():
        lost, dup = c["inputs"] - c["distinct"], c["records"] - c["distinct"]
        bad += lost + dup + c["failed"] + (not c["status_ok"]) + (not c["codes_ok"])
        print(f"  {kind:<10} inputs {c['inputs']:>8}  lost {lost}  duplicated {dup}  failed {c['failed']}  "
              f"statuses {'= mix' if c['status_ok'] else '!= mix'}  reject codes {'= mix' if c['codes_ok'] else '!= mix'}"
              f"  {json.dumps(c['codes'], sort_keys=True)}")
    res["bad"] = bad
    res["curator"] = None
    if args.curator_records:  # each against a fresh server: both meet the first-attempt 429s and 500s
        m = min(res["counts"]["complexity"]["inputs"], args.curator_records)
        in_flight = args.parallel * args.concurrency
        for name, measure in (("curator", lambda url: curator_rate(Path(args.curator_python), url, root / "specs" /
                                                                   "complexity.jsonl", m, in_flight)),
                              ("single", lambda url: single_generate_rate(root, url, m, in_flight))):
            server, url = start_server(root, args.seed)
            try:
                res[name] = measure(url)
            finally:
                server.kill()
                server.wait()
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--sizes", help="comma-separated record counts, smallest first (overrides --records)")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--kill", type=int, default=2, help="shards killed with SIGKILL after their first commit")
    ap.add_argument("--parallel", type=int, default=2, help="shard processes at a time")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight per generate process")
    ap.add_argument("--seed", type=int, default=7, help="the replay teacher's error mix seed")
    ap.add_argument("--train-steps", type=int, default=3)
    ap.add_argument("--until", default="release", choices=["merge", "validate", "preflight", "release"])
    ap.add_argument("--curator-python", default=str(CURATOR_PY))
    ap.add_argument("--curator-records", type=int, default=20_000, help="records Curator generates (0: skip)")
    ap.add_argument("--dir", help="folder to make the work folder in, created if missing (default: the system's "
                                  "temporary folder; the work folder is removed at the end unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (its stores, specs and logs) and say where")
    ap.add_argument("--store-memory", metavar="SIZE",
                    help="MASHBILL_STORE_MEMORY for every stage (e.g. 1GB: DuckDB's memory limit for a store "
                         "connection; default: as set, else DuckDB's 80%% of RAM)")
    args = ap.parse_args()
    if args.store_memory:
        os.environ["MASHBILL_STORE_MEMORY"] = args.store_memory  # every stage's process inherits it
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [args.records]
    if args.dir:
        os.makedirs(args.dir, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if args.keep:
            tmp = tempfile.mkdtemp(prefix="mashbill-scale-", dir=args.dir)
            stack.callback(print, f"work folder kept: {tmp}")
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="mashbill-scale-", dir=args.dir))
        server_rps(Path(tmp), args)
        results = {n: one_size(Path(tmp) / f"n{n}", n, args) for n in sizes}
    n = sizes[-1]
    res = results[n]
    st = {s.name: s for s in res["stages"]}
    worst = max(res["stages"], key=lambda s: s.wall_s).name
    if len(sizes) > 1:
        print(f"\n== growth from {sizes[0]:,} to {n:,} records (CPU s)")
        from tests.factory.rehearsal_run import growth

        lines, worst_growth = growth({n: r["stages"] for n, r in results.items()})
        print("\n".join(lines))
        worst = worst_growth or worst
    gen = st["generate"]
    cur = res["curator"]
    val = st.get("validate")
    frz = st.get("freeze")
    pre = st.get("preflight")
    merged_bytes = st["merge"].disk_bytes
    print(f"load {open('/proc/loadavg').read().strip()}; nothing lost or duplicated: {'yes' if res['bad'] == 0 else 'NO'}")
    print(f"records={n} gen_rows_per_s={gen.rows_per_s:.0f} "
          f"curator_rows_per_s={f'{cur:.0f}' if cur else 'n/a'} merge_s={st['merge'].wall_s:.1f} "
          f"validate_rows_per_s_per_core={f'{val.rows / val.cpu_s:.0f}' if val and val.cpu_s else 'n/a'} "
          f"freeze_rows_per_s={f'{frz.rows_per_s:.0f}' if frz else 'n/a'} "
          f"preflight_s={f'{pre.wall_s:.1f}' if pre else 'n/a'} "
          f"peak_rss_mb={max(s.peak_rss_mb for s in res['stages']):.0f} "
          f"bytes_per_record={merged_bytes / n:.0f} worst_stage={worst} "
          f"store_memory={os.environ.get('MASHBILL_STORE_MEMORY') or 'duckdb-default'}")
    return 0 if res["bad"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
