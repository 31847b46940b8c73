"""A training run folder as the exporters read it, and the snapshot it was trained on.

The contract (trainers write it, exporters read it): `<run>/lineage.json` (schema `mashbill.lineage/1`),
`<run>/config.yaml`, and either `<run>/model/` (a complete HF sequence classifier) or `<run>/adapter/` (a PEFT
LoRA adapter over `lineage.base_model.path`). `lineage.files` holds the sha256 of every file under model/ and
adapter/ as the trainer wrote it; a file changed, added or removed since is refused by name. Every problem is one line naming the file and the field, before
any conversion starts, so nothing is half-written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mashbill.curation.snapshots.snapshot import SnapshotError, resolve_snapshot, verify
from mashbill.errors import MashbillError
from mashbill.hashing import sha256_file

LINEAGE_SCHEMA = "mashbill.lineage/1"
REQUIRED = ("run_id", "method", "config_sha256", "snapshot", "spec_hashes", "base_model")
METHODS = ("classify", "sft", "dpo")


class ExportError(MashbillError):
    """A run folder, snapshot, converter or artifact that an export cannot use."""


@dataclass(frozen=True)
class Run:
    path: Path
    lineage: dict

    @property
    def method(self) -> str:
        return self.lineage["method"]

    @property
    def model_dir(self) -> Path:
        return self.path / "model"

    @property
    def adapter_dir(self) -> Path:
        return self.path / "adapter"

    @property
    def base_model(self) -> Path:
        return Path(self.lineage["base_model"]["path"]).expanduser()

    @property
    def snapshot_ref(self) -> str:
        s = self.lineage["snapshot"]
        return f"{s['name']}@{s['version']}"

    def summary(self) -> dict:
        """What an artifact's metadata and the export manifest carry about the run."""
        lin = self.lineage
        return {"run_id": lin["run_id"], "method": lin["method"], "config_sha256": lin["config_sha256"],
                "path": str(self.path.resolve()), "lineage_sha256": sha256_file(self.path / "lineage.json"),
                "base_model": lin["base_model"], "stage": lin.get("stage"), "versions": lin.get("versions", {})}


def load_run(path: str | Path) -> Run:
    """Read and check a run folder; the error names the file and the field."""
    path = Path(path)
    if not path.is_dir():
        raise ExportError(f"{path}: not a run folder (no such directory)")
    lin_path = path / "lineage.json"
    if not lin_path.is_file():
        raise ExportError(f"{lin_path}: missing; a run folder needs the lineage its trainer writes "
                          "(spec hashes, snapshot, base model)")
    try:
        lineage = json.loads(lin_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExportError(f"{lin_path}: not valid JSON ({exc})") from None
    if not isinstance(lineage, dict):
        raise ExportError(f"{lin_path}: expected a JSON object")
    if lineage.get("schema") != LINEAGE_SCHEMA:
        raise ExportError(f"{lin_path}: field 'schema': expected {LINEAGE_SCHEMA!r}, found {lineage.get('schema')!r}")
    for key in REQUIRED:
        if key not in lineage:
            raise ExportError(f"{lin_path}: field '{key}' is missing")
    if lineage["method"] not in METHODS:
        raise ExportError(f"{lin_path}: field 'method': expected one of {', '.join(METHODS)}, "
                          f"found {lineage['method']!r}")
    snap = lineage["snapshot"]
    if not isinstance(snap, dict) or not all(k in snap for k in ("name", "version", "id")):
        raise ExportError(f"{lin_path}: field 'snapshot' needs name, version and id")
    if not isinstance(lineage["base_model"], dict) or "path" not in lineage["base_model"]:
        raise ExportError(f"{lin_path}: field 'base_model' needs a path")
    run = Run(path, lineage)
    if run.method == "classify":
        if not (run.model_dir / "config.json").is_file():
            raise ExportError(f"{run.model_dir / 'config.json'}: missing; a classify run keeps its model in model/")
    else:
        if not (run.adapter_dir / "adapter_config.json").is_file():
            raise ExportError(f"{run.adapter_dir / 'adapter_config.json'}: missing; an {run.method} run keeps its "
                              "LoRA adapter in adapter/")
        if not (run.base_model / "config.json").is_file():
            raise ExportError(f"{lin_path}: field 'base_model.path': the base model {run.base_model} is missing "
                              "(no config.json there); the adapter cannot be merged without it")
    check_weights(run)
    return run


def check_weights(run: Run) -> None:
    """Re-hash model/ and adapter/ against the lineage's `files`; raise naming the first file that differs."""
    from mashbill.trainers.runfolder import weight_hashes

    lin_path = run.path / "lineage.json"
    recorded = run.lineage.get("files")
    if not isinstance(recorded, dict) or not recorded:
        raise ExportError(f"{lin_path}: field 'files' is missing; the lineage must hold the sha256 of every trained "
                          "file (retrain with this version of mashbill)")
    found = weight_hashes(run.path)
    for rel in sorted(set(recorded) | set(found)):
        if rel not in found:
            raise ExportError(f"{run.path / rel}: missing (lineage.json field 'files' lists it)")
        if rel not in recorded:
            raise ExportError(f"{run.path / rel}: not in lineage.json field 'files' (added after training)")
        if found[rel] != recorded[rel]:
            raise ExportError(f"{run.path / rel}: sha256 {found[rel]} differs from lineage.json field 'files' "
                              f"{recorded[rel]} (the file changed after training)")


@dataclass(frozen=True)
class Snapshot:
    path: Path
    manifest: dict

    @property
    def summary(self) -> dict:
        m = self.manifest
        return {"ref": m["ref"], "snapshot_id": m["snapshot_id"], "path": str(self.path.resolve()),
                "manifest_sha256": sha256_file(self.path / "manifest.json"),
                "specs": {f"{s['name']}@{s['version']}": s["hash"] for s in m["specs"]}}

    def rows(self, split: str = "eval") -> list[dict]:
        import pyarrow.parquet as pq

        return pq.read_table(self.path / "data" / f"{split}.parquet").to_pylist()

    def spec_path(self) -> Path:
        main = [s for s in self.manifest["specs"] if s.get("role") == "snapshot"] or self.manifest["specs"]
        return self.path / main[0]["path"]


def snapshot_for(run: Run, snapshot: str | Path | None = None, *, store: str | Path | None = None) -> Snapshot:
    """The run's snapshot, verified (every file re-hashed), and checked to be the one the lineage names."""
    root = Path(store) / "snapshots" if store is not None else None
    recorded = run.lineage["snapshot"].get("path")  # the trainers record where the snapshot was
    ref = snapshot or (recorded if root is None and recorded and Path(recorded).is_dir() else run.snapshot_ref)
    try:
        path = resolve_snapshot(ref, root)
        manifest = verify(path)
    except SnapshotError as exc:
        raise ExportError(f"snapshot of run {run.path}: {exc}") from None
    want = run.lineage["snapshot"]["id"]
    if manifest["snapshot_id"] != want:
        raise ExportError(f"{run.path / 'lineage.json'}: field 'snapshot.id': the run was trained on {want[:12]}, "
                          f"but {path} is {manifest['snapshot_id'][:12]}")
    return Snapshot(path, manifest)
