"""The run folder the exporters read, and its lineage (spec hashes -> snapshot id -> run id).

    <run>/config.yaml    the resolved training config
    <run>/lineage.json   schema mashbill.lineage/1 (below)
    <run>/model/         classify: a complete HF folder loadable by AutoModelForSequenceClassification
    <run>/adapter/       sft/dpo: a PEFT LoRA adapter; lineage.base_model.path is the base HF folder
    <run>/metrics.json   losses per step, eval metrics

The lineage's `files` maps every file under model/ and adapter/ (the trained weights, their config and
tokenizer) to its sha256, so that an export can refuse weights changed after training (`weight_hashes`).

The folder is assembled under a temporary name beside its destination and renamed into place when
complete; a run that dies leaves only `<run>.work/` (its checkpoints, for --resume) and no `<run>/`.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path

import yaml

LINEAGE_SCHEMA = "mashbill.lineage/1"


def default_out(config_name: str) -> Path:
    return Path("mashbill-runs") / config_name


def work_dir(out: Path) -> Path:
    """Checkpoints live here until the run completes (kept after a crash so --resume finds them)."""
    return out.with_name(out.name + ".work")


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "deepspeed"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


WEIGHT_DIRS = ("model", "adapter")


def weight_hashes(run: Path) -> dict[str, str]:
    """sha256 of every file under the run's model/ and adapter/ folders, keyed by its path in the run."""
    from mashbill.hashing import sha256_file

    run = Path(run)
    return {p.relative_to(run).as_posix(): sha256_file(p)
            for d in WEIGHT_DIRS if (run / d).is_dir() for p in sorted((run / d).rglob("*")) if p.is_file()}


def lineage(*, run_id: str, pf, base, stage: str, profile: dict) -> dict:
    m = pf.manifest
    snap = pf.snapshot_ref
    return {
        "schema": LINEAGE_SCHEMA, "run_id": run_id, "method": pf.config.method,
        "config_name": pf.config.name, "config_sha256": pf.config.sha256,
        "snapshot": {k: snap[k] for k in ("name", "version", "id", "manifest_sha256")} | {"path": snap["path"]},
        "spec_hashes": {f"{s['name']}@{s['version']}": s["hash"] for s in m.get("specs", [])},
        "base_model": {"ref": base.ref, "path": str(Path(base.path).resolve()), "sha256": base.sha256},
        "trainer_profile": profile, "stage": stage,
        "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "versions": versions(),
    }


def write_run(out: Path, *, config_dump: dict, lineage_doc: dict, metrics: dict, save_weights) -> Path:
    """Assemble the run folder under a temporary name, then rename it into `out` (replacing an older run)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".tmp-{out.name}-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    tmp.mkdir()
    try:
        save_weights(tmp)
        lineage_doc = {**lineage_doc, "files": weight_hashes(tmp)}
        (tmp / "config.yaml").write_text(yaml.safe_dump(config_dump, sort_keys=False, allow_unicode=True),
                                         encoding="utf-8")
        (tmp / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
        # lineage last: a folder with a lineage file is complete
        (tmp / "lineage.json").write_text(json.dumps(lineage_doc, indent=2) + "\n", encoding="utf-8")
        old = None
        if out.exists():
            old = out.with_name(f".old-{out.name}-{uuid.uuid4().hex[:6]}")
            os.rename(out, old)
        os.rename(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def read_lineage(run: Path) -> dict:
    return json.loads((Path(run) / "lineage.json").read_text(encoding="utf-8"))
