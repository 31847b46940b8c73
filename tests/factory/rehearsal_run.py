"""The scale rehearsal's stages (bench/scale.py and tests/cli/test_merge_scale.py both run them): replay-teacher
records of three kinds generated in shards through `mashbill generate --shard i/n`, some shards killed with
SIGKILL after their first commit and resumed, merged, validated, frozen, pulled, preflighted, trained a few steps,
exported to ONNX and release-checked, every stage a `mashbill` command in its own process.

Per stage: wall s, CPU s and peak RSS of its processes (os.wait4's rusage), rows/s and the bytes it left on disk per
record. `check_counts` says what was lost or duplicated after the kills (nothing, or the run is wrong) and whether
the verdict counts are the replay teacher's error mix.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.factory.rehearsal import seed_rows, write_seeds, write_spec
from tests.factory.replay_server import ROOT, build_corpus, expected_counts

MASHBILL = str(Path(sys.executable).parent / "mashbill")
SHARE = {"complexity": 0.5, "routing": 0.3, "plan": 0.2}  # the reference's 500K : 300K : 200K
GUARDS = ROOT / "examples" / "guards-complexity.yaml"


@dataclass
class Stage:
    name: str
    rows: int
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    disk_bytes: int = 0
    exit_codes: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)  # generate: the shards killed with SIGKILL and resumed

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.wall_s if self.wall_s else 0.0

    def line(self, records: int) -> str:
        return (f"{self.name:<10} wall {self.wall_s:8.2f}s  cpu {self.cpu_s:8.2f}s  peak {self.peak_rss_mb:7.0f} MB  "
                f"{self.rows_per_s:10,.0f} rows/s  {self.disk_bytes / max(records, 1):8.0f} B/record  "
                f"exit {','.join(map(str, sorted(set(self.exit_codes))))}")


def _disk(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) if Path(path).exists() else 0


class Runner:
    """Runs commands as children and adds their rusage to the current stage."""

    def __init__(self, root: Path, log=print):
        self.root, self.log = root, log
        self.stages: list[Stage] = []

    def stage(self, name: str, rows: int) -> Stage:
        self.stages.append(Stage(name, rows))
        return self.stages[-1]

    def start(self, *args, env: dict | None = None) -> subprocess.Popen:
        out = open(self.root / "logs" / f"{len(self.stages):02d}-{self.stages[-1].name}.log", "a")
        return subprocess.Popen([MASHBILL, *map(str, args)], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})})

    def wait(self, proc: subprocess.Popen, ok=(0,), *, block: bool = True) -> int | None:
        """The child's exit code once it has ended (None while it runs, with block=False); its rusage goes to
        the stage. Popen.poll() would reap the child and lose the rusage, so only this waits."""
        pid, status, ru = os.wait4(proc.pid, 0 if block else os.WNOHANG)
        if pid == 0:
            return None
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        st = self.stages[-1]
        st.cpu_s += ru.ru_utime + ru.ru_stime
        st.peak_rss_mb = max(st.peak_rss_mb, ru.ru_maxrss / 1024)
        st.exit_codes.append(code)
        if code not in ok and code != -signal.SIGKILL:
            log = (self.root / "logs" / f"{len(self.stages):02d}-{st.name}.log").read_text()[-3000:]
            raise RuntimeError(f"stage {st.name}: {proc.args[1:]} exited {code}\n{log}")
        return code

    def run(self, *args, ok=(0,)) -> int:
        return self.wait(self.start(*args), ok)


def _committed(store: Path) -> bool:
    """A shard has committed at least one batch: its database or its write-ahead log grew past an empty store."""
    db, wal = store / "mashbill.duckdb", store / "mashbill.duckdb.wal"
    return (wal.exists() and wal.stat().st_size > 64 * 1024) or (db.exists() and db.stat().st_size > 3 * 1024 * 1024)


def prepare(root: Path, records: int) -> dict:
    """Seeds and locked specs under root/specs; the number of inputs per kind."""
    corpus = build_corpus()
    plan = {}
    for kind, share in SHARE.items():
        n = max(1, round(records * share)) if kind != "plan" else records - sum(k["n"] for k in plan.values())
        rows = seed_rows(kind, n, corpus)
        spec = write_spec(root / "specs", kind, write_seeds(root / "specs" / f"{kind}.jsonl", rows))
        plan[kind] = {"n": n, "spec": spec, "queries": [r["query"] for r in rows]}
    return {"corpus": corpus, "kinds": plan}


def generate(run: Runner, prep: dict, url: str, *, shards: int = 8, kill: int = 2, parallel: int = 2,
             concurrency: int = 16) -> Stage:
    """Every shard i/n generates every kind into root/shards/s{i}; `kill` shards are SIGKILLed mid-run once they
    have committed a batch, then their commands run again (the resume)."""
    total = sum(k["n"] for k in prep["kinds"].values())
    st = run.stage("generate", total)
    victims = set(range(0, shards, max(1, shards // kill))[:kill]) if kill else set()  # spread: 0 and 4 of 8
    todo = [(i, kind) for kind in prep["kinds"] for i in range(shards)]  # one writer per shard store at a time
    t0 = time.perf_counter()
    running: list[tuple[subprocess.Popen, int, str]] = []
    killed: set[int] = set()

    def launch(i: int, kind: str) -> None:
        store = run.root / "shards" / f"s{i}"
        p = run.start("generate", prep["kinds"][kind]["spec"], "--shard", f"{i}/{shards}", "--store", store,
                      "--base-url", url, "--concurrency", concurrency, "--no-progress")
        running.append((p, i, kind))

    while todo or running:
        busy = {i for _, i, _ in running}
        for job in [j for j in todo if j[0] not in busy]:
            if len(running) >= parallel:
                break
            if job[0] not in busy:
                todo.remove(job)
                busy.add(job[0])
                launch(*job)
        for entry in list(running):
            p, i, kind = entry
            if i in victims and i not in killed and _committed(run.root / "shards" / f"s{i}"):
                p.send_signal(signal.SIGKILL)
                killed.add(i)
                run.wait(p)
                running.remove(entry)
                todo.insert(0, (i, kind))  # the resume: the same command again
                run.log(f"killed shard {i} ({kind}) with SIGKILL after its first commit; resuming")
                continue
            if run.wait(p, block=False) is not None:
                running.remove(entry)
        if running:
            time.sleep(0.05)  # poll the children and the victims' stores (progress, not a timing)
    st.wall_s = time.perf_counter() - t0
    st.disk_bytes = _disk(run.root / "shards")
    st.killed = sorted(killed)
    return st


MERGED_TABLES = ("records", "verdicts", "runs", "record_attempts", "teacher_calls", "events")  # what a merge writes


def table_digests(store: Path) -> dict[str, tuple[int, int]]:
    """Per table a merge writes: (rows, the sum of every row's hash), independent of the order rows went in."""
    import duckdb

    con = duckdb.connect(str(Path(store) / "mashbill.duckdb"), read_only=True)
    try:
        return {t: con.execute(f"SELECT count(*), sum(hash(CAST(t AS VARCHAR))::HUGEINT) FROM {t} t").fetchone()
                for t in MERGED_TABLES}
    finally:
        con.close()


def export_digests(store: Path) -> dict[str, tuple[int, int]]:
    """Per Parquet export of a store: (rows, the sum of the hashes of each row and its position in the file), so
    two exports of the same records in the same order match however their row groups were cut."""
    import duckdb

    con = duckdb.connect()
    try:
        return {f"parquet/{p.parent.name}": con.execute(
            "SELECT count(*), sum(hash(t))::HUGEINT FROM read_parquet(?, file_row_number = true) t",
            [str(p)]).fetchall()[0] for p in sorted(Path(store).glob("parquet/*/records.parquet"))}
    finally:
        con.close()


def check_counts(store: Path, prep: dict, seed: int) -> dict:
    """Per kind: stored records, distinct ids, inputs asked for, failed, and whether statuses and reject codes are
    the replay mix's (retries differ after a kill: an attempt killed before its commit is asked again)."""
    import duckdb

    con = duckdb.connect(str(store / "mashbill.duckdb"), read_only=True)
    out = {}
    try:
        for kind, info in prep["kinds"].items():
            name = f"replay-{kind}"
            n, ids = con.execute("SELECT count(*), count(DISTINCT record_id) FROM records WHERE spec_name = ?",
                                 [name]).fetchone()
            status = Counter(dict(con.execute("SELECT status, count(*) FROM records WHERE spec_name = ? GROUP BY ALL",
                                              [name]).fetchall()))
            codes = Counter(dict(con.execute(
                "SELECT v.code, count(DISTINCT v.record_id) FROM verdicts v JOIN records r USING (record_id) "
                "WHERE r.spec_name = ? AND v.severity = 'reject' AND v.stage <> 'validate' GROUP BY ALL",
                [name]).fetchall()))
            want = expected_counts(seed, info["queries"], prep["corpus"], kind=kind)
            out[kind] = {"inputs": info["n"], "records": n, "distinct": ids, "failed": status.get("failed", 0),
                         "status_ok": status == want["status"], "codes_ok": codes == want["codes"],
                         "status": dict(status), "codes": dict(codes), "want_codes": dict(want["codes"])}
    finally:
        con.close()
    return out


def start_server(root: Path, seed: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "factory" / "replay_server.py"), "--port", "0",
                             "--seed", str(seed)], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = proc.stdout.readline().strip()
    if not line.startswith("replay server on "):
        proc.kill()
        raise RuntimeError(f"the replay server did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[1]


def rehearse(root: Path, records: int, *, shards: int = 8, kill: int = 2, parallel: int = 2, concurrency: int = 16,
             seed: int = 7, train_steps: int = 3, until: str = "release", log=print) -> dict:
    """Every stage in a row under root (emptied first); returns {"stages": [Stage], "counts": ..., "merge": ...}."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "logs").mkdir(parents=True)
    (root / "specs").mkdir()
    run = Runner(root, log)
    prep = prepare(root, records)
    server, url = start_server(root, seed)
    result: dict = {"stages": run.stages, "url": url}
    try:
        gen = generate(run, prep, url, shards=shards, kill=kill, parallel=parallel, concurrency=concurrency)
        result["killed"] = gen.killed
        merged = root / "merged"
        st = run.stage("merge", records)
        t0 = time.perf_counter()
        run.run("merge", merged, *[root / "shards" / f"s{i}" for i in range(shards)], "--require-complete")
        st.wall_s, st.disk_bytes = time.perf_counter() - t0, _disk(merged)
        result["counts"] = check_counts(merged, prep, seed)
        if until == "merge":
            return result
        st = run.stage("validate", records)
        t0 = time.perf_counter()
        for kind in prep["kinds"]:  # exit 0: no accepted record rejected (right answers that fit the window)
            run.run("validate", prep["kinds"][kind]["spec"], "--store", merged, "-q", "--audit-sample", "20")
        st.wall_s, st.disk_bytes = time.perf_counter() - t0, _disk(merged)
        if until == "validate":
            return result
        snap = merged / "snapshots"
        st = run.stage("freeze", prep["kinds"]["complexity"]["n"])
        t0 = time.perf_counter()
        run.run("snapshot", "freeze", prep["kinds"]["complexity"]["spec"], "--name", "scale-complexity",
                "--version", "1", "--store", merged)
        st.wall_s, st.disk_bytes = time.perf_counter() - t0, _disk(snap)
        manifest = json.loads(next(snap.glob("scale-complexity*/manifest.json")).read_text())
        result["selection"] = manifest["selection"]  # records considered, examples written, excluded
        frozen = result["frozen"] = int(manifest["selection"]["examples"])
        st.rows = frozen or st.rows
        st = run.stage("pull", frozen)
        t0 = time.perf_counter()
        run.run("snapshot", "pull", "scale-complexity@1", "--store", merged, "--format", "classification",
                "--out", root / "pull")
        st.wall_s, st.disk_bytes = time.perf_counter() - t0, _disk(root / "pull")
        config = root / "scale-classify.yaml"
        config.write_text(f"name: scale-classify\nmethod: classify\nsnapshot: scale-complexity@1\nstore: {merged}\n"
                          "base_model: embedded:all-minilm-l6-v2\nmax_length: 64\nstudent_layers: 3\n"
                          f"schedule: {{max_steps: {train_steps}, batch_size: 16, learning_rate: 1.0e-4, "
                          "lr_scheduler: linear, save_steps: 1000}\n", encoding="utf-8")
        st = run.stage("preflight", frozen)
        t0 = time.perf_counter()
        run.run("train", "check", config, "--store", merged)
        st.wall_s = time.perf_counter() - t0
        if until == "preflight":
            return result
        runs = root / "runs" / "scale-classify"
        st = run.stage("train", train_steps * 16)
        t0 = time.perf_counter()
        run.run("train", "classify", config, "--stage", f"steps:{train_steps}", "--out", runs, "--store", merged)
        st.wall_s, st.disk_bytes = time.perf_counter() - t0, _disk(runs)
        exp = root / "exports" / "scale-classify-onnx"
        st = run.stage("export", 0)
        t0 = time.perf_counter()
        run.run("export", "onnx", runs, "--store", merged, "--out", exp, "--latency-samples", "20")
        st.wall_s, st.disk_bytes = time.perf_counter() - t0, _disk(exp)
        st = run.stage("release", 0)
        t0 = time.perf_counter()
        result["release_exit"] = run.run("release", "check", exp / "model.int8.onnx", "--incumbent",
                                         exp / "model.onnx", "--guards", GUARDS, "--dir", root / "releases", ok=(0, 1))
        st.wall_s = time.perf_counter() - t0
        return result
    finally:
        server.kill()
        server.wait()


def growth(results: dict[int, list[Stage]]) -> tuple[list[str], str | None]:
    """Per stage: its CPU-s ratio from the smallest to the largest size beside n log n's, flagged when more than
    15% above it; and the stage that grows fastest relative to n log n."""
    sizes = sorted(results)
    lo, hi = sizes[0], sizes[-1]
    nlogn = (hi * math.log(hi)) / (lo * math.log(lo))
    lines, worst, worst_ratio = [], None, 0.0
    by_name = {n: {s.name: s for s in results[n]} for n in sizes}
    for name in by_name[lo]:
        a, b = by_name[lo][name].cpu_s, by_name[hi].get(name)
        if b is None or a <= 0:
            continue
        ratio = b.cpu_s / a
        flag = "  FASTER THAN n log n" if ratio > 1.15 * nlogn else ""
        steps = " -> ".join(f"{by_name[n][name].cpu_s:.1f}" for n in sizes if name in by_name[n])
        lines.append(f"  {name:<10} cpu s {steps}: x{ratio:.2f} for n x{hi / lo:.1f} (n log n x{nlogn:.2f}){flag}")
        if ratio / nlogn > worst_ratio:
            worst, worst_ratio = name, ratio / nlogn
    return lines, worst
