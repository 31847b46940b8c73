"""Distillation of a classify student from a trained teacher run (`distill_from: RUN_DIR` in a classify config).

loss = alpha * CE(student, gold) + (1 - alpha) * T^2 * KL(softmax(teacher / T) || softmax(student / T))
(Hinton et al.: the T^2 keeps the soft term's gradients on the scale of the hard one's as T changes). Multi-label
runs use the per-label binary form: BCE of the student against sigmoid(teacher / T), times T^2. The teacher's
logits on the train split are computed once, before training, and travel with the batches as a column, so the
teacher is never in memory while the student trains.

The preflight refuses a teacher that would teach something else, one line naming both values: a folder that is
not a finished run, a run of another method, another snapshot (by snapshot id), or other labels (id2label).
"""

from __future__ import annotations

import json
from pathlib import Path

from mashbill.errors import MashbillError

TEACHER_COLUMN = "teacher_logits"


class DistillTeacherError(MashbillError):
    """The distillation teacher run cannot teach this run (not `mashbill.errors.TeacherError`: an LLM teacher's)."""


def teacher_path(ref: str, base_dir: Path) -> Path:
    p = Path(ref)
    return (p if p.is_absolute() else Path(base_dir) / p).resolve()


def check_teacher(cfg, run: Path, manifest: dict, expected_labels: dict | None) -> None:
    """Refuse (DistillTeacherError, one line) a teacher run of another snapshot, method or label set."""
    if not (run / "lineage.json").is_file() or not (run / "model" / "config.json").is_file():
        raise DistillTeacherError(f"config {cfg.name}: distill_from {run}: not a finished classify run folder "
                           "(no lineage.json or model/config.json)")
    lin = json.loads((run / "lineage.json").read_text(encoding="utf-8"))
    if lin.get("method") != "classify":
        raise DistillTeacherError(f"config {cfg.name}: distill_from {run}: teacher method {lin.get('method')!r}, "
                           "this run classify")
    snap = lin.get("snapshot") or {}
    if snap.get("id") != manifest["snapshot_id"]:
        raise DistillTeacherError(f"config {cfg.name}: distill_from {run}: teacher snapshot {snap.get('name')}@"
                           f"{snap.get('version')} (id {snap.get('id')}), this run {manifest['name']}@"
                           f"{manifest['version']} (id {manifest['snapshot_id']})")
    if expected_labels is not None:
        require_labels(run, expected_labels, prefix=f"config {cfg.name}: ")


def require_labels(run: Path, id2label: dict, *, prefix: str = "") -> None:
    """Refuse a teacher run whose labels (in id order) are not this run's `id2label`."""
    got = teacher_labels(run)
    want = [id2label[i] for i in sorted(id2label)]
    if got != want:
        raise DistillTeacherError(f"{prefix}distill_from {run}: teacher labels {got}, this run {want}")


def teacher_labels(run: Path) -> list[str]:
    conf = json.loads((run / "model" / "config.json").read_text(encoding="utf-8"))
    id2 = conf.get("id2label") or {}
    return [id2[k] for k in sorted(id2, key=int)]


def teacher_logits(run: Path, texts, text_pairs=None, *, max_length: int, batch: int = 64):
    """(rows, labels) float32 logits of the teacher run's model, with its own tokenizer."""
    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(run / "model"))
    model = AutoModelForSequenceClassification.from_pretrained(str(run / "model"), dtype=torch.float32).eval()
    texts = list(texts)
    out = []
    with torch.inference_mode():
        for i in range(0, len(texts), batch):
            pair = list(text_pairs[i:i + batch]) if text_pairs is not None else None
            enc = tok(texts[i:i + batch], pair, padding=True, truncation=True, max_length=max_length,
                      return_tensors="pt")
            out.append(model(**enc).logits.float().numpy())
    return np.concatenate(out) if out else np.zeros((0, model.config.num_labels), dtype=np.float32)


def distill_loss(student, teacher, labels, *, alpha: float, temperature: float, multi_label: bool = False):
    """alpha * hard loss + (1 - alpha) * T^2 * soft loss (see the module docstring)."""
    import torch.nn.functional as F

    t = temperature
    if multi_label:
        hard = F.binary_cross_entropy_with_logits(student, labels.float())
        soft = F.binary_cross_entropy_with_logits(student / t, (teacher / t).sigmoid())
    else:
        hard = F.cross_entropy(student, labels)
        soft = F.kl_div(F.log_softmax(student / t, -1), F.log_softmax(teacher / t, -1), log_target=True,
                        reduction="batchmean")
    return alpha * hard + (1 - alpha) * t * t * soft


def distill_trainer_class():
    """A transformers Trainer whose loss is `distill_loss` when the batch carries teacher logits (train), and
    the model's own loss otherwise (eval, predict)."""
    from transformers import Trainer

    class DistillTrainer(Trainer):
        def __init__(self, *a, alpha: float, temperature: float, multi_label: bool, **kw):
            super().__init__(*a, **kw)
            self.distill = {"alpha": alpha, "temperature": temperature, "multi_label": multi_label}

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            teacher = inputs.pop(TEACHER_COLUMN, None)
            if teacher is None:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            labels = inputs["labels"]
            outputs = model(**inputs)
            loss = distill_loss(outputs.logits, teacher.to(outputs.logits.dtype), labels, **self.distill)
            return (loss, outputs) if return_outputs else loss

    return DistillTrainer


def attach_teacher(run: Path, datasets, enc: dict, label_info: dict, max_length: int) -> dict:
    """`enc` with the teacher's logits as a column of the train split (computed once per pulled dataset) and
    only the columns a batch needs in every split (the trainer then keeps the teacher column)."""
    require_labels(run, label_info["id2label"])  # again: an older manifest names no classes for the preflight
    cache = getattr(datasets, "_mashbill_teacher", None)
    if cache is None or cache[0] != str(run):
        train = datasets["train"]
        pairs = train["text_pair"] if "text_pair" in train.column_names else None
        cache = (str(run), teacher_logits(run, train["text"], pairs, max_length=max_length))
        datasets._mashbill_teacher = cache
    keep = {"input_ids", "attention_mask", "token_type_ids", "label", "labels"}
    out = {s: d.remove_columns([c for c in d.column_names if c not in keep]) for s, d in enc.items()}
    out["train"] = out["train"].add_column(TEACHER_COLUMN, [row.tolist() for row in cache[1]])
    return out
