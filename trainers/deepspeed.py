"""DeepSpeed JSON checks: deepspeed's own config model, and no silent override of the training arguments.

When a DeepSpeed config carries a `scheduler` (or `optimizer`) block, the HF Trainer builds DeepSpeed's and
ignores `lr_scheduler_type` (or `optim`) from the training arguments: the reference's ZeRO-2 preset ran
WarmupDecayLR while its config said cosine (DOMAIN §10). A block is accepted only when it is the same
thing the config asks for, with its numbers left to `"auto"` or equal to the config's.
"""

from __future__ import annotations

import json
from pathlib import Path

from mashbill.errors import MashbillError
from mashbill.trainers.config import TrainConfig

# training-argument names -> the DeepSpeed block type that does the same
SCHEDULERS = {"linear": "WarmupDecayLR", "constant_with_warmup": "WarmupLR", "cosine": "WarmupCosineLR",
              "constant": None}
OPTIMIZERS = {"adamw_torch": ("AdamW", "Adam"), "adamw_torch_fused": ("AdamW", "Adam"), "sgd": ("SGD",),
              "adafactor": ()}
STAGES = {0, 1, 2, 3}


class DeepSpeedConfigError(MashbillError):
    """A DeepSpeed JSON is malformed or would override the training arguments."""


def _drop_auto(d: dict) -> dict:
    # "auto" is filled in by the HF integration before DeepSpeed sees the config
    return {k: (_drop_auto(v) if isinstance(v, dict) else v) for k, v in d.items() if v != "auto"}


def load_deepspeed(path: Path) -> dict:
    if not path.is_file():
        raise DeepSpeedConfigError(f"deepspeed config not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DeepSpeedConfigError(f"{path} line {exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise DeepSpeedConfigError(f"{path}: expected a JSON object")
    return data


def validate_zero(path: Path, data: dict) -> None:
    """deepspeed's pydantic model of the zero_optimization block (unknown keys, a stage of 7, ...)."""
    zero = data.get("zero_optimization")
    if zero is None:
        return
    if not isinstance(zero, dict):
        raise DeepSpeedConfigError(f"{path}: zero_optimization: expected an object")
    try:
        from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    except ImportError:
        stage = zero.get("stage", 0)
        if stage not in STAGES:
            raise DeepSpeedConfigError(f"{path}: zero_optimization.stage: {stage!r}, expected 0-3") from None
        return
    from pydantic import ValidationError

    try:
        DeepSpeedZeroConfig(**_drop_auto(zero))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise DeepSpeedConfigError(f"{path}: zero_optimization.{loc}: {err['msg']} (deepspeed's config model)"
                                   ) from None


def _param_clash(block: dict, key: str, want: float) -> bool:
    v = (block.get("params") or {}).get(key, "auto")
    return v != "auto" and not (isinstance(v, (int, float)) and abs(float(v) - want) <= 1e-12 * max(1.0, abs(want)))


def check_overrides(path: Path, data: dict, cfg: TrainConfig) -> None:
    sch = cfg.schedule
    block = data.get("scheduler")
    if block is not None:
        have = (block or {}).get("type")
        want = SCHEDULERS.get(sch.lr_scheduler)
        if have != want:
            raise DeepSpeedConfigError(
                f"{path}: scheduler {have} would silently replace the config's lr_scheduler {sch.lr_scheduler} (the "
                f"HF Trainer uses the DeepSpeed block); remove the block"
                + (f" or make it {want}" if want else ""))
        if _param_clash(block, "warmup_max_lr", sch.learning_rate):
            raise DeepSpeedConfigError(f"{path}: scheduler.params.warmup_max_lr {block['params']['warmup_max_lr']} "
                                       f"differs from the config's learning_rate {sch.learning_rate}; set it to \"auto\"")
        for key in ("warmup_num_steps", "total_num_steps"):
            v = (block.get("params") or {}).get(key, "auto")
            if v != "auto":
                raise DeepSpeedConfigError(f"{path}: scheduler.params.{key} is {v}, fixed in the DeepSpeed JSON "
                                           f"instead of derived from the config's schedule; set it to \"auto\"")
    block = data.get("optimizer")
    if block is not None:
        have = (block or {}).get("type")
        want = OPTIMIZERS.get(sch.optimizer, ())
        if have not in want:
            raise DeepSpeedConfigError(f"{path}: optimizer {have} would silently replace the config's optimizer "
                                       f"{sch.optimizer}; remove the block" + (f" or make it {want[0]}" if want else ""))
        for key, value in (("lr", sch.learning_rate), ("weight_decay", sch.weight_decay)):
            if _param_clash(block, key, value):
                raise DeepSpeedConfigError(f"{path}: optimizer.params.{key} {block['params'][key]} differs from the "
                                           f"config's {value}; set it to \"auto\"")
    for key, want in (("bf16", cfg.precision == "bf16"), ("fp16", cfg.precision == "fp16")):
        enabled = (data.get(key) or {}).get("enabled", False)
        if enabled not in ("auto", want) and enabled is True:
            raise DeepSpeedConfigError(f"{path}: {key}.enabled is true but the config's precision is "
                                       f"{cfg.precision}; set it to \"auto\"")


def check_deepspeed(path: Path, cfg: TrainConfig) -> dict:
    """Validate a DeepSpeed JSON for `cfg`; raise DeepSpeedConfigError (one line) or return the parsed config."""
    data = load_deepspeed(path)
    validate_zero(path, data)
    check_overrides(path, data, cfg)
    return data
