"""kill -9 of a generating `mashbill generate` at five random moments, each followed by a resume.

The teacher is our deterministic server on 127.0.0.1 through the openai backend (pipelined, 2 in
flight), so the run is long enough to be killed mid-batch and the answers are the same every time.
(The real 135M model makes the same point much more slowly; its determinism across resumes is
covered by the embedded teacher's own tests.) The final records must equal an uninterrupted run's,
and no record may be stored, or have its teacher calls stored, twice.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

from teacher_helpers import MASHBILL, records, run_cli, sql

N = 240


def test_kill_9_at_five_random_moments_then_resume_equals_uninterrupted(write_spec, fault_server, tmp_path):
    server = fault_server(delay_s=0.03)
    spec = write_spec(n=N, runtime={"concurrency": 2, "batch_size": 4})
    args = [str(spec), "--base-url", server.url, "--no-progress"]

    reference = tmp_path / "reference"
    t0 = time.monotonic()
    run_cli("generate", *args, "--store", reference, check=True)
    total_s = time.monotonic() - t0
    work_s = sql(reference, "SELECT wall_s FROM runs")[0][0]
    startup_s = max(0.0, total_s - work_s)
    per_record_s = work_s / N
    expected = records(reference)
    assert len(expected) == N

    seed = int(os.environ.get("MASHBILL_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    store = tmp_path / "killed"
    killed_alive = 0
    for _ in range(5):
        remaining = N - (len(records(store)) if (store / "mashbill.duckdb").exists() else 0)
        if remaining == 0:
            break
        proc = subprocess.Popen([MASHBILL, "generate", *args, "--store", str(store)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        moment = startup_s + rng.uniform(0.05, 0.9) * remaining * per_record_s
        try:
            proc.wait(timeout=moment)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            killed_alive += 1
        # what survived a kill is a subset of the uninterrupted run, record for record
        partial = records(store)
        print(f"kill at {moment:.2f}s: {len(partial)}/{N} records stored (seed {seed})")
        assert all(expected[rid] == value for rid, value in partial.items()), f"seed {seed}"

    assert killed_alive >= 3, f"seed {seed}: only {killed_alive} of 5 kills hit a running process"
    run_cli("generate", *args, "--store", store, check=True)

    final = records(store)
    assert final == expected, f"seed {seed}"
    # nothing stored twice: one row per record id, one first attempt per stored record
    assert sql(store, "SELECT count(*), count(DISTINCT record_id) FROM records")[0] == (N, N)
    assert sql(store, "SELECT count(*) FROM teacher_calls WHERE attempt = 1")[0][0] == N
    assert sql(store, "SELECT count(*) FROM (SELECT record_id FROM teacher_calls GROUP BY record_id, attempt "
                      "HAVING count(*) > 1)")[0][0] == 0
    # the killed runs stay 'running' (nothing could mark them); the last one completed
    statuses = [s for (s,) in sql(store, "SELECT status FROM runs ORDER BY started_at")]
    assert statuses[-1] == "completed" and statuses.count("running") == killed_alive
    assert sorted(os.listdir(store / "parquet")) == ["fault-plan@1"]


def test_sigterm_marks_the_run_interrupted_and_a_resume_finishes(write_spec, fault_server, tmp_path):
    """What SLURM sends before the wall-clock limit: the run is marked interrupted, nothing is half-stored."""
    server = fault_server(delay_s=0.05)
    spec = write_spec(n=120, runtime={"concurrency": 2, "batch_size": 4})
    store = tmp_path / "store"
    args = [MASHBILL, "generate", str(spec), "--store", str(store), "--base-url", server.url, "--no-progress"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len([k for k, _, _ in server.log if k]) < 20 and time.monotonic() < deadline:
        time.sleep(0.05)  # until the bulk work is under way
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "interrupted" in err and "Traceback" not in err
    [(status, done)] = sql(store, "SELECT status, accepted + rejected + failed FROM runs")
    assert status == "interrupted" and done == sql(store, "SELECT count(*) FROM records")[0][0] < 120
    done_proc = run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress", check=True)
    assert "completed" in done_proc.stdout
    assert sql(store, "SELECT count(*), count(DISTINCT record_id) FROM records")[0] == (120, 120)
