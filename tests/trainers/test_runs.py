"""Tiny real runs through `train()` (the CLI's code path): the ladder climbs and records each stage, loss
falls, the adapter's weights change, the classifier beats the majority class, and the run folder holds
what the exporters read (docs: README "Train", the run-folder contract)."""

from __future__ import annotations

import json

import pytest

from mashbill.factory.store import Store
from mashbill.trainers import ladder
from mashbill.trainers.run import train

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _lora_b_nonzero(adapter_dir) -> int:
    from safetensors.torch import load_file

    weights = load_file(str(adapter_dir / "adapter_model.safetensors"))
    b = [v for k, v in weights.items() if "lora_B" in k]
    assert b, "no LoRA B matrices in the adapter"
    # PEFT initializes every B to zero: a nonzero B is a weight that training changed
    return sum(int((v != 0).any()) for v in b)


def _check_folder(run, method, snaps_dir):
    from mashbill.curation.snapshots.snapshot import MANIFEST
    from mashbill.hashing import sha256_file

    lin = json.loads((run / "lineage.json").read_text())
    assert lin["schema"] == "mashbill.lineage/1" and lin["method"] == method
    assert lin["snapshot"]["manifest_sha256"] == sha256_file(snaps_dir / MANIFEST)
    assert lin["spec_hashes"] and all(len(h) == 64 for h in lin["spec_hashes"].values())
    assert len(lin["base_model"]["sha256"]) == 64 and lin["versions"]["torch"] and lin["versions"]["trl"]
    assert {"config.yaml", "metrics.json"} <= {p.name for p in run.iterdir()}
    weights = "model/model.safetensors" if method == "classify" else "adapter/adapter_model.safetensors"
    assert lin["files"][weights] == sha256_file(run / weights)  # the chain of hashes reaches the trained weights
    assert not run.with_name(run.name + ".work").exists()  # checkpoints go once the run is complete
    return lin, json.loads((run / "metrics.json").read_text())


def test_sft_climbs_the_ladder_loss_falls_and_the_adapter_changes(snaps, smol_base, tmp_path):
    cfg = snaps.config(tmp_path, "run-sft", method="sft", snapshot="tplan@1",
                       base_model="embedded:smollm2-135m-instruct", lora={"r": 4, "alpha": 8, "dropout": 0.0},
                       schedule={"max_steps": 6, "batch_size": 4, "learning_rate": 2.0e-3, "lr_scheduler": "constant"})
    res = train(cfg, stage="steps:6", out=tmp_path / "run", log=lambda *_: None)
    assert [s["stage"] for s in res.stages] == ["config", "forward", "batch", "steps:6"]
    assert all(s["passed"] for s in res.stages)
    lin, metrics = _check_folder(tmp_path / "run", "sft", snaps.plan)
    assert lin["base_model"]["path"] == str(smol_base.path.resolve())
    assert lin["trainer_profile"]["max_seq_len"] == 512 and lin["trainer_profile"]["loss"] == "assistant-only"
    losses = [e["loss"] for e in metrics["losses"]]
    assert len(losses) == 6 and sum(losses[-2:]) / 2 < losses[0]
    assert _lora_b_nonzero(tmp_path / "run" / "adapter") > 0
    with Store.open(snaps.store, read_only=True) as store:
        rows = ladder.history(store, res.preflight.config.sha256)
    assert [r["stage"] for r in rows] == ["config", "forward", "batch", "steps:6"]
    assert rows[-1]["snapshot_id"] == res.preflight.manifest["snapshot_id"] and rows[-1]["device"] == "cpu"
    assert rows[-1]["versions"]["peft"] and rows[-1]["peak_memory_mb"] > 0 and rows[2]["grads_finite"] is True
    # the rest of a run record (issue 16): runtime versions, throughput, manifest and config hashes
    from mashbill.curation.snapshots.snapshot import MANIFEST
    from mashbill.hashing import sha256_file

    for r in rows:
        assert r["manifest_sha256"] == sha256_file(snaps.plan / MANIFEST) and r["config_sha256"] == res.preflight.config.sha256
    for r in rows[1:]:
        assert {"torch_cuda", "torch_hip", "device_name"} <= set(r) and r["versions"]["transformers"]
    assert rows[1]["tokens_per_s"] > 0 and rows[2]["tokens_per_s"] > 0 and rows[1]["loss_finite"] is True
    assert rows[-1]["s_per_step"] > 0 and rows[-1]["loss_finite"] is True


def test_dpo_loss_falls_and_the_adapter_changes(snaps, smol_base, tmp_path):
    cfg = snaps.config(tmp_path, "run-dpo", method="dpo", snapshot="tpref@1",
                       base_model="embedded:smollm2-135m-instruct", lora={"r": 4, "alpha": 8, "dropout": 0.0},
                       schedule={"max_steps": 4, "batch_size": 2, "learning_rate": 2.0e-3, "lr_scheduler": "constant"})
    res = train(cfg, stage="steps:4", out=tmp_path / "run", log=lambda *_: None)
    _, metrics = _check_folder(tmp_path / "run", "dpo", snaps.pref)
    losses = [e["loss"] for e in metrics["losses"]]
    assert losses[0] == pytest.approx(0.6931, abs=1e-3)  # a zero adapter: policy == reference
    assert losses[-1] < losses[0]
    assert _lora_b_nonzero(tmp_path / "run" / "adapter") > 0
    assert res.stages[-1]["stage"] == "steps:4"


def test_classifier_beats_the_majority_class_and_saves_a_loadable_model(snaps, tmp_path):
    from transformers import AutoModelForSequenceClassification

    cfg = snaps.config(tmp_path, "run-cx", method="classify", snapshot="tcx@1",
                       base_model="embedded:all-minilm-l6-v2", max_length=64,
                       schedule={"max_steps": 40, "batch_size": 16, "learning_rate": 2.0e-4, "lr_scheduler": "linear"})
    res = train(cfg, stage="steps:40", out=tmp_path / "run", log=lambda *_: None)
    _, metrics = _check_folder(tmp_path / "run", "classify", snaps.cx)
    ev = metrics["eval"]
    assert ev["eval_examples"] >= 15 and ev["eval_accuracy"] > ev["majority_accuracy"], ev
    model = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "run" / "model"))
    assert model.config.id2label == {0: "trivial", 1: "moderate", 2: "complex", 3: "memory_recall"}
    assert model.config.problem_type == "single_label_classification"
    assert res.metrics["losses"][-1]["loss"] < res.metrics["losses"][0]["loss"]
