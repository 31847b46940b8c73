"""A `kill -9` during a CPU run, then `--resume`, gives the same losses as an uninterrupted run: checkpoints
keep the optimizer, scheduler, RNG and data position (docs: README "Train")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from mashbill.trainers.run import train
from tests.conftest import MASHBILL

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_kill_9_then_resume_gives_the_losses_of_an_uninterrupted_run(snaps, tmp_path):
    cfg = snaps.config(tmp_path, "resume-cx", method="classify", snapshot="tcx@1",
                       base_model="embedded:all-minilm-l6-v2", max_length=48,
                       schedule={"max_steps": 16, "batch_size": 8, "learning_rate": 1.0e-4, "save_steps": 4,
                                 "lr_scheduler": "linear"})
    train(cfg, stage="steps:1", out=tmp_path / "warm", log=lambda *_: None)  # the cheap stages, once
    ref = train(cfg, stage="steps:16", out=tmp_path / "ref", log=lambda *_: None)
    want = [(e["step"], e["loss"]) for e in ref.metrics["losses"]]

    out = tmp_path / "killed"
    ckpt = tmp_path / "killed.work" / "checkpoints" / "checkpoint-4" / "trainer_state.json"
    args = [*MASHBILL, "train", "classify", str(cfg), "--stage", "steps:16", "--out", str(out)]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        while not ckpt.is_file():  # wait for the event (a complete checkpoint), not for a time
            if proc.poll() is not None:
                pytest.fail(f"the run ended before its first checkpoint: {proc.stdout.read().decode()[-2000:]}")
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists(), "the run completed before the kill; nothing was resumed"
    again = subprocess.run([*args, "--resume"], cwd=tmp_path, capture_output=True, text=True, timeout=1500)
    assert again.returncode == 0, again.stdout + again.stderr
    from mashbill.factory.store import Store
    from mashbill.trainers import ladder
    from mashbill.trainers.config import load_config

    with Store.open(snaps.store, read_only=True) as store:
        last = ladder.history(store, load_config(cfg)[0].sha256)[-1]
    assert last["run_folder"] == str(out.resolve()) and "/checkpoints/checkpoint-" in last["resumed_from"]
    got = [(e["step"], e["loss"]) for e in json.loads((out / "metrics.json").read_text())["losses"]]
    assert [s for s, _ in got] == [s for s, _ in want] == list(range(1, 17))
    for (step, a), (_, b) in zip(got, want):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-6), f"step {step}: {a} after resume, {b} uninterrupted"
