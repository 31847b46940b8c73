"""`mashbill slurm train`: the job chain for LUMI-G's MI250X nodes is valid bash with the ROCm environment,
LOCAL_RANK per GCD and afterany dependencies; with a stand-in `sbatch` the chain submits, and the job body
runs end to end on the CPU (srun and the container replaced through MASHBILL_SRUN/MASHBILL_CONTAINER)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mashbill.factory.slurm import ROCM_ENV
from tests.conftest import run_cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
EXE = str(Path(os.sys.executable).with_name("mashbill"))


def test_the_chain_renders_submits_and_runs_a_job(snaps, tmp_path):
    cfg = snaps.config(tmp_path, "chain-cx", method="classify", snapshot="tcx@1", base_model="embedded:all-minilm-l6-v2",
                       max_length=48, schedule={"max_steps": 4, "batch_size": 8, "save_steps": 2})
    out, run = tmp_path / "slurm", tmp_path / "runs" / "chain-cx"
    proc = run_cli("slurm", "train", cfg, "--out", out, "--run-dir", run, "--jobs", 3, "--nodes", 2,
                   "--account", "project_465000000", "--mashbill", EXE, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "precision fp32; MI250X runs train in bf16" in proc.stdout
    sb = (out / "train.sbatch").read_text()
    for name in ("train.sbatch", "submit.sh"):
        assert subprocess.run(["bash", "-n", str(out / name)]).returncode == 0
    for key, value in ROCM_ENV.items():
        assert f"export {key}={value}" in sb or f"export {key}='{value}'" in sb
    assert "#SBATCH --nodes=2" in sb and "#SBATCH --ntasks-per-node=8" in sb and "#SBATCH --gpus-per-node=8" in sb
    assert "LOCAL_RANK=${SLURM_LOCALID:-0}" in sb and "--stage full --resume" in sb
    assert "#SBATCH --account=project_465000000" in sb
    for preset in ("zero2.json", "zero3.json"):
        data = json.loads((out / preset).read_text())
        assert "scheduler" not in data and "optimizer" not in data

    # submit with a stand-in sbatch: 3 jobs, each after the previous one ends (afterany)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch.log"
    (bin_dir / "sbatch").write_text(f'#!/bin/bash\necho "$@" >> {log}\nn=$(wc -l < {log})\necho $((1000 + n))\n')
    (bin_dir / "sbatch").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    sub = subprocess.run(["bash", str(out / "submit.sh")], env=env, capture_output=True, text=True)
    assert sub.returncode == 0, sub.stderr
    lines = log.read_text().splitlines()
    assert lines == ["--parsable train.sbatch", "--parsable --dependency=afterany:1001 train.sbatch",
                     "--parsable --dependency=afterany:1002 train.sbatch"]

    # one job of the chain, run here: it climbs the cheap stages, trains, writes the run folder
    job_env = {**os.environ, "MASHBILL_SRUN": "", "MASHBILL_CONTAINER": "", "SLURM_LOCALID": "0"}
    job = subprocess.run(["bash", str(out / "train.sbatch")], env=job_env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=900)
    assert job.returncode == 0, job.stdout + job.stderr
    lineage = json.loads((run / "lineage.json").read_text())
    assert lineage["stage"] == "full" and lineage["method"] == "classify"
    # the next job of the chain finds the run complete
    again = subprocess.run(["bash", str(out / "train.sbatch")], env=job_env, cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0 and "is complete; nothing to do" in again.stdout
