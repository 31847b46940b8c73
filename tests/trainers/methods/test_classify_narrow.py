"""Narrow, distilled classify students (docs: README "Train", "Exporting students"): `student_width`/`student_ffn`
shrink a (layer-cut) MiniLM to a smaller valid BERT (trainers/methods/narrow.py); `distill_from` trains it on a teacher
run's logits (trainers/methods/distill.py); the preflight refuses bad widths and a teacher of another snapshot or label set."""

from __future__ import annotations

import json
import shutil

import pytest

from mashbill.trainers.methods.narrow import WidthError, shrink_width, width_plan


@pytest.fixture(scope="module")
def wide():
    """A real 3-layer MiniLM classifier (3 labels), in eval mode."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from mashbill.trainers.base_model import minilm_folder
    from mashbill.trainers.methods.classify import keep_layers

    torch.set_num_threads(1)  # a busy 2-core CI box: spin-waiting OpenMP threads cost more than they give
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(str(minilm_folder()), num_labels=3)
    keep_layers(model, 3)
    return model.eval(), AutoTokenizer.from_pretrained(str(minilm_folder()))


TEXTS = ["What is the weather in Berlin tomorrow?", "Set an alarm for six",
         "Plan a week of meals for a family of four and write the shopping list"]


def _logits(model, tok):
    import torch

    with torch.inference_mode():
        return model(**tok(TEXTS, padding=True, return_tensors="pt")).logits


def test_a_narrow_student_has_the_shapes_it_says_saves_loads_and_predicts(wide, tmp_path):
    import torch
    from transformers import AutoModelForSequenceClassification

    model, tok = wide
    narrow, info = shrink_width(model, 256, 512)
    c = narrow.config
    assert (c.hidden_size, c.num_attention_heads, c.intermediate_size, c.num_hidden_layers) == (256, 8, 512, 3)
    assert info["base"] == {"hidden": 384, "heads": 12, "ffn": 1536} and len(info["kept_heads"]) == 3
    assert all(len(h) == 8 and len(set(h)) == 8 and max(h) < 12 for h in info["kept_heads"])
    assert narrow.bert.embeddings.word_embeddings.weight.shape == (model.config.vocab_size, 256)
    layer = narrow.bert.encoder.layer[0]
    assert layer.attention.self.query.weight.shape == (256, 256)
    assert layer.intermediate.dense.weight.shape == (512, 256) and layer.output.dense.weight.shape == (256, 512)
    assert narrow.classifier.weight.shape == (3, 256)
    assert model.config.hidden_size == 384 and model.bert.encoder.layer[0].intermediate.dense.weight.shape[0] == 1536
    wide_n = sum(p.numel() for p in model.bert.encoder.parameters())
    assert sum(p.numel() for p in narrow.bert.encoder.parameters()) < 0.4 * wide_n
    narrow.save_pretrained(tmp_path / "m")
    back = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "m")).eval()
    assert back.config.mashbill_width["hidden"] == 256
    out = _logits(back, tok)
    assert out.shape == (3, 3) and torch.isfinite(out).all()
    assert torch.allclose(out, _logits(narrow.eval(), tok), atol=1e-5)


def test_full_width_is_the_same_model_and_a_narrow_ffn_drops_exactly_the_unkept_neurons(wide):
    """Independent checks of the slicing: keeping everything changes nothing; keeping F of the feed-forward
    neurons equals the wide model with the other neurons' output weights zeroed."""
    import copy

    import torch

    model, tok = wide
    same, _ = shrink_width(model, 384, 1536)
    assert torch.allclose(_logits(same.eval(), tok), _logits(model, tok), atol=1e-5)
    narrow, _ = shrink_width(model, None, 700)
    assert narrow.config.hidden_size == 384 and narrow.config.intermediate_size == 700
    masked = copy.deepcopy(model)
    with torch.no_grad():
        for wl, nl in zip(masked.bert.encoder.layer, narrow.eval().bert.encoder.layer):
            where = {tuple(r[:8].tolist()): i for i, r in enumerate(wl.intermediate.dense.weight)}
            kept = [where[tuple(r[:8].tolist())] for r in nl.intermediate.dense.weight]
            drop = sorted(set(range(1536)) - set(kept))
            assert len(drop) == 1536 - 700
            wl.output.dense.weight[:, drop] = 0
    assert torch.allclose(_logits(narrow, tok), _logits(masked, tok), atol=1e-4)
    assert not torch.allclose(_logits(narrow, tok), _logits(model, tok), atol=1e-4)


@pytest.mark.parametrize("hidden, ffn, message", [
    (250, None, "student_width 250: expected a multiple of the head size 32"),
    (512, None, "student_width 512: expected a multiple of the head size 32 between 32 and the base hidden size 384"),
    (16, None, "student_width 16"),
    (256, 2000, "student_ffn 2000: expected 1..1536"),
])
def test_impossible_widths_are_refused(wide, hidden, ffn, message):
    with pytest.raises(WidthError) as err:
        width_plan(wide[0].config, hidden, ffn)
    assert message in str(err.value)
    assert width_plan(wide[0].config, 192, None) == {"hidden": 192, "heads": 6, "head_size": 32, "ffn": 768}


def test_distillation_moves_the_narrow_student_toward_the_teacher(wide):
    """alpha 0: only the teacher's soft labels; the student's KL to the teacher falls as it trains."""
    import torch
    import torch.nn.functional as F

    from mashbill.trainers.methods.distill import distill_loss

    teacher, tok = wide
    texts = TEXTS * 2 + ["Remind me to call mum", "Translate good morning into German"]
    enc = tok(texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        t_logits = teacher(**enc).logits * 4  # confident soft labels the untrained head does not match
    torch.manual_seed(0)
    student, _ = shrink_width(teacher, 128, 256)
    student.train()
    opt = torch.optim.AdamW(student.parameters(), lr=1e-3)
    labels = t_logits.argmax(-1)

    def kl():
        with torch.no_grad():
            s = student.eval()(**enc).logits
        student.train()
        return float(F.kl_div(F.log_softmax(s, -1), F.log_softmax(t_logits, -1), log_target=True,
                              reduction="batchmean"))

    before, losses = kl(), []
    for _ in range(15):
        loss = distill_loss(student(**enc).logits, t_logits, labels, alpha=0.0, temperature=2.0)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0]
    assert kl() < 0.5 * before
    # the hard term alone is plain cross-entropy; the soft term is zero when student == teacher
    s = torch.randn(4, 3)
    y = torch.tensor([0, 1, 2, 1])
    assert torch.isclose(distill_loss(s, s * 0, y, alpha=1.0, temperature=3.0), F.cross_entropy(s, y))
    assert float(distill_loss(s, s, y, alpha=0.0, temperature=3.0)) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_train_classify_distils_a_narrow_student_and_refuses_a_foreign_teacher(snaps, tmp_path):
    from transformers import AutoModelForSequenceClassification

    from mashbill.trainers.config import load_config
    from mashbill.trainers.preflight import PreflightError, run_preflight
    from mashbill.trainers.run import train

    sched = {"max_steps": 6, "batch_size": 16, "learning_rate": 5.0e-4, "lr_scheduler": "linear"}
    common = {"method": "classify", "snapshot": "tcx@1", "base_model": "embedded:all-minilm-l6-v2",
              "max_length": 32, "student_layers": 1, "schedule": sched}
    teacher = tmp_path / "teacher"
    train(snaps.config(tmp_path, "cx-teacher", **common), stage="steps:6", out=teacher, log=lambda *_: None)
    # the student starts from the trained teacher's weights (base_model: its model folder), shrunk
    cfg = snaps.config(tmp_path, "cx-narrow", **{**common, "student_layers": None, "base_model": str(teacher / "model")},
                       student_width=128, student_ffn=256, distill_from=str(teacher), distill_alpha=0.3,
                       distill_temperature=2.0)
    res = train(cfg, stage="steps:6", out=tmp_path / "run", log=lambda *_: None)
    losses = [e["loss"] for e in res.metrics["losses"]]
    assert len(losses) == 6 and losses[-1] < losses[0]
    model = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "run" / "model"))
    assert (model.config.hidden_size, model.config.intermediate_size, model.config.num_hidden_layers) == (128, 256, 1)
    assert res.metrics["eval"]["eval_examples"] > 0
    assert model.config.mashbill_distilled_from == {"run": str(teacher.resolve()), "alpha": 0.3, "temperature": 2.0}
    # it exports like any classify run: the graph is the narrow one and matches its PyTorch model
    import onnx

    from mashbill.exporters.build import export_onnx

    out, m = export_onnx(tmp_path / "run", out=tmp_path / "onnx", snapshot=snaps.cx, latency_samples=5, threads=(1,))
    assert m["reports"]["parity"]["parity"]["fp32"]["agreement"] == 1.0
    dims = [list(i.dims) for i in onnx.load(str(out / "model.onnx")).graph.initializer]
    assert [128, 256] in dims and [256, 128] in dims and [384, 1536] not in dims and [1536, 384] not in dims

    # a teacher of another snapshot, or with other labels: one-line refusals naming both values, nothing loaded
    other = tmp_path / "other"
    shutil.copytree(teacher, other)
    lin = json.loads((other / "lineage.json").read_text())
    real_id = lin["snapshot"]["id"]
    lin["snapshot"]["id"] = "0" * len(real_id)
    (other / "lineage.json").write_text(json.dumps(lin))
    bad = snaps.config(tmp_path, "cx-bad-teacher", **common, distill_from=str(other))
    with pytest.raises(PreflightError, match=rf"teacher snapshot tcx@1 \(id {'0' * len(real_id)}\), this run "
                                             rf"tcx@1 \(id {real_id}\)"):
        run_preflight(load_config(bad)[0], tmp_path)
    relabel = tmp_path / "relabel"
    shutil.copytree(teacher, relabel)
    conf = json.loads((relabel / "model" / "config.json").read_text())
    conf["id2label"] = {k: f"x{k}" for k in conf["id2label"]}
    (relabel / "model" / "config.json").write_text(json.dumps(conf))
    bad2 = snaps.config(tmp_path, "cx-bad-labels", **common, distill_from=str(relabel))
    with pytest.raises(PreflightError, match=r"teacher labels \['x0', .*\], this run \[.*'trivial'"):
        run_preflight(load_config(bad2)[0], tmp_path)
    wrong = snaps.config(tmp_path, "cx-bad-width", **common, student_width=100)
    with pytest.raises(PreflightError, match=r"^config cx-bad-width: student_width 100: expected a multiple of the "
                                             r"head size 32 between 32 and the base hidden size 384$"):
        run_preflight(load_config(wrong)[0], tmp_path)
    sft = snaps.config(tmp_path, "sft-distill", method="sft", snapshot="tplan@1", distill_from=str(teacher),
                       base_model="embedded:smollm2-135m-instruct")
    with pytest.raises(PreflightError, match="distill_from applies to method classify, not sft"):
        run_preflight(load_config(sft)[0], tmp_path)
