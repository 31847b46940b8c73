"""`student_layers`: a classify run keeps k of the base encoder's layers (docs: README "Train", the latency
lines of "Exporting students"). The cut model has k layers and says so, trains, exports to ONNX with the
layer count in its metadata, and the predictor runs it; a bad value is refused before any model loads."""

from __future__ import annotations

import pytest
import yaml

from mashbill.factory.store import Store
from mashbill.trainers import ladder
from mashbill.trainers.config import TrainConfigError, load_config
from mashbill.trainers.methods.classify import keep_layers, layer_indices
from tests.conftest import run_cli


def test_layer_indices_spread_ends_on_the_last_layer_and_first_keeps_the_bottom():
    assert layer_indices(6, 3) == [1, 3, 5]
    assert layer_indices(6, 2) == [2, 5]
    assert layer_indices(6, 6) == [0, 1, 2, 3, 4, 5]
    assert layer_indices(12, 4) == [2, 5, 8, 11]
    assert layer_indices(6, 3, "first") == [0, 1, 2]
    for k in range(1, 13):
        assert len(set(layer_indices(12, k))) == k
    for bad in (0, 7):
        with pytest.raises(ValueError):
            layer_indices(6, bad)


def test_keep_layers_keeps_the_base_layers_it_names():
    import torch
    from transformers import AutoModelForSequenceClassification

    from mashbill.trainers.base_model import minilm_folder

    model = AutoModelForSequenceClassification.from_pretrained(str(minilm_folder()), num_labels=2)
    before = [layer.intermediate.dense.weight.detach().clone() for layer in model.bert.encoder.layer]
    assert keep_layers(model, 3) == [1, 3, 5]
    assert model.config.num_hidden_layers == 3 and len(model.bert.encoder.layer) == 3
    for i, j in enumerate([1, 3, 5]):
        assert torch.equal(model.bert.encoder.layer[i].intermediate.dense.weight, before[j])
    with torch.inference_mode():  # the cut model runs
        out = model(input_ids=torch.tensor([[101, 7592, 102]]), attention_mask=torch.ones(1, 3, dtype=torch.long))
    assert out.logits.shape == (1, 2)


def test_zero_layers_is_refused_by_the_config(snaps, tmp_path):
    cfg = snaps.config(tmp_path, "cx-l0", method="classify", snapshot="tcx@1",
                       base_model="embedded:all-minilm-l6-v2", student_layers=0)
    with pytest.raises(TrainConfigError, match=r"field student_layers: .*greater than or equal to 1"):
        load_config(cfg)


@pytest.mark.parametrize("fields, message", [
    ({"method": "classify", "student_layers": 7}, "student_layers 7 is more than the 6 layers of base model"),
    ({"method": "sft", "snapshot": "tplan@1", "base_model": "embedded:smollm2-135m-instruct", "student_layers": 3},
     "student_layers applies to method classify, not sft"),
])
def test_bad_student_layers_is_a_one_line_refusal_before_any_model_loads(snaps, tmp_path, fields, message):
    data = {"snapshot": "tcx@1", "base_model": "embedded:all-minilm-l6-v2", **fields}
    cfg = snaps.config(tmp_path, "cx-bad-layers", **data)
    proc = run_cli("train", data["method"], cfg, "--stage", "steps:1", "--out", tmp_path / "run", timeout=300)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "run").exists()
    with Store.open(snaps.store, read_only=True) as store:  # the preflight recorded no stage: it refused first
        assert ladder.history(store, load_config(cfg)[0].sha256) == []


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_three_layer_student_trains_exports_and_predicts(snaps, tmp_path):
    import onnx
    from transformers import AutoModelForSequenceClassification

    from mashbill.exporters.build import export_onnx
    from mashbill.exporters.predict import load_predictor
    from mashbill.trainers.run import train

    cfg = snaps.config(tmp_path, "cx-l3", method="classify", snapshot="tcx@1", base_model="embedded:all-minilm-l6-v2",
                       max_length=64, student_layers=3,
                       schedule={"max_steps": 12, "batch_size": 16, "learning_rate": 5.0e-4, "lr_scheduler": "linear"})
    res = train(cfg, stage="steps:12", out=tmp_path / "run", log=lambda *_: None)
    losses = [e["loss"] for e in res.metrics["losses"]]
    assert len(losses) == 12 and losses[-1] < losses[0]
    model = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "run" / "model"))
    assert model.config.num_hidden_layers == 3 and len(model.bert.encoder.layer) == 3
    assert model.config.mashbill_kept_layers == [1, 3, 5]
    run_cfg = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert run_cfg["student_layers"] == 3 and run_cfg["student_layer_pick"] == "spread"

    out, m = export_onnx(tmp_path / "run", out=tmp_path / "onnx", snapshot=snaps.cx, latency_samples=20,
                         threads=(1,))
    rep = m["reports"]["parity"]
    assert rep["encoder"] == {"layers": 3, "kept_base_layers": [1, 3, 5]}
    assert rep["parity"]["fp32"]["agreement"] == 1.0 and rep["parity"]["fp32"]["max_abs_logit_diff"] < 1e-3
    # the graph itself has three encoder layers: three 384x1536 feed-forward weights, not six
    graph = onnx.load(str(out / "model.onnx"))
    ffn = [i for i in graph.graph.initializer if list(i.dims) in ([384, 1536], [1536, 384])]
    assert len(ffn) == 6, [i.name for i in ffn]
    pred = load_predictor(out / "model.int8.onnx")
    assert pred.encoder_layers == 3
    assert pred.lineage["encoder"]["layers"] == 3
    rows = pred.predict(["What is 2 + 2?", "Plan a week of meals for a family of four with a shopping list"])
    assert [r["label"] in set(model.config.id2label.values()) for r in rows] == [True, True]
