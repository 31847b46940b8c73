"""The export manifest: spec hashes -> snapshot id -> training run -> artifacts, each with its sha256.

`export.json` is written last into an export folder (itself renamed into place when complete), so a folder
with a manifest is a finished export. `lineage_of` is the smaller record stamped into each artifact's own
metadata (an artifact cannot carry its own hash).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from mashbill import __version__
from mashbill.hashing import sha256_file
from mashbill.exporters.runs import ExportError, Run, Snapshot

FORMAT = "mashbill.export/1"
MANIFEST = "export.json"


def lineage_of(run: Run, snapshot: Snapshot) -> dict:
    """What each artifact carries in its metadata; the run's spec hashes must be the snapshot's."""
    snap = snapshot.summary
    run_specs = run.lineage["spec_hashes"]
    if run_specs and run_specs != snap["specs"]:
        raise ExportError(f"{run.path / 'lineage.json'}: field 'spec_hashes' {run_specs} differs from the "
                          f"snapshot's {snap['specs']}")
    r = run.summary()
    return {"schema": "mashbill.artifact-lineage/1", "spec_hashes": snap["specs"],
            "snapshot": {"ref": snap["ref"], "id": snap["snapshot_id"], "manifest_sha256": snap["manifest_sha256"]},
            "run": {"run_id": r["run_id"], "method": r["method"], "config_sha256": r["config_sha256"],
                    "lineage_sha256": r["lineage_sha256"]},
            "base_model": run.lineage["base_model"]}


def build(kind: str, run: Run, snapshot: Snapshot, folder: Path, artifacts: dict[str, Path], primary: str,
          reports: dict) -> dict:
    """Manifest for the artifacts (name -> path inside `folder`)."""
    arts = {name: {"path": p.relative_to(folder).as_posix(), "sha256": sha256_file(p), "bytes": p.stat().st_size}
            for name, p in sorted(artifacts.items())}
    return {"format": FORMAT, "kind": kind, "tool_version": __version__,
            "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "spec_hashes": snapshot.summary["specs"], "snapshot": snapshot.summary, "run": run.summary(),
            "artifacts": arts, "primary": primary, "reports": reports}


def write(folder: Path, manifest: dict) -> Path:
    path = folder / MANIFEST
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def find(artifact: Path) -> Path | None:
    """The export manifest of an export folder, or of the folder an artifact sits in."""
    artifact = Path(artifact)
    for folder in (artifact, artifact.parent):
        if (folder / MANIFEST).is_file():
            return folder / MANIFEST
    return None


def read(path: Path) -> dict:
    try:
        m = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExportError(f"{path}: not a readable export manifest ({exc})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise ExportError(f"{path}: field 'format': expected {FORMAT!r}")
    return m


def verify(folder: Path) -> dict:
    """Re-hash every artifact the manifest lists; raise naming the first file that changed or is missing."""
    m = read(folder / MANIFEST)
    for name, a in m["artifacts"].items():
        f = folder / a["path"]
        if not f.is_file():
            raise ExportError(f"{f}: missing (export {folder} lists it as {name})")
        if sha256_file(f) != a["sha256"]:
            raise ExportError(f"{f}: sha256 differs from {folder / MANIFEST} (the file changed after export)")
    return m


def primary_artifact(path: Path) -> Path:
    """An artifact file as given, or an export folder's primary artifact."""
    path = Path(path)
    if path.is_dir():
        if not (path / MANIFEST).is_file():
            raise ExportError(f"{path}: a folder without {MANIFEST}; give an .onnx/.gguf file or an export folder")
        m = read(path / MANIFEST)
        return path / m["artifacts"][m["primary"]]["path"]
    if not path.is_file():
        raise ExportError(f"{path}: no such artifact")
    return path


def verified_artifact(path: Path) -> tuple[Path, dict | None]:
    """The artifact to use for `path` (a file, or an export folder's primary artifact), checked first.

    Inside an export folder every file `export.json` lists is re-hashed (`verify`) and the artifact must be one of
    them; the error names the file that changed. Returns the artifact and the manifest (None for a file outside
    an export folder, which has nothing to be checked against). `predict`, `release check|tag` and `eval` call
    this before they load anything.
    """
    artifact = primary_artifact(path)
    found = find(artifact)
    if found is None:
        return artifact, None
    folder = found.parent
    m = verify(folder)
    listed = {(folder / a["path"]).resolve() for a in m["artifacts"].values()}
    if artifact.resolve() not in listed:
        raise ExportError(f"{artifact}: not an artifact of the export {folder} ({MANIFEST} does not list it)")
    return artifact, m
