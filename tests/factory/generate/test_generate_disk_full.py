"""A full disk during `generate` (case 6): the failing COMMIT is one clear line (exit 2), never "cannot
rollback", nothing committed is lost, and a resume finishes without duplicates.

The disk fills through `small_disk` (RLIMIT_FSIZE in the child): every write past the limit fails in the
kernel with EFBIG ("File too large"), the same path through DuckDB and Parquet as ENOSPC.
"""

from __future__ import annotations

import subprocess

from teacher_helpers import MASHBILL, run_cli, sql

from tests.conftest import small_disk

LIMIT = 16 * 1024  # bytes per file: the store's write-ahead log outgrows it after a few batches


def test_disk_full_during_generate_is_one_line_and_a_resume_completes(write_spec, fault_server, tmp_path):
    server = fault_server()
    spec = write_spec(n=200, runtime={"concurrency": 4, "batch_size": 5})
    store = tmp_path / "store"
    args = [str(spec), "--store", str(store), "--base-url", server.url, "--no-progress"]
    run_cli("generate", *args, "--limit", 10, check=True)  # the store exists and holds its first records
    full = subprocess.run([MASHBILL, "generate", *args], capture_output=True, text=True, timeout=300,
                          preexec_fn=small_disk(LIMIT))
    assert full.returncode == 2, full.stderr
    lines = full.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: store ") and "File too large" in lines[0], full.stderr
    assert "cannot rollback" not in full.stderr and "Traceback" not in full.stderr
    [(failed_run, stored)] = sql(store, "SELECT status, (SELECT count(*) FROM records) FROM runs "
                                        "ORDER BY started_at DESC LIMIT 1")
    assert failed_run in ("failed", "interrupted") and 10 <= stored < 200
    run_cli("generate", *args, check=True)
    assert sql(store, "SELECT count(*), count(DISTINCT record_id) FROM records")[0] == (200, 200)
    assert sql(store, "SELECT count(*) FROM runs WHERE status = 'running'")[0][0] == 0
