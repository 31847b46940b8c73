"""specs.lock: name@version -> content hash. A changed hash under an unchanged version is an error."""

from __future__ import annotations

import json
from pathlib import Path

from mashbill.files import write_file_atomic

LOCK_NAME = "specs.lock"


def find_lock(start: Path) -> Path | None:
    for d in [start if start.is_dir() else start.parent, *start.parents]:
        if (d / LOCK_NAME).is_file():
            return d / LOCK_NAME
    return None


def lock_problem(rs) -> str | None:
    """Why a resolved spec does not match specs.lock (None when it does); `spec check` and `generate` share it."""
    lock_path = find_lock(rs.path)
    if lock_path is None:
        return f"no specs.lock in its folder or above; run `mashbill spec lock {rs.path}`"
    locked = read_lock(lock_path)
    if rs.ref not in locked:
        return f"not in {lock_path}; run `mashbill spec lock {rs.path}`"
    if locked[rs.ref] != rs.hash:
        return (f"content changed (hash {rs.hash[:12]}, locked {locked[rs.ref][:12]}) but version "
                f"{rs.spec.version} did not; bump `version` and run `mashbill spec lock`")
    return None


def read_lock(path: Path) -> dict[str, str]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def write_lock(path: Path, entries: dict[str, str]) -> None:
    write_file_atomic(path, (json.dumps(dict(sorted(entries.items())), indent=2) + "\n").encode("utf-8"))
