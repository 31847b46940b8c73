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

from teacher_helpers import MASHBILL, records, run_cli, sql, tag

N = 240


def wait_until(condition, proc=None, timeout: float = 300) -> bool:
    """Poll an observable condition (requests a server saw, a file, rows); False if `proc` ended first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold within the safety timeout")
        time.sleep(0.02)
    return True


def test_kill_9_at_five_random_moments_then_resume_equals_uninterrupted(write_spec, fault_server, tmp_path):
    server = fault_server(delay_s=0.03)
    spec = write_spec(n=N, runtime={"concurrency": 2, "batch_size": 4})
    args = [str(spec), "--base-url", server.url, "--no-progress"]

    reference = tmp_path / "reference"
    run_cli("generate", *args, "--store", reference, check=True)
    expected = records(reference)
    assert len(expected) == N
    # the requests each run makes before its run row exists (the server check); a kill among them would stop a run
    # that was never recorded, so kills are counted from the first record request on
    preflight = len(server.log) - N
    assert preflight >= 0

    seed = int(os.environ.get("MASHBILL_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    store = tmp_path / "killed"
    killed_alive = 0
    for _ in range(5):
        remaining = N - (len(records(store)) if (store / "mashbill.duckdb").exists() else 0)
        if remaining == 0:
            break
        # kill after a random share of the remaining answers went out: by progress, not by the clock, so a
        # slow machine moves the moment, never whether it lands mid-run
        target = len(server.log) + preflight + max(1, int(rng.uniform(0.05, 0.9) * remaining))
        proc = subprocess.Popen([MASHBILL, "generate", *args, "--store", str(store)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if wait_until(lambda: len(server.log) >= target, proc):
            os.kill(proc.pid, signal.SIGKILL)
            killed_alive += 1
        proc.wait()
        # what survived a kill is a subset of the uninterrupted run, record for record
        partial = records(store)
        print(f"kill after {target} answers: {len(partial)}/{N} records stored (seed {seed})")
        assert all(expected[rid] == value for rid, value in partial.items()), f"seed {seed}"

    assert killed_alive >= 3, f"seed {seed}: only {killed_alive} of 5 kills hit a running process"
    export = store / "parquet" / "fault-plan@1"
    export.mkdir(parents=True, exist_ok=True)
    (export / ".records.parquet.tmp-999999").write_bytes(b"")  # what a kill during the export leaves
    final_run = run_cli("generate", *args, "--store", store, check=True)

    final = records(store)
    assert final == expected, f"seed {seed}"
    # nothing stored twice: one row per record id, one first attempt per stored record
    assert sql(store, "SELECT count(*), count(DISTINCT record_id) FROM records")[0] == (N, N)
    assert sql(store, "SELECT count(*) FROM teacher_calls WHERE attempt = 1")[0][0] == N
    assert sql(store, "SELECT count(*) FROM (SELECT record_id FROM teacher_calls GROUP BY record_id, attempt "
                      "HAVING count(*) > 1)")[0][0] == 0
    # the next run marked every killed run interrupted; none is left 'running'; the last one completed
    statuses = [s for (s,) in sql(store, "SELECT status FROM runs ORDER BY started_at")]
    assert statuses[-1] == "completed" and "running" not in statuses
    assert statuses.count("interrupted") == killed_alive, statuses
    # a killed run's figures are what it committed, and say so; the resumed run's summary says so too
    for run_id, calls, tokens_in, done in sql(store, "SELECT run_id, calls, tokens_in, accepted + rejected + failed "
                                                     "FROM runs WHERE status = 'interrupted'"):
        committed = sql(store, "SELECT count(*), coalesce(sum(prompt_tokens), 0) FROM teacher_calls WHERE run_id = ?",
                        [run_id])[0]
        assert (calls, tokens_in) == committed
        assert done == sql(store, "SELECT count(*) FROM records WHERE run_id = ?", [run_id])[0][0]
        [(detail,)] = sql(store, "SELECT detail FROM events WHERE run_id = ? AND kind = 'interrupted'", [run_id])
        assert "batch in progress were lost" in detail
    assert "killed and are now marked interrupted" in final_run.stdout
    # no temporary is left: the stale export temp is gone, the export is in place
    assert sorted(os.listdir(store / "parquet")) == ["fault-plan@1"]
    assert os.listdir(export) == ["records.parquet"]


def test_sigterm_marks_the_run_interrupted_and_a_resume_finishes(write_spec, fault_server, tmp_path):
    """What SLURM sends before the wall-clock limit: the run is marked interrupted, nothing is half-stored."""
    server = fault_server(delay_s=0.05)
    spec = write_spec(n=120, runtime={"concurrency": 2, "batch_size": 4})
    store = tmp_path / "store"
    args = [MASHBILL, "generate", str(spec), "--store", str(store), "--base-url", server.url, "--no-progress"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_until(lambda: len([k for k, _, _ in server.log if tag(k) is not None]) >= 20, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "interrupted" in err and "Traceback" not in err
    [(status, done)] = sql(store, "SELECT status, accepted + rejected + failed FROM runs")
    assert status == "interrupted" and done == sql(store, "SELECT count(*) FROM records")[0][0] < 120
    done_proc = run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress", check=True)
    assert "completed" in done_proc.stdout
    assert sql(store, "SELECT count(*), count(DISTINCT record_id) FROM records")[0] == (120, 120)


def test_sigterm_before_the_run_row_exists_still_marks_the_run_interrupted(write_spec, fault_server, tmp_path):
    """Case 17: a SIGTERM while the teacher is still being checked (no run row yet) is held until the run
    row exists, so the run is recorded as interrupted instead of vanishing."""
    server = fault_server(schedule=lambda key, attempt: "hold" if tag(key) is None else None)
    spec = write_spec(n=8)
    store = tmp_path / "store"
    proc = subprocess.Popen([MASHBILL, "generate", str(spec), "--store", str(store), "--base-url", server.url,
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the structured-output check is held at the server: the process is before its run row
    assert wait_until(lambda: any(tag(k) is None for k, _, _ in server.log), proc)
    proc.send_signal(signal.SIGTERM)
    server.gate.set()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "interrupted" in err and "Traceback" not in err, err
    assert sql(store, "SELECT status FROM runs") == [("interrupted",)]
    assert not any(tag(k) is not None for k, _, _ in server.log)  # no bulk work was started
