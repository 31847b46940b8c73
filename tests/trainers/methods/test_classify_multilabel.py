"""`train classify` on a multi-label pull (plan categories as multi-hot float vectors): the HF Trainer collates
and trains it with no glue, the saved model is multi-label with the manifest's class names (issue 16, "the
multi-label (routing) classification pull ... so AutoModelForSequenceClassification trains as is")."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def test_a_multi_label_snapshot_trains_with_the_manifests_classes(snaps, tmp_path):
    from transformers import AutoModelForSequenceClassification

    from mashbill.trainers.run import train

    cfg = snaps.config(tmp_path, "plan-cats", method="classify", snapshot="tplan@1",
                       base_model="embedded:all-minilm-l6-v2", max_length=48, student_layers=2,
                       schedule={"max_steps": 3, "batch_size": 8, "learning_rate": 1.0e-3, "lr_scheduler": "constant"})
    res = train(cfg, stage="steps:3", out=tmp_path / "run", log=lambda *_: None)
    assert res.preflight.format == "classification"
    losses = [e["loss"] for e in res.metrics["losses"]]
    assert len(losses) == 3 and losses[-1] < losses[0]  # BCE over multi-hot targets falls
    assert res.metrics["eval"]["problem_type"] == "multi_label_classification"
    model = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "run" / "model"))
    names = json.loads((snaps.plan / "manifest.json").read_text())["classes"]["names"]
    assert model.config.problem_type == "multi_label_classification"
    assert [model.config.id2label[i] for i in range(len(names))] == names
