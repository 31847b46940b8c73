"""SFT and DPO default to gradient checkpointing (issue 26): the quick-start DPO peaked at 15.2 GB RSS without it,
on a 135M LoRA and 2 pairs; a 16 GB laptop failed. Classify keeps it off; a config's own choice wins."""

from __future__ import annotations

from types import SimpleNamespace

from mashbill.trainers.config import TrainConfig
from mashbill.trainers.methods.common import common_args


def _cfg(method: str, **extra) -> TrainConfig:
    return TrainConfig(name="x", method=method, snapshot="s@1", base_model="embedded:smollm2-135m-instruct", **extra)


def test_sft_and_dpo_checkpoint_by_default_classify_does_not():
    assert _cfg("sft").checkpointing and _cfg("dpo").checkpointing
    assert not _cfg("classify").checkpointing
    assert not _cfg("dpo", gradient_checkpointing=False).checkpointing
    assert _cfg("classify", gradient_checkpointing=True).checkpointing


def test_the_training_arguments_carry_it_non_reentrant(tmp_path):
    """Non-reentrant: with reentrant checkpointing the frozen embeddings' outputs need no gradient and the LoRA
    weights would get none."""
    cpu = SimpleNamespace(device="cpu")
    kw = common_args(SimpleNamespace(config=_cfg("dpo"), deepspeed_path=None), cpu, tmp_path, max_steps=1, epochs=1)
    assert kw["gradient_checkpointing"] is True and kw["gradient_checkpointing_kwargs"] == {"use_reentrant": False}
    kw = common_args(SimpleNamespace(config=_cfg("classify"), deepspeed_path=None), cpu, tmp_path, max_steps=1,
                     epochs=1)
    assert kw["gradient_checkpointing"] is False and "gradient_checkpointing_kwargs" not in kw


def test_the_default_leaves_the_identity_of_an_explicit_choice_apart():
    assert _cfg("sft").sha256 != _cfg("sft", gradient_checkpointing=False).sha256
    assert _cfg("sft").sha256 != _cfg("sft", gradient_checkpointing=True).sha256
