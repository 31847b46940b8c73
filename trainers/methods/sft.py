"""`train sft`: TRL's SFTTrainer with a PEFT LoRA adapter, on a snapshot's messages or prompt-completion pull.

Everything the run needs comes from the snapshot, so nothing is wired in by hand: the training template (the
chat template, limited to the last turn under a `last-turn` loss), `max_length` = the profile's
max_seq_len (TRL's default of 1024 silently drops longer rows), and the loss: assistant-only on messages
(labels are exactly the assistant JSON plus the end-of-turn token), completion-only on prompt-completion.

Long prompts with short targets (the router recipe: ~7k-token prompts, 13-128-token targets) compute
logits only from the first target position of the batch on (`logits_to_keep`), so the vocabulary
projection is not paid for every prompt token; the loss is the same (tests/trainers/methods/test_sft.py).
"""

from __future__ import annotations

from mashbill.trainers.methods.common import common_args, lora_config, truncation_mode


def sft_trainer_class():
    import torch.nn.functional as F
    from trl import SFTTrainer

    class KeepLogitsSFTTrainer(SFTTrainer):
        """SFTTrainer whose loss computes logits only for the positions that predict a target token."""

        keep_logits = True

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            labels = inputs.get("labels")
            if not self.keep_logits or labels is None or return_outputs:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            trained = labels != -100
            rows = trained.any(dim=1)
            if not rows.any():
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            T = labels.shape[1]
            first = int(trained.float().argmax(dim=1)[rows].min())
            keep = T - max(first - 1, 0)  # logits at position t predict token t + 1
            kw = {k: inputs[k] for k in ("input_ids", "attention_mask", "position_ids") if k in inputs}
            out = model(**kw, logits_to_keep=keep, use_cache=False)
            logits = out.logits[:, :-1, :]
            targets = labels[:, T - keep + 1:]
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                                   ignore_index=-100, reduction="sum")
            n = num_items_in_batch if num_items_in_batch is not None else (targets != -100).sum()
            return loss / n.to(loss.device) if hasattr(n, "to") else loss / n

    return KeepLogitsSFTTrainer


def build(pf, placement, base, datasets, tokenizer, stage, work, *, max_steps: int, epochs: float):
    """(trainer, save) for an SFT run."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig

    cfg = pf.config
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[cfg.precision]
    # `placement` is taken so that nothing loads a model before the device was set from LOCAL_RANK
    model = AutoModelForCausalLM.from_pretrained(str(base.path), dtype=dtype,
                                                 attn_implementation=cfg.attn_implementation)
    fmt, loss = pf.format, pf.profile["loss"]
    args = SFTConfig(**common_args(pf, placement, work, max_steps=max_steps, epochs=epochs),
                     max_length=int(pf.profile["max_seq_len"]),
                     truncation_mode=truncation_mode(pf.profile.get("truncation_side")),
                     assistant_only_loss=fmt == "messages" and loss in ("assistant-only", "last-turn"),
                     completion_only_loss=fmt == "prompt-completion", packing=False, dataset_num_proc=None)
    cls = sft_trainer_class()
    trainer = cls(model=model, args=args, train_dataset=datasets["train"],
                  eval_dataset=datasets["eval"] if datasets["eval"].num_rows else None,
                  processing_class=tokenizer, peft_config=lora_config(cfg, "CAUSAL_LM"))
    trainer.keep_logits = cfg.logits_to_keep

    def save(folder):
        trainer.model.save_pretrained(folder / "adapter")
        tokenizer.save_pretrained(folder / "adapter")

    return trainer, save
