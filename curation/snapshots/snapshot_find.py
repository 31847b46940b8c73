"""Finding, listing and verifying snapshot folders: a snapshot is trusted only when every file matches
its manifest and the manifest is byte-for-byte as written."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from mashbill.curation.snapshots.snapshot_format import (FORMAT, MANIFEST, IntegrityError, SnapshotError, integrity_of,
                                               manifest_bytes, snapshot_id_of)
from mashbill.hashing import sha256_file

def resolve_snapshot(ref: str | Path, root: str | Path | None = None) -> Path:
    """A snapshot folder from a path, or NAME@VERSION (or NAME: the highest version) under root."""
    p = Path(ref)
    if p.is_dir() and (p / MANIFEST).is_file() and not p.name.startswith("."):
        return p
    if root is None:
        raise SnapshotError(f"no snapshot at {ref} (give a snapshot folder, or NAME@VERSION with --store/--dir)")
    root = Path(root)
    name, _, version = str(ref).partition("@")
    if version:
        cand = root / f"{name}@{version}"
        if cand.is_dir() and (cand / MANIFEST).is_file():
            return cand
        if cand.is_dir():
            raise SnapshotError(f"{cand} has no {MANIFEST}: it was deleted, or the folder is an interrupted freeze; "
                                "the snapshot cannot be trusted")
    else:
        found = [d for d in list_dirs(root) if d.name.split("@")[0] == name]
        if found:
            return max(found, key=lambda d: version_key(d.name.split("@", 1)[1]))
    have = ", ".join(d.name for d in list_dirs(root)) or "none"
    raise SnapshotError(f"no snapshot {ref} under {root} (snapshots there: {have})")


def version_key(v: str):
    return tuple((0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"[.]", v))


def list_dirs(root: Path) -> list[Path]:
    """Complete snapshot folders (a manifest present, not a temporary folder)."""
    if not Path(root).is_dir():
        return []
    return sorted(d for d in Path(root).iterdir()
                  if d.is_dir() and not d.name.startswith(".") and "@" in d.name and (d / MANIFEST).is_file())


def incomplete_dirs(root: Path) -> list[Path]:
    if not Path(root).is_dir():
        return []
    return sorted(d for d in Path(root).iterdir() if d.is_dir() and (d.name.startswith(".tmp-") or
                                                                     not (d / MANIFEST).is_file()))


def remove_stale_tmp(root: Path) -> None:
    """Remove `.tmp-*` folders of freezes whose process is gone (killed); a live freeze's folder stays."""
    for d in incomplete_dirs(root):
        m = re.fullmatch(r"\.tmp-.+-(\d+)-[0-9a-f]{8}", d.name)
        if m and not pid_alive(int(m.group(1))):
            shutil.rmtree(d, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_manifest(path: Path) -> dict:
    mpath = path / MANIFEST
    if not mpath.is_file():
        raise SnapshotError(f"{path} is not a snapshot (no {MANIFEST}): an interrupted freeze or another folder")
    raw = mpath.read_bytes()
    try:
        manifest = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IntegrityError(path, [(MANIFEST, f"not valid JSON ({exc})")]) from None
    if not isinstance(manifest, dict):
        raise IntegrityError(path, [(MANIFEST, "not a JSON object")])
    return manifest


def verify(path: str | Path) -> dict:
    """Re-hash every file; raise IntegrityError naming each file that differs, is missing or was added."""
    path = Path(path)
    manifest = read_manifest(path)
    problems: list[tuple[str, str]] = []
    raw = (path / MANIFEST).read_bytes()
    if manifest.get("format") != FORMAT:
        problems.append((MANIFEST, f"format {manifest.get('format')!r}, expected {FORMAT}"))
    if manifest_bytes(manifest) != raw:
        problems.append((MANIFEST, "not byte-for-byte as written (edited)"))
    if manifest.get("integrity") != integrity_of(manifest):
        problems.append((MANIFEST, "content does not match its integrity hash (edited)"))
    if "@" in path.name and manifest.get("ref") != path.name:
        problems.append((MANIFEST, f"holds snapshot {manifest.get('ref')}, but the folder is named {path.name} "
                                   "(renamed)"))
    files = manifest.get("files") or {}
    if not isinstance(files, dict) or not files:
        problems.append((MANIFEST, "lists no files"))
        files = {}
    elif manifest.get("snapshot_id") != snapshot_id_of(files, manifest.get("specs") or []):
        problems.append((MANIFEST, "snapshot_id does not match the listed files"))
    for rel, digest in sorted(files.items()):
        f = path / rel
        if not f.is_file():
            problems.append((rel, "missing"))
        elif (actual := sha256_file(f)) != digest:
            problems.append((rel, f"sha256 differs from the manifest ({actual[:12]}, manifest {digest[:12]})"))
    on_disk = {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()} - {MANIFEST}
    for extra in sorted(on_disk - set(files)):
        problems.append((extra, "not listed in the manifest (added)"))
    if problems:
        raise IntegrityError(path, problems)
    return manifest


def ls(root: str | Path) -> list[dict]:
    out = []
    for d in list_dirs(Path(root)):
        try:
            m = read_manifest(d)
            out.append({"ref": m.get("ref", d.name), "path": str(d), "snapshot_id": m.get("snapshot_id"),
                        "kind": m.get("kind"), "counts": (m.get("splits") or {}).get("counts"),
                        "frozen_at": m.get("frozen_at"), "specs": [f"{s['name']}@{s['version']}" for s in
                                                                   m.get("specs", [])]})
        except SnapshotError as exc:
            out.append({"ref": d.name, "path": str(d), "error": str(exc)})
    return out
