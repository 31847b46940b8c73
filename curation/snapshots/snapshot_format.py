"""What a snapshot folder is: its format name, file names, row schemas, errors and the hashes that make
its manifest trustworthy (the content id, the manifest's integrity hash). Shared by every snapshot writer."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from mashbill.errors import MashbillError
from mashbill.hashing import canonical_json

FORMAT = "mashbill.snapshot/1"
MANIFEST = "manifest.json"
CARD = "README.md"
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,99}$")

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
SCHEMA = pa.schema([
    ("example_id", pa.string()), ("record_id", pa.string()), ("row_kind", pa.string()), ("spec", pa.string()),
    ("source", pa.string()), ("rule", pa.string()), ("query", pa.string()), ("lang", pa.string()),
    ("labels", pa.string()), ("cell", pa.string()), ("class_labels", pa.list_(pa.string())),
    ("prompt", pa.list_(MESSAGE)), ("completion", pa.string()), ("rejected", pa.string()),
    ("rejected_codes", pa.list_(pa.string())), ("turns", pa.list_(MESSAGE)), ("group", pa.string()),
    ("copy", pa.int32()), ("n_tokens", pa.int32()),
])
REJECT_SCHEMA = pa.schema([
    ("record_id", pa.string()), ("spec", pa.string()), ("stage", pa.string()), ("codes", pa.list_(pa.string())),
    ("detail", pa.string()), ("query", pa.string()), ("output", pa.string()),
])


class SnapshotError(MashbillError):
    """A snapshot cannot be written, found or trusted."""


class IntegrityError(SnapshotError):
    """A snapshot's files do not match its manifest; `files` names them."""

    def __init__(self, root: Path, problems: list[tuple[str, str]]):
        self.root = root
        self.files = [f for f, _ in problems]
        super().__init__(f"snapshot {root} was altered and must not be used: " +
                         "; ".join(f"{f}: {why}" for f, why in problems[:10]) +
                         (f"; and {len(problems) - 10} more" if len(problems) > 10 else ""))


def manifest_bytes(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def integrity_of(manifest: dict) -> str:
    body = {k: v for k, v in manifest.items() if k != "integrity"}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def snapshot_id_of(files: dict[str, str], specs: list[dict]) -> str:
    content = {"files": {k: v for k, v in files.items() if k != CARD},
               "specs": sorted([s["name"], s["version"], s["hash"]] for s in specs)}
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


@dataclass
class FreezeResult:
    path: Path
    manifest: dict

    @property
    def snapshot_id(self) -> str:
        return self.manifest["snapshot_id"]


def check_name(name: str, version: str) -> None:
    if not NAME_RE.match(name):
        raise SnapshotError(f"snapshot name {name!r}: expected lower-case letters, digits, '.', '_' or '-'")
    if not VERSION_RE.match(str(version)):
        raise SnapshotError(f"snapshot version {version!r}: expected letters, digits, '.', '_' or '-' (e.g. 1, 2024.06)")
