"""Training configs: one small YAML per run, loaded into a strict model (unknown keys are refused).

    name: quickstart-sft
    method: sft                      # classify | sft | dpo
    snapshot: quickstart-plan        # NAME@VERSION, NAME (highest version), a snapshot folder, or its id
    store: ./mashbill-data           # where NAME@VERSION is looked up (STORE/snapshots)
    base_model: embedded:smollm2-135m-instruct   # a local HF folder, a .gguf file, or an embedded model
    profile: {max_seq_len: 2048}     # what this run expects; unset fields take the snapshot's values
    lora: {r: 8, alpha: 16}
    schedule: {max_steps: 3, batch_size: 2, learning_rate: 2.0e-4}

A classifier (method classify) can keep k of its base encoder's layers: `student_layers: 3` with
`base_model: embedded:all-minilm-l6-v2` trains a 3-layer student (layers 1, 3, 5 of 6; see trainers/methods/classify.py);
`student_width: 256` (and `student_ffn`) makes it narrower (trainers/methods/narrow.py), and `distill_from: RUN_DIR`
trains it on a finished classify run's logits as well as the labels (trainers/methods/distill.py).

The profile (tokenizer, chat template, max_seq_len, truncation side, loss mode) is compared with the
snapshot's manifest by the preflight; a field left unset takes the manifest's value, so a config that
says nothing trains exactly what was validated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

import yaml
from pydantic import Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from mashbill.errors import MashbillError
from mashbill.specs.model import Strict, TrainerProfile

METHODS = ("classify", "sft", "dpo")
CONFIGS = Path(__file__).resolve().parent / "configs"


class TrainConfigError(MashbillError):
    """A training config cannot be read or is invalid."""


# What the run expects of its data: the spec's TrainerProfile with every field optional (None = the snapshot
# manifest's value), derived from it so that the two field lists cannot drift apart.
Profile = create_model("Profile", __base__=Strict, __module__=__name__,
                       **{name: (Optional[f.annotation], FieldInfo.merge_field_infos(f, default=None))
                          for name, f in TrainerProfile.model_fields.items()})


class Lora(Strict):
    r: int = Field(8, ge=1)
    alpha: int = Field(16, ge=1)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] | Literal["all-linear"] = ["q_proj", "k_proj", "v_proj", "o_proj"]


class Schedule(Strict):
    max_steps: int = Field(-1, ge=-1)  # -1: run `epochs` epochs
    epochs: float = Field(1.0, gt=0)
    batch_size: int = Field(4, ge=1)
    grad_accum: int = Field(1, ge=1)
    learning_rate: float = Field(2e-4, gt=0)
    lr_scheduler: Literal["linear", "cosine", "constant", "constant_with_warmup"] = "cosine"
    warmup_ratio: float = Field(0.0, ge=0, lt=1)  # a share of the steps (transformers 5: warmup_steps < 1)
    optimizer: Literal["adamw_torch", "adamw_torch_fused", "sgd", "adafactor"] = "adamw_torch"
    weight_decay: float = Field(0.0, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    seed: int = 0
    save_steps: int = Field(50, ge=1)
    logging_steps: int = Field(1, ge=1)


class TrainConfig(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
    method: Literal["classify", "sft", "dpo"]
    snapshot: str = Field(min_length=1)
    store: str = "./mashbill-data"
    base_model: str = Field(min_length=1)
    # sft: default from the loss mode; classify: `pairs` trains a plan-vs-correct reward model on a preference
    # snapshot (trainers/methods/reward_pairs.py)
    format: Literal["messages", "prompt-completion", "pairs"] | None = None
    profile: Profile = Profile()
    lora: Lora | None = Lora()  # classify ignores it (full fine-tuning of a small encoder)
    schedule: Schedule = Schedule()
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    deepspeed: str | None = None  # a DeepSpeed JSON (cluster runs); validated by the preflight
    attn_implementation: Literal["eager", "sdpa"] = "eager"  # eager: what the MI250X ROCm stack runs reliably
    logits_to_keep: bool = True  # sft: compute logits only from the first target position on
    # recompute activations in the backward pass instead of keeping them: None means on for sft and dpo (the
    # quick-start DPO peaked at 15.2 GB RSS without it, bench/RESULTS.md), off for classify (short texts)
    gradient_checkpointing: bool | None = None
    beta: float = Field(0.1, gt=0)  # dpo
    max_length: int = Field(128, ge=8)  # classify: tokens per text
    # classify: keep k of the base encoder's layers (a smaller, faster student; None keeps all). `spread`
    # keeps every other layer ending on the last (6 -> 3: layers 1, 3, 5), `first` keeps layers 0..k-1.
    student_layers: int | None = Field(None, ge=1)
    student_layer_pick: Literal["spread", "first"] = "spread"
    # classify: a narrower student (trainers/methods/narrow.py): hidden size (a multiple of the head size; heads shrink
    # with it) and feed-forward size (None: scaled with the hidden size); units kept by weight norms
    student_width: int | None = Field(None, ge=1)
    student_ffn: int | None = Field(None, ge=1)
    # classify: distil from a finished classify run of the same snapshot and labels (trainers/methods/distill.py):
    # loss = alpha * CE + (1 - alpha) * T^2 * KL(teacher / T || student / T)
    distill_from: str | None = None
    distill_alpha: float = Field(0.5, ge=0, le=1)
    distill_temperature: float = Field(2.0, gt=0)
    threads: int | None = Field(None, ge=1)

    @property
    def causal_lm(self) -> bool:
        """Does the method train a causal LM on long sequences (sft, dpo), not an encoder classifier?"""
        return self.method in ("sft", "dpo")

    @property
    def checkpointing(self) -> bool:
        """Gradient checkpointing as the run uses it: the config's choice, else on for sft and dpo."""
        if self.gradient_checkpointing is not None:
            return self.gradient_checkpointing
        return self.causal_lm

    @property
    def sha256(self) -> str:
        """The config's identity: its content (paths as written), never the file's formatting or the store's
        location (the ladder's records live in that store)."""
        from mashbill.hashing import sha256_json

        body = self.model_dump(mode="json", exclude={"store"})
        if self.student_layers is None:  # a config written before the option keeps its identity (ladder history)
            body.pop("student_layers")
            body.pop("student_layer_pick")
        if self.gradient_checkpointing is None:  # not set: the field is left out of the identity
            body.pop("gradient_checkpointing")
        if self.student_width is None and self.student_ffn is None and self.distill_from is None:
            for k in ("student_width", "student_ffn", "distill_from", "distill_alpha", "distill_temperature"):
                body.pop(k)
        return sha256_json(body)


def find_config(ref: str | Path) -> Path:
    """A config by path, or by name among the shipped configs (trainers/configs/NAME.yaml)."""
    p = Path(ref)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise TrainConfigError(f"training config not found: {p}")
        return p
    shipped = CONFIGS / f"{ref}.yaml"
    if shipped.is_file():
        return shipped
    have = ", ".join(sorted(x.stem for x in CONFIGS.glob("*.yaml"))) or "none"
    raise TrainConfigError(f"no training config {ref!r} (give a .yaml path, or one of: {have})")


def load_config(ref: str | Path, *, method: str | None = None, store: str | Path | None = None
                ) -> tuple[TrainConfig, Path]:
    path = find_config(ref)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise TrainConfigError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise TrainConfigError(f"{path}: expected a mapping of config fields")
    try:
        cfg = TrainConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        raise TrainConfigError(f"{path}: field {loc}: {err['msg']}") from None
    if store is not None:
        cfg = cfg.model_copy(update={"store": str(store)})
    if method is not None and cfg.method != method:
        raise TrainConfigError(f"{path}: method is {cfg.method!r}; run it with `mashbill train {cfg.method}`")
    return cfg, path


def shipped_configs() -> list[Path]:
    return sorted(CONFIGS.glob("*.yaml"))


__all__ = ["TrainConfig", "TrainConfigError", "Profile", "Lora", "Schedule", "find_config", "load_config",
           "shipped_configs"]
