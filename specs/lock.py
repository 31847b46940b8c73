"""specs.lock: name@version -> content hash. A changed hash under an unchanged version is an error."""

from __future__ import annotations

import json
from pathlib import Path

LOCK_NAME = "specs.lock"


def find_lock(start: Path) -> Path | None:
    for d in [start if start.is_dir() else start.parent, *start.parents]:
        if (d / LOCK_NAME).is_file():
            return d / LOCK_NAME
    return None


def read_lock(path: Path) -> dict[str, str]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def write_lock(path: Path, entries: dict[str, str]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(sorted(entries.items())), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
