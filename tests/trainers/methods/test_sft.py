"""LoRA SFT on a snapshot with real TRL/PEFT and SmolLM2-135M: TRL's own labels are exactly the assistant
JSON plus <|im_end|> (never a correction's wrong turn), loss falls, the adapter changes, logits_to_keep
gives the same loss, and the run folder matches the exporters' contract."""

from __future__ import annotations

import json

import pytest

from mashbill.curation.snapshots.pull import load_snapshot
from mashbill.trainers.config import load_config
from mashbill.trainers.preflight import run_preflight

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _build(cfg_path, smol_base, tmp_path, max_steps=1):
    from mashbill.trainers.ladder import parse_stage
    from mashbill.trainers.launcher import place
    from mashbill.trainers.run import _builder, _load_parts

    cfg, path = load_config(cfg_path)
    pf = run_preflight(cfg, path.parent)
    placement = place(threads=cfg.threads)
    base, tok, data = _load_parts(pf)
    trainer, save = _builder(cfg.method)(pf, placement, base, data, tok, parse_stage(f"steps:{max_steps}"),
                                         tmp_path / "work", max_steps=max_steps, epochs=1.0)
    return pf, tok, data, trainer


def _trained_texts(trainer, tok):
    ds = trainer.train_dataset
    return [tok.decode([i for i, lab in zip(r["input_ids"], r["labels"]) if lab != -100]) for r in ds]


def test_trl_labels_are_the_assistant_json_and_end_of_turn(snaps, smol_base, tmp_path):
    cfg = snaps.config(tmp_path, "labels-plan", method="sft", snapshot="tplan@1", base_model="embedded:smollm2-135m-instruct")
    pf, tok, data, trainer = _build(cfg, smol_base, tmp_path)
    assert pf.format == "messages"
    want = [r["messages"][-1]["content"] + "<|im_end|>" for r in data["train"]]
    assert _trained_texts(trainer, tok) == want
    assert isinstance(json.loads(want[0][:-len("<|im_end|>")]), (dict, list))  # the label is the JSON itself


@pytest.mark.parametrize("fmt", ["messages", "prompt-completion"])
def test_no_pulled_format_trains_a_corrections_wrong_turn(snaps, smol_base, tmp_path, fmt):
    cfg = snaps.config(tmp_path, f"labels-{fmt}", method="sft", snapshot="tpref@1", format=fmt,
                       base_model="embedded:smollm2-135m-instruct")
    pf, tok, data, trainer = _build(cfg, smol_base, tmp_path)
    rows = data["train"]["messages"] if fmt == "messages" else [p + c for p, c in zip(data["train"]["prompt"],
                                                                                     data["train"]["completion"])]
    texts = _trained_texts(trainer, tok)
    corrections = 0
    for conv, trained in zip(rows, texts):
        final = conv[-1]["content"]
        assert trained.startswith(final + "<|im_end|>"), trained
        assert trained.strip() == final + "<|im_end|>"
        for earlier in conv[:-1]:
            if earlier["role"] == "assistant":
                corrections += 1
                assert earlier["content"] not in trained
    assert corrections > 0  # the snapshot does hold correction samples


def test_dpo_labels_hold_only_the_chosen_and_rejected_plans(snaps, smol_base, tmp_path):
    cfg = snaps.config(tmp_path, "labels-dpo", method="dpo", snapshot="tpref@1",
                       base_model="embedded:smollm2-135m-instruct")
    pf, tok, data, trainer = _build(cfg, smol_base, tmp_path)
    ds = trainer.train_dataset
    assert ds.num_rows == data["train"].num_rows > 0
    for r, src in zip(ds, data["train"]):
        assert tok.decode(r["chosen_ids"]).strip() == src["chosen"][0]["content"] + "<|im_end|>"
        assert tok.decode(r["rejected_ids"]).strip() == src["rejected"][0]["content"] + "<|im_end|>"
        assert "<|im_start|>assistant" not in tok.decode(r["prompt_ids"])[:-len("<|im_start|>assistant\n")]


def test_logits_to_keep_gives_the_same_loss(snaps, smol_base, tmp_path):
    import torch

    cfg = snaps.config(tmp_path, "keep", method="sft", snapshot="tplan@1", base_model="embedded:smollm2-135m-instruct",
                       lora={"r": 4, "alpha": 8, "dropout": 0.0}, schedule={"batch_size": 4})
    pf, tok, data, trainer = _build(cfg, smol_base, tmp_path)
    inputs = trainer._prepare_inputs(next(iter(trainer.get_train_dataloader())))
    positions = []  # how many positions the vocabulary projection ran on
    hook = trainer.model.get_output_embeddings().register_forward_hook(
        lambda mod, args, out: positions.append(out.shape[1]))
    trainer.model.eval()
    with torch.no_grad():
        trainer.keep_logits = True
        kept = float(trainer.compute_loss(trainer.model, inputs))
        trainer.keep_logits = False
        full = float(trainer.compute_loss(trainer.model, inputs))
    hook.remove()
    assert kept == pytest.approx(full, rel=1e-4)
    T = inputs["input_ids"].shape[1]
    trained = inputs["labels"] != -100
    first = int(trained.float().argmax(dim=1)[trained.any(dim=1)].min())
    # the kept path ran the projection from the first target position on, not over the whole prompt (TRL's own
    # path does not call the lm_head module, so it leaves no count)
    assert positions[0] == T - first + 1 < T
