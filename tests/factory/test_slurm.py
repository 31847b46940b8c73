"""`mashbill slurm generate`: the rendered scripts are valid bash with the MI250X ROCm environment, TP by
model size and an afterok merge; run locally (the array tasks by hand, a stand-in server instead of
vLLM through MASHBILL_SERVER_CMD, a stand-in `sbatch`), they generate every shard and merge them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from teacher_helpers import MASHBILL, queries, records, run_cli, tag

from mashbill.factory.slurm import ROCM_ENV, model_size_b, tensor_parallel_for
from tests.conftest import free_port

FAULT_SERVER = Path(__file__).with_name("fault_server.py")


@pytest.mark.parametrize("model, size, tp", [
    ("meta-llama/Llama-3.3-70B-Instruct", 70, 8), ("meta-llama/Llama-3.1-405B-Instruct", 405, 8),
    ("Qwen/Qwen2.5-32B-Instruct", 32, 4), ("Qwen/Qwen3-30B-A3B", 30, 4), ("Qwen/Qwen3-8B", 8, 2),
    ("openai/gpt-oss-120b", 120, 8), ("my-teacher", None, 8)])
def test_tensor_parallel_by_model_size(model, size, tp):
    assert model_size_b(model) == size
    assert tensor_parallel_for(size) == tp


def render(write_spec, tmp_path, nodes, model="fault-model", port=8000, extra=(), seeds=None):
    spec = write_spec(n=24, teacher={"model": model}, seeds=seeds)
    out = tmp_path / "slurm"
    proc = run_cli("slurm", "generate", spec, "--nodes", nodes, "--out", out, "--store-root", tmp_path / "stores",
                   "--account", "project_465000000", "--port", port, "--mashbill", MASHBILL,
                   "--vllm-arg=--enable-prompt-tokens-details", *extra, check=True)
    return spec, out, proc


def test_rendered_scripts(write_spec, tmp_path):
    _, out, proc = render(write_spec, tmp_path, 4, model="meta-llama/Llama-3.3-70B-Instruct")
    assert "TP 8" in proc.stdout
    gen, merge, submit = ((out / n).read_text() for n in ("generate.sbatch", "merge.sbatch", "submit.sh"))
    for name in ("generate.sbatch", "merge.sbatch", "submit.sh"):
        assert subprocess.run(["bash", "-n", str(out / name)]).returncode == 0
        assert os.access(out / name, os.X_OK)
    for key, value in ROCM_ENV.items():
        assert f"export {key}={value}" in gen or f"export {key}='{value}'" in gen
    assert "#SBATCH --array=0-3" in gen and "#SBATCH --account=project_465000000" in gen
    assert "#SBATCH --gpus-per-node=8" in gen and "--partition=standard-g" in gen
    assert "vllm serve meta-llama/Llama-3.3-70B-Instruct" in gen and "--tensor-parallel-size 8" in gen
    assert "--enable-prefix-caching" in gen and "--enable-prompt-tokens-details" in gen and "--max-model-len 4096" in gen and "lumi-multitorch-latest.sif" in gen
    assert '--shard "$SHARD/$NSHARDS"' in gen and "NSHARDS=4" in gen and "--concurrency 48" in gen
    assert "--require-complete" in merge and all(f"shard_{i}" in merge for i in range(4))
    assert "--dependency=afterok:$GEN_JOB merge.sbatch" in submit
    assert '--store "$STORE" --per-record --jobs 8' in gen and '--store "$STORE_ROOT/merged" --jobs 4' in merge
    _, out, _ = render(write_spec, tmp_path, 4, extra=("--validate-jobs", 0))
    assert "--per-record" not in (out / "generate.sbatch").read_text()
    assert '--store "$STORE_ROOT/merged"' in (out / "merge.sbatch").read_text()


def test_the_array_tasks_and_the_merge_run_end_to_end(write_spec, tmp_path):
    port = free_port()
    seeds = queries(24)
    seeds[23] = {**seeds[0], "query": seeds[0]["query"] + "!"}  # a duplicate once normalised: DUP001, a reject
    spec, out, _ = render(write_spec, tmp_path, 2, port=port, seeds=seeds)
    env = {**os.environ, "MASHBILL_SERVER_CMD": f"{sys.executable} {FAULT_SERVER} --port $PORT --model fault-model"}
    for i in range(2):
        proc = subprocess.run(["bash", str(out / "generate.sbatch")], env={**env, "SLURM_ARRAY_TASK_ID": str(i)},
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"shard {i}/2: mashbill generate exited with 0" in proc.stdout
        assert f"shard {i}/2: mashbill validate --per-record exited with " in proc.stdout  # 0, or 1 with findings
    proc = subprocess.run(["bash", str(out / "merge.sbatch")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    merged = records(tmp_path / "stores" / "merged")
    assert len(merged) == 24 and {s for s, _, _ in merged.values()} == {"accepted"}
    # the merged store's validation read every record's own checks from the shards' and ran the global ones
    assert "validated 24 record(s)" in proc.stdout and "(24 with their kept own checks)" in proc.stdout
    report = json.loads((tmp_path / "stores" / "validation.json").read_text())
    assert report["per_record"]["from_kept"] == 24 and "dedup" in report and "expectations" in report
    assert report["counts"].get("DUP001") == 1  # a finding: validate exited 1, and the merge job did not fail for it
    # the stand-in servers were stopped with their tasks
    assert subprocess.run(["curl", "-sf", f"http://127.0.0.1:{port}/v1/models"]).returncode != 0


def test_submit_chains_the_merge_after_the_array(write_spec, tmp_path):
    _, out, _ = render(write_spec, tmp_path, 3)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "sbatch-calls"
    fake = bin_dir / "sbatch"  # a stand-in for SLURM's sbatch: logs its arguments, prints a job id
    fake.write_text(f'#!/bin/bash\necho "$@" >> {calls}\nif grep -q merge <<<"$*"; then echo 1002; '
                    'else echo "1001;cluster"; fi\n')
    fake.chmod(0o755)
    proc = subprocess.run(["bash", str(out / "submit.sh")], env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert calls.read_text().splitlines() == ["--parsable generate.sbatch",
                                              "--parsable --dependency=afterok:1001 merge.sbatch"]
    assert "generate array job: 1001 (3 tasks); merge job: 1002" in proc.stdout


def test_spec_without_an_openai_teacher_is_refused(tmp_path):
    spec = Path(__file__).resolve().parents[1] / "fixtures" / "specs" / "tiny" / "tiny-plan@1.yaml"
    proc = run_cli("slurm", "generate", spec, "--nodes", 2, "--out", tmp_path / "s")
    assert proc.returncode == 2 and "needs backend: openai" in proc.stderr


def test_a_spec_that_does_not_match_its_lock_is_refused_when_rendering(write_spec, tmp_path):
    spec = write_spec()
    (spec.parent / "specs.lock").unlink()
    proc = run_cli("slurm", "generate", spec, "--nodes", 2, "--out", tmp_path / "s")
    assert proc.returncode == 2 and "no specs.lock" in proc.stderr and not (tmp_path / "s").exists()


def test_a_task_terminated_before_its_time_limit_resumes(write_spec, tmp_path):
    """SLURM signals the batch shell (--signal=B:TERM@180): mashbill must get it, mark the run interrupted,
    and the re-submitted task must finish the shard."""
    import signal
    import time

    from teacher_helpers import sql

    port = free_port()
    spec, out, _ = render(write_spec, tmp_path, 1, port=port, extra=("--concurrency", "1"))  # ~5 s of work
    requests = tmp_path / "requests.log"
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0",
           "MASHBILL_SERVER_CMD": f"{sys.executable} {FAULT_SERVER} --port $PORT --model fault-model --delay 0.2 "
                                  f"--log {requests}"}
    task = subprocess.Popen(["bash", str(out / "generate.sbatch")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    db = tmp_path / "stores" / "shard_0" / "mashbill.duckdb"

    def bulk_requests() -> int:  # seed requests the server saw (the structured-output check has no q000 tag)
        if not requests.exists():
            return 0
        return sum(1 for line in requests.read_text().splitlines() if tag(json.loads(line)[0]) is not None)

    deadline = time.monotonic() + 300  # a safety net only: the wait is on the server seeing bulk requests
    while bulk_requests() < 3 and task.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert task.poll() is None, "the task ended before its bulk work was seen"
    task.send_signal(signal.SIGTERM)
    output, _ = task.communicate(timeout=60)
    assert task.returncode != 0 and "mashbill generate exited with 2" in output, output
    assert sql(db.parent, "SELECT status FROM runs") == [("interrupted",)]
    again = subprocess.run(["bash", str(out / "generate.sbatch")], env={**env, "MASHBILL_SERVER_CMD":
                           env["MASHBILL_SERVER_CMD"].replace("--delay 0.2", "")}, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(records(db.parent)) == 24
