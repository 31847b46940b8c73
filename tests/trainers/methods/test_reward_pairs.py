"""`train classify` with `format: pairs` on a preference snapshot: a plan-vs-correct reward model (issue 16,
"plan-vs-correct pairs for a reward model"). The pairs come from the preference pull; the run trains a
2-class cross-encoder, and the wrong method or snapshot kind is a one-line refusal before any model loads."""

from __future__ import annotations

import json

import pytest

from mashbill.curation.snapshots.pull import load_snapshot
from mashbill.exporters.runs import ExportError
from mashbill.trainers.config import load_config
from mashbill.trainers.methods.reward_pairs import load_pairs
from mashbill.trainers.preflight import PreflightError, run_preflight


def test_every_preference_pair_gives_a_correct_and_a_wrong_example(snaps):
    pref = load_snapshot(snaps.pref, "preference")
    pairs = load_pairs(snaps.pref)
    assert pairs.label_info["id2label"] == {0: "wrong", 1: "correct"}
    for split in pref:
        got = {(r["text"], r["text_pair"], r["label"]) for r in pairs[split]}
        want = set()
        for r in pref[split]:
            query = r["prompt"][-1]["content"]
            assert r["prompt"][-1]["role"] == "user"
            want |= {(query, r["chosen"][0]["content"], 1), (query, r["rejected"][0]["content"], 0)}
        assert got == want and len(got) == pairs[split].num_rows
    train = pairs["train"]
    assert train.num_rows > 0 and set(train["label"]) == {0, 1}
    # a plan is never both correct and wrong for the same request
    labelled = {}
    for r in (r for s in pairs for r in pairs[s]):
        assert labelled.setdefault((r["text"], r["text_pair"]), r["label"]) == r["label"]


@pytest.mark.parametrize("fields, message", [
    ({"method": "classify", "snapshot": "tplan@1", "format": "pairs"}, "format pairs needs a preference snapshot; "
                                                                       "tplan@1 is kind plan"),
    ({"method": "sft", "snapshot": "tpref@1", "format": "pairs", "base_model": "embedded:smollm2-135m-instruct"},
     "format pairs is for method classify (a reward model), not sft"),
    ({"method": "classify", "snapshot": "tcx@1", "format": "messages"}, "format messages is for method sft"),
])
def test_pairs_on_the_wrong_method_or_snapshot_is_refused(snaps, tmp_path, fields, message):
    cfg, path = load_config(snaps.config(tmp_path, "bad-pairs", **{"base_model": "embedded:all-minilm-l6-v2",
                                                                   **fields}))
    with pytest.raises(PreflightError) as exc:
        run_preflight(cfg, path.parent)
    assert message in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_reward_model_trains_on_the_pairs_and_onnx_export_refuses_it(snaps, tmp_path):
    from transformers import AutoModelForSequenceClassification

    from mashbill.exporters.build import export_onnx
    from mashbill.trainers.run import train

    cfg = snaps.config(tmp_path, "reward", method="classify", snapshot="tpref@1", format="pairs",
                       base_model="embedded:all-minilm-l6-v2", max_length=96, student_layers=2,
                       schedule={"max_steps": 4, "batch_size": 8, "learning_rate": 1.0e-4, "lr_scheduler": "constant"})
    res = train(cfg, stage="steps:4", out=tmp_path / "run", log=lambda *_: None)
    assert res.preflight.format == "pairs"
    losses = [e["loss"] for e in res.metrics["losses"]]
    assert len(losses) == 4 and all(0 < x < 10 for x in losses)
    ev = res.metrics["eval"]
    assert ev["problem_type"] == "single_label_classification" and ev["eval_examples"] > 0
    model = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "run" / "model"))
    assert model.config.id2label == {0: "wrong", 1: "correct"} and model.config.num_hidden_layers == 2
    lin = json.loads((tmp_path / "run" / "lineage.json").read_text())
    assert lin["trainer_profile"]["format"] == "pairs" and lin["snapshot"]["name"] == "tpref"
    # the cross-encoder sees the plan as the second segment: its token types differ from the request's
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tmp_path / "run" / "model"))
    enc = tok("plan a trip", '[{"task": "x"}]')
    assert set(enc["token_type_ids"]) == {0, 1}
    with pytest.raises(ExportError, match="trainer_profile.format' is 'pairs'"):
        export_onnx(tmp_path / "run", out=tmp_path / "onnx")
    assert not (tmp_path / "onnx").exists()
