"""An earlier revision's code beside this checkout's: its source as an importable package (for byte-for-byte
comparisons of what two revisions write), and the comparison of two snapshot folders. Used by
tests/curation/snapshots/test_snapshot_columns.py and bench/freeze.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from mashbill.curation.snapshots.snapshot_format import CARD

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("specs", "factory", "validators", "curation", "trainers", "exporters")


def has_revision(rev: str) -> bool:
    """Is REV in this clone (a shallow clone may lack it)?"""
    return subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}^{{commit}}"],
                          capture_output=True).returncode == 0


def checkout(rev: str, dest: Path) -> Path:
    """REV's source as an importable `mashbill` package under dest (the layers mapped as pyproject maps them)."""
    src = dest / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    pkg = dest / "pkg"
    shutil.copytree(src / "mashbill", pkg / "mashbill")
    for layer in LAYERS:
        (pkg / "mashbill" / layer).symlink_to(src / layer)
    return pkg


# what undoes each store migration whose only change is added columns or dropped indexes, so that an earlier
# revision opens the store
UNDO = {9: ("ALTER TABLE validation_runs DROP COLUMN tokens_profile",
            "DROP INDEX record_validations_record",  # DuckDB drops no column of a table an index depends on
            "ALTER TABLE record_validations DROP COLUMN n_tokens",
            "CREATE INDEX record_validations_record ON record_validations (record_id)"),
        10: ("CREATE INDEX records_spec ON records (spec_hash)",
             "CREATE INDEX verdicts_record ON verdicts (record_id)",
             "CREATE INDEX teacher_calls_record ON teacher_calls (record_id)",
             "CREATE INDEX record_validations_record ON record_validations (record_id)",
             "CREATE INDEX review_decisions_record ON review_decisions (record_id)"),
        11: ("ALTER TABLE validation_runs DROP COLUMN near_groups_profile",
             "ALTER TABLE record_validations DROP COLUMN near_group"),
        12: ("DROP TABLE record_checks",),
        13: ("ALTER TABLE records DROP COLUMN sft_key",)}


def store_for_revision(store: Path, pkg: Path, dest: Path) -> Path:
    """A copy of a store folder at dest with the migrations the revision at pkg lacks undone (UNDO), so that it
    opens the store (a store of a newer schema it refuses)."""
    import duckdb

    from mashbill.factory.store import DB_NAME

    known = max(int(f.name.split("_", 1)[0]) for f in (pkg / "mashbill" / "factory" / "migrations").glob("*.sql"))
    shutil.copytree(store, dest)
    con = duckdb.connect(str(dest / DB_NAME))
    try:
        for version in sorted((v for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()
                               if v > known), reverse=True):
            for statement in UNDO[version]:  # a KeyError: a migration this helper cannot undo yet
                con.execute(statement)
            con.execute("DELETE FROM schema_migrations WHERE version = ?", [version])
    finally:
        con.close()
    return dest


def _card_without_store(folder: Path) -> str:
    store = json.loads((folder / "manifest.json").read_text())["store"]["path"]
    return (folder / CARD).read_text(encoding="utf-8").replace(store, "<store>")


def same_snapshot(a: Path, b: Path) -> list[str]:
    """What differs between two snapshot folders, beyond the manifest's frozen_at, integrity and store path (which
    the dataset card names too: a revision's freeze reads a copy of the store, `store_for_revision`)."""
    fa = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    if fa != fb:
        return [f"files: {sorted(set(fa) ^ set(fb))}"]
    bad = []
    for f in fa:
        if f == "manifest.json":
            ma, mb = json.loads((a / f).read_text()), json.loads((b / f).read_text())
            for k in sorted(set(ma) | set(mb)):
                if ma.get(k) != mb.get(k) and k not in ("frozen_at", "integrity", "store", "files"):
                    bad.append(f"manifest.{k}")
            if {k: v for k, v in ma["store"].items() if k != "path"} != {k: v for k, v in mb["store"].items()
                                                                          if k != "path"}:
                bad.append("manifest.store")
            if ({k: v for k, v in ma["files"].items() if k != CARD}
                    != {k: v for k, v in mb["files"].items() if k != CARD}):  # the card is compared below
                bad.append("manifest.files")
        elif f == CARD:
            if _card_without_store(a) != _card_without_store(b):
                bad.append(f)
        elif (a / f).read_bytes() != (b / f).read_bytes():
            bad.append(f)
    return bad
