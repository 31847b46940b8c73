"""What the three methods share: training arguments from the config's schedule, the LoRA config."""

from __future__ import annotations

from pathlib import Path


def common_args(pf, placement, work: Path, *, max_steps: int, epochs: float) -> dict:
    cfg = pf.config
    s = cfg.schedule
    kw = dict(
        output_dir=str(work / "checkpoints"), max_steps=max_steps, num_train_epochs=epochs,
        per_device_train_batch_size=s.batch_size, per_device_eval_batch_size=s.batch_size,
        gradient_accumulation_steps=s.grad_accum, learning_rate=s.learning_rate, lr_scheduler_type=s.lr_scheduler,
        warmup_steps=s.warmup_ratio, optim=s.optimizer, weight_decay=s.weight_decay, max_grad_norm=s.max_grad_norm,
        seed=s.seed, data_seed=s.seed, save_strategy="steps", save_steps=s.save_steps, save_total_limit=2,
        logging_steps=s.logging_steps, report_to=[], eval_strategy="no", dataloader_num_workers=0,
        bf16=cfg.precision == "bf16", fp16=cfg.precision == "fp16", use_cpu=placement.device == "cpu",
        disable_tqdm=True, remove_unused_columns=True, gradient_checkpointing=cfg.checkpointing,
    )
    if cfg.checkpointing:  # non-reentrant: gradients reach the LoRA weights although the embeddings are frozen
        kw["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    if pf.deepspeed_path is not None:
        kw["deepspeed"] = str(pf.deepspeed_path)
    return kw


def lora_config(cfg, task_type: str):
    from peft import LoraConfig

    lo = cfg.lora
    if lo is None:
        return None
    return LoraConfig(r=lo.r, lora_alpha=lo.alpha, lora_dropout=lo.dropout, target_modules=lo.target_modules,
                      task_type=task_type, bias="none")


def truncation_mode(side: str | None) -> str:
    # TRL's names: the right side is cut under keep_start
    return "keep_end" if side == "left" else "keep_start"
