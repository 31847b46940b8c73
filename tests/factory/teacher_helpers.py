"""Helpers for the teacher tests (imported by name: `conftest` is ambiguous across test folders)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "specs"
SHARED = FIXTURES / "shared"
MASHBILL = str(Path(sys.executable).parent / "mashbill")

QUERY_TEMPLATES = [
    "What is {n}% of 2840?", "Write a haiku about rain number {n}.", "Review this Python loop {n}.",
    "Wie viel sind {n} Meilen in Kilometern?", "Summarise chapter {n} of a novel.", "Explain Docker volumes ({n}).",
]


def queries(n: int) -> list[dict]:
    """n distinct seed inputs; each query starts with a tag q000, q001, ... that schedules can key on."""
    return [{"query": f"q{i:03d} " + QUERY_TEMPLATES[i % len(QUERY_TEMPLATES)].format(n=i), "lang": "en"}
            for i in range(n)]


def tag(key: str) -> int | None:
    """The seed index in a teacher request's user message (None for preflight/probe requests)."""
    m = re.search(r"\bq(\d{3})\b", key)
    return int(m.group(1)) if m else None


def lock_spec(path: Path) -> Path:
    """Lock a test's spec in a specs.lock beside it (what `mashbill spec lock` does for a new version; a test
    that rewrites its spec re-locks it), so `generate` runs it without --allow-unlocked."""
    from mashbill.errors import SpecError
    from mashbill.specs import load_spec
    from mashbill.specs.lock import LOCK_NAME, read_lock, write_lock

    try:
        rs = load_spec(path)
    except SpecError:
        return path  # a test of a broken spec: generate reports that before any lock check
    lock = Path(path).parent / LOCK_NAME
    write_lock(lock, {**read_lock(lock), rs.ref: rs.hash})
    return path


def run_cli(*args, check: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run([MASHBILL, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"mashbill {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def sql(store: Path, query: str, params: list | None = None) -> list[tuple]:
    import duckdb

    con = duckdb.connect(str(Path(store) / "mashbill.duckdb"), read_only=True)
    try:
        return con.execute(query, params or []).fetchall()
    finally:
        con.close()


def records(store: Path) -> dict[str, tuple]:
    """record_id -> (status, output, raw) for every stored record."""
    return {r[0]: (r[1], r[2], r[3]) for r in
            sql(store, "SELECT record_id, status, CAST(output AS VARCHAR), raw FROM records")}


def loads(value):
    return None if value is None else json.loads(value)
