"""The device is set from LOCAL_RANK before the model loads (the reference's 8-copies-on-one-GPU bug), and
an expensive ladder stage refuses to start while a cheaper one has not passed. No GPU needed: torch.cuda's
entry points are observed, the model loader is stopped at its first call."""

from __future__ import annotations

import pytest

from mashbill.trainers.ladder import LadderError, Stage, below, parse_stage
from mashbill.trainers.run import train
from tests.conftest import run_cli


class Stop(Exception):
    pass


def test_the_device_is_set_from_local_rank_before_the_model_loads(snaps, tmp_path, monkeypatch):
    import torch
    import transformers

    calls = []
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: calls.append(("set_device", i)))

    def load(*args, **kwargs):
        calls.append(("load_model", str(args[0])))
        raise Stop

    monkeypatch.setattr(transformers.AutoModelForSequenceClassification, "from_pretrained", load)
    cfg = snaps.config(tmp_path, "rank3", method="classify", snapshot="tcx@1", base_model="embedded:all-minilm-l6-v2")
    with pytest.raises(Stop):
        train(cfg, stage="forward", out=tmp_path / "run", log=lambda *_: None)
    assert [c[0] for c in calls] == ["set_device", "load_model"]
    assert calls[0] == ("set_device", 3)


def test_a_rank_without_a_device_is_refused(monkeypatch):
    import torch

    from mashbill.trainers.launcher import place

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: pytest.fail("set_device must not be called"))
    with pytest.raises(Exception, match="LOCAL_RANK 5 but only 2 visible device"):
        place({"LOCAL_RANK": "5", "WORLD_SIZE": "8"})


def test_stages_parse_and_order():
    assert parse_stage("steps:20") == Stage("steps", 20)
    assert [s.label for s in below(parse_stage("full"))] == ["config", "forward", "batch", "steps:1"]
    assert [s.label for s in below(parse_stage("epoch"))] == ["config", "forward", "batch", "steps:1"]
    for bad in ("steps:0", "steps", "gpu"):
        with pytest.raises(LadderError):
            parse_stage(bad)


def test_an_expensive_stage_refuses_while_a_cheaper_one_has_not_passed(snaps, tmp_path):
    cfg = snaps.config(tmp_path, "noclimb", method="sft", snapshot="tplan@1",
                       base_model="embedded:smollm2-135m-instruct")
    proc = run_cli("train", "sft", cfg, "--stage", "steps:5", "--no-climb", "--out", tmp_path / "run", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "stage steps:5 refused: stage config has not passed for config" in proc.stderr
    assert not (tmp_path / "run").exists()
    ok = run_cli("train", "sft", cfg, "--stage", "config", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert not (tmp_path / "mashbill-runs").exists()  # only training stages write the run folder
    hist = run_cli("train", "stages", cfg, cwd=tmp_path)
    assert hist.returncode == 0 and "config" in hist.stdout and "passed" in hist.stdout and "tplan@1" in hist.stdout
    proc = run_cli("train", "sft", cfg, "--stage", "steps:5", "--no-climb", cwd=tmp_path)
    assert proc.returncode == 2 and "stage forward has not passed" in proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_stage_whose_loss_turns_non_finite_exits_1_is_recorded_and_writes_no_run_folder(snaps, tmp_path):
    """`train --help`: exit 1 when a stage ran and failed (recorded). A learning rate of 1e30 passes the cheap
    stages (they take no step); after the first step the weights overflow and the loss is NaN."""
    import json

    from mashbill.factory.store import Store
    from mashbill.trainers import ladder
    from mashbill.trainers.config import load_config
    from tests.cli.conftest import error_lines, invoke

    cfg = snaps.config(tmp_path, "blowup", method="classify", snapshot="tcx@1", base_model="embedded:all-minilm-l6-v2",
                       max_length=16, student_layers=1,
                       schedule={"max_steps": 3, "batch_size": 4, "learning_rate": 1.0e30, "lr_scheduler": "constant"})
    res = invoke("train", "classify", cfg, "--stage", "steps:3", "--out", tmp_path / "run", "--json")
    assert res.exit_code == 1, res.output
    [line] = error_lines(res)
    assert "stage steps:3 failed: non-finite loss or gradients" in line
    assert not (tmp_path / "run").exists()
    with Store.open(snaps.store, read_only=True) as store:
        rows = ladder.history(store, load_config(cfg)[0].sha256)
    assert [(r["stage"], r["passed"]) for r in rows] == [("config", True), ("forward", True), ("batch", True),
                                                           ("steps:3", False)]
    assert False in (rows[-1]["loss_finite"], rows[-1]["grads_finite"]) and json.dumps(rows[-1])


_FREED_PROBE = """
import sys
from mashbill.trainers.launcher import place
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
if sys.argv[1] == "placed":
    place(return_memory=True)
else:
    place()
big = b"\\x01" * (4 << 20); del big     # one large free: left dynamic, glibc's threshold rises above 1 MiB
bufs = [b"\\x01" * (1 << 20) for _ in range(300)]
before = rss_mb()
del bufs[::2]                           # every other buffer: holes inside glibc's heap, which it keeps
print(round(before - rss_mb()))
"""


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="glibc's allocator")
def test_a_cpu_placement_returns_freed_tensors_to_the_system():
    """After place(return_memory=True) on the CPU, freed large blocks leave the process (the quick-start DPO peak
    fell from 8.9 to 5.6 GiB); after a plain place() the same probe keeps them, so the probe shows the difference."""
    import subprocess
    import sys

    freed = {how: int(subprocess.run([sys.executable, "-c", _FREED_PROBE, how], capture_output=True, text=True,
                                     check=True, env={**__import__("os").environ, "CUDA_VISIBLE_DEVICES": ""}
                                     ).stdout.split()[-1]) for how in ("placed", "unplaced")}
    assert freed["placed"] >= 120, freed  # 150 buffers of 1 MiB freed
    assert freed["unplaced"] < 30, freed


@pytest.mark.parametrize("method", ["dpo", "classify"])
def test_only_the_causal_lm_trainers_pin_the_allocator(snaps, tmp_path, monkeypatch, method):
    """SFT and DPO ask place() for the pinned allocator (it costs CPU on small tensors); classify does not."""
    import transformers

    from mashbill.trainers import launcher

    asked = []
    monkeypatch.setattr(launcher, "return_freed_memory", lambda: asked.append(True) or True)

    def load(*args, **kwargs):
        raise Stop

    for auto in (transformers.AutoModelForSequenceClassification, transformers.AutoModelForCausalLM):
        monkeypatch.setattr(auto, "from_pretrained", load)
    fields = ({"snapshot": "tcx@1", "base_model": "embedded:all-minilm-l6-v2"} if method == "classify"
              else {"snapshot": "tpref@1", "base_model": "embedded:smollm2-135m-instruct"})
    cfg = snaps.config(tmp_path, f"pin-{method}", method=method, **fields)
    with pytest.raises(Stop):
        train(cfg, stage="forward", out=tmp_path / "run", log=lambda *_: None)
    assert asked == ([True] if method == "dpo" else [])
