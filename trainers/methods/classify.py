"""`train classify`: an encoder classifier (all-MiniLM-L6-v2 by default) on a snapshot's classification pull,
or a plan-vs-correct reward model on a preference snapshot's pairs (`format: pairs`, trainers/methods/reward_pairs.py).

Complexity is single-label (4 classes from the schema); routing and plan categories are multi-label
(multi-hot float vectors, `problem_type="multi_label_classification"`); the id2label/label2id mapping comes
from the manifest, so a class that did not occur keeps its id. The eval metrics compare the model with the
majority class of the train split (single-label) or with predicting the most frequent label set.
"""

from __future__ import annotations

from collections import Counter

from mashbill.trainers.methods.common import common_args


def build(pf, placement, base, datasets, tokenizer, stage, work, *, max_steps: int, epochs: float):
    """(trainer, save) for a classifier run; `datasets` is the classification pull."""
    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding, Trainer, TrainingArguments

    cfg = pf.config
    info = datasets.label_info
    multi = info["problem_type"] == "multi_label_classification"
    model = AutoModelForSequenceClassification.from_pretrained(
        str(base.path), num_labels=len(info["id2label"]), id2label=info["id2label"], label2id=info["label2id"],
        problem_type=info["problem_type"], dtype=torch.float32)
    if cfg.student_layers is not None:
        keep_layers(model, cfg.student_layers, cfg.student_layer_pick)
    if cfg.student_width is not None or cfg.student_ffn is not None:
        from mashbill.trainers.methods.narrow import shrink_width

        model, _ = shrink_width(model, cfg.student_width, cfg.student_ffn)

    def tok(batch):
        if "text_pair" in batch:  # a reward model's (request, plan) pairs: a cross-encoder input
            return tokenizer(batch["text"], batch["text_pair"], truncation=True, max_length=cfg.max_length)
        return tokenizer(batch["text"], truncation=True, max_length=cfg.max_length)

    enc = {s: d.map(tok, batched=True, remove_columns=[c for c in ("text", "text_pair") if c in d.column_names])
           for s, d in datasets.items()}
    targs, make, extra = common_args(pf, placement, work, max_steps=max_steps, epochs=epochs), Trainer, {}
    teacher = getattr(pf, "teacher_path", None)
    if teacher is not None:  # distil_from: teacher logits ride along as a column (trainers/methods/distill.py)
        from mashbill.trainers.methods.distill import attach_teacher, distill_trainer_class

        enc = attach_teacher(teacher, datasets, enc, info, cfg.max_length)
        model.config.mashbill_distilled_from = {"run": str(teacher), "alpha": cfg.distill_alpha,
                                                "temperature": cfg.distill_temperature}
        targs["remove_unused_columns"] = False
        make, extra = distill_trainer_class(), {"alpha": cfg.distill_alpha, "temperature": cfg.distill_temperature,
                                                "multi_label": multi}
    trainer = make(model=model, args=TrainingArguments(**targs), train_dataset=enc["train"],
                   eval_dataset=enc["eval"] if enc["eval"].num_rows else None,
                   data_collator=DataCollatorWithPadding(tokenizer), processing_class=tokenizer, **extra)

    def evaluate() -> dict:
        """Accuracy on the eval split (exact match for multi-label) and the majority baseline's."""
        ev = enc["eval"] if enc["eval"].num_rows else enc["test"]
        if not ev.num_rows:
            return {}
        pred = trainer.predict(ev)
        logits = pred.predictions[0] if isinstance(pred.predictions, tuple) else pred.predictions
        key = "labels" if multi else "label"
        gold = np.array(ev[key])
        train_gold = datasets["train"][key]
        if multi:
            guess = (logits > 0).astype(np.float32)
            acc = float((guess == gold).all(axis=1).mean())
            common = Counter(tuple(x) for x in train_gold).most_common(1)[0][0]
            base_acc = float((gold == np.array(common)).all(axis=1).mean())
        else:
            acc = float((logits.argmax(axis=1) == gold).mean())
            common = Counter(train_gold).most_common(1)[0][0]
            base_acc = float((gold == common).mean())
        return {"eval_split": "eval" if enc["eval"].num_rows else "test", "eval_examples": int(len(gold)),
                "eval_accuracy": acc, "majority_accuracy": base_acc, "problem_type": info["problem_type"]}

    def save(folder):
        trainer.model.save_pretrained(folder / "model")
        tokenizer.save_pretrained(folder / "model")

    trainer.mashbill_evaluate = evaluate
    return trainer, save


def layer_indices(have: int, k: int, pick: str = "spread") -> list[int]:
    """Which of `have` encoder layers a k-layer student keeps. `spread`: evenly spaced, always ending on the
    last layer (its output is what the base model's pooling was trained on); `first`: layers 0..k-1."""
    if not 1 <= k <= have:
        raise ValueError(f"student_layers {k}: expected 1..{have}")
    if pick == "first":
        return list(range(k))
    return sorted(have - 1 - int(j * have / k + 0.5) for j in range(k))


def keep_layers(model, k: int, pick: str = "spread") -> list[int]:
    """Cut the encoder of a loaded HF sequence classifier down to k layers in place; the config records the
    count (so save/load and the ONNX export see a k-layer model) and which base layers were kept."""
    import torch

    layers = model.base_model.encoder.layer
    idx = layer_indices(len(layers), k, pick)
    model.base_model.encoder.layer = torch.nn.ModuleList(layers[i] for i in idx)
    model.config.num_hidden_layers = k
    model.config.mashbill_kept_layers = idx
    return idx


def base_layer_count(ref: str, base_dir=None) -> int:
    """The base model's encoder layer count from its config.json, without loading weights."""
    import json

    from mashbill.errors import MashbillError
    from mashbill.trainers.base_model import locate

    path = locate(ref, base_dir)
    conf = path / "config.json"
    if not conf.is_file():
        raise MashbillError(f"base model {path}: no config.json to read the layer count from")
    n = json.loads(conf.read_text(encoding="utf-8")).get("num_hidden_layers")
    if not isinstance(n, int):
        raise MashbillError(f"base model {path}: config.json has no num_hidden_layers")
    return n
