"""The preflight's checks of a narrow or distilled classify student (no model load, one line per refusal):
student_width/student_ffn against the base's config.json (trainers/methods/narrow.py), distill_from against the
snapshot and its labels (trainers/methods/distill.py)."""

from __future__ import annotations

import json
from pathlib import Path

from mashbill.errors import MashbillError


def check_narrow(pf, base_dir: Path) -> Path | None:
    """Raise MashbillError (one line, naming the config) on the first refusal; return the resolved teacher run
    folder (or None). The preflight turns it into its own error."""
    cfg = pf.config
    for name in ("student_width", "student_ffn", "distill_from"):
        if getattr(cfg, name) is not None and cfg.method != "classify":
            raise MashbillError(f"config {cfg.name}: {name} applies to method classify, not {cfg.method}")
    try:
        if cfg.student_width is not None or cfg.student_ffn is not None:
            from mashbill.trainers.base_model import locate
            from mashbill.trainers.methods.narrow import check_width_config

            conf = locate(cfg.base_model, base_dir) / "config.json"
            if not conf.is_file():
                raise MashbillError(f"base model {conf.parent}: no config.json to read the widths from")
            check_width_config(cfg, json.loads(conf.read_text(encoding="utf-8")))
        if cfg.distill_from is None:
            return None
        from mashbill.curation.snapshots.pull import label_info
        from mashbill.trainers.methods.distill import check_teacher, teacher_path

        run = teacher_path(cfg.distill_from, base_dir)
        if cfg.format == "pairs":  # a reward model's labels are fixed (trainers/methods/reward_pairs.py)
            from mashbill.trainers.methods.reward_pairs import label_info as pair_labels

            labels = pair_labels()["id2label"]
        else:  # an older manifest without class names: the trainer compares with the pulled labels
            labels = label_info(pf.manifest)["id2label"] if (pf.manifest.get("classes") or {}).get("names") else None
        check_teacher(cfg, run, pf.manifest, labels)
        return run
    except MashbillError as exc:
        msg = str(exc)
        raise MashbillError(msg if msg.startswith("config ") else f"config {cfg.name}: {msg}") from None
