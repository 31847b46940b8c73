"""`train dpo`: TRL's DPOTrainer with a PEFT LoRA adapter on a preference snapshot.

The reference model is the base with the adapter disabled (no second copy in memory). The pairs' prompts
render with the snapshot's training template; `max_length` is the profile's max_seq_len.
"""

from __future__ import annotations

from mashbill.trainers.methods.common import common_args, lora_config, truncation_mode


def build(pf, placement, base, datasets, tokenizer, stage, work, *, max_steps: int, epochs: float):
    """(trainer, save) for a DPO run."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl import DPOConfig, DPOTrainer

    cfg = pf.config
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[cfg.precision]
    model = AutoModelForCausalLM.from_pretrained(str(base.path), dtype=dtype,
                                                 attn_implementation=cfg.attn_implementation)
    args = DPOConfig(**common_args(pf, placement, work, max_steps=max_steps, epochs=epochs),
                     max_length=int(pf.profile["max_seq_len"]),
                     truncation_mode=truncation_mode(pf.profile.get("truncation_side")), beta=cfg.beta,
                     dataset_num_proc=None)
    trainer = DPOTrainer(model=model, ref_model=None, args=args, train_dataset=datasets["train"],
                         eval_dataset=datasets["eval"] if datasets["eval"].num_rows else None,
                         processing_class=tokenizer, peft_config=lora_config(cfg, "CAUSAL_LM"))

    def save(folder):
        trainer.model.save_pretrained(folder / "adapter")
        tokenizer.save_pretrained(folder / "adapter")

    return trainer, save
