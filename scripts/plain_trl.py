"""Train on a `mashbill snapshot pull --out` folder with plain TRL: no Mashbill import, no number copied by hand.

    python scripts/plain_trl.py PULL_DIR BASE_MODEL OUT_DIR [--max-steps N]

PULL_DIR holds what the pull wrote: train.jsonl, chat_template.jinja, and sft_config.json (formats messages and
prompt-completion) or dpo_config.json (format preference) with the TRL config arguments the snapshot needs
(max_length, truncation, loss, template). BASE_MODEL is a Hugging Face model folder or id.
"""

import argparse
import json
from pathlib import Path

import torch
from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("pull", type=Path)
    ap.add_argument("base_model")
    ap.add_argument("out", type=Path)
    ap.add_argument("--max-steps", type=int, default=-1)
    a = ap.parse_args()
    dpo = (a.pull / "dpo_config.json").is_file()
    settings = json.loads((a.pull / ("dpo_config.json" if dpo else "sft_config.json")).read_text())
    train = load_dataset("json", data_files=str(a.pull / "train.jsonl"), split="train")
    tok = AutoTokenizer.from_pretrained(a.base_model)
    tok.chat_template = (a.pull / "chat_template.jinja").read_text()  # the snapshot's training template
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(a.base_model)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM")
    common = dict(output_dir=str(a.out), max_steps=a.max_steps, per_device_train_batch_size=1, report_to=[],
                  gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False},
                  save_strategy="no", logging_steps=1,
                  use_cpu=not torch.cuda.is_available(), bf16=torch.cuda.is_available())
    if dpo:
        from trl import DPOConfig, DPOTrainer

        trainer = DPOTrainer(model=model, args=DPOConfig(**common, **settings), train_dataset=train,
                             processing_class=tok, peft_config=lora)
    else:
        from trl import SFTConfig, SFTTrainer

        trainer = SFTTrainer(model=model, args=SFTConfig(**common, **settings), train_dataset=train,
                             processing_class=tok, peft_config=lora)
    result = trainer.train()
    trainer.save_model(str(a.out / "adapter"))
    (a.out / "train_result.json").write_text(json.dumps({"loss": result.training_loss, "steps": result.global_step}))


if __name__ == "__main__":
    main()
