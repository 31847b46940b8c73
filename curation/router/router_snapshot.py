"""Writing router snapshots (outcomes, transitions, triplets) in the same verifiable folder format.

They share everything that makes a snapshot trustworthy with `curation.snapshots.snapshot` (format string,
sha256 per file, content-derived id, manifest written last, temp folder renamed into place), so
`mashbill snapshot verify/ls` and `pull` work on them unchanged. What differs is the data files: each
router dataset writes its own tables. Splits are group-aware by query id: all rows of a query (every
model's outcome, every transition of a request, every triplet of the query) land on one side, and
near-duplicate query texts are tied together with the validators' MinHash clusters.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from mashbill import __version__
from mashbill.curation.selection.groups import near_duplicate_pairs
from mashbill.curation.selection.split import SPLITS, assign_splits
from mashbill.curation.snapshots.snapshot import FORMAT, FreezeResult, SnapshotError, check_name, manifest_bytes
from mashbill.curation.snapshots.snapshot_write import publish, seal
from mashbill.specs.router import ResolvedRecipe
from mashbill.validators.data.leakage import across_splits

ROUTER_KINDS = ("outcomes", "transitions", "triplets")
REJECT_SCHEMA = pa.schema([("where", pa.string()), ("code", pa.string()), ("detail", pa.string())])


def split_queries(qids: Sequence[str], texts: Sequence[str], cells: Sequence[str], rr: ResolvedRecipe) -> tuple[dict, dict]:
    """query id -> split, and the split's stats (groups, leakage). A query id is on exactly one side."""
    cfg = rr.recipe.splits
    links = near_duplicate_pairs(list(qids), list(texts), cfg.near_duplicate_threshold) if cfg.near_duplicates else []
    res = assign_splits(list(qids), list(cells), links, cfg.shares.model_dump())
    leak = across_splits(res.assignment, dict(zip(qids, texts)), res.groups)
    return res.assignment, {"ratios": cfg.shares.model_dump(), "groups": res.stats, "leakage": leak,
                            "near_duplicate_links": len(links)}


def write_table(table: pa.Table, path: Path, *, plain: bool = False) -> None:
    """zstd Parquet; `plain` (embeddings): no compression, no dictionary, so bytes on disk ~ rows x dims x 4."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if plain:
        pq.write_table(table, path, compression="none", use_dictionary=False, write_statistics=False)
    else:
        pq.write_table(table, path, compression="zstd", write_statistics=False)


def _recipe_entries(rr: ResolvedRecipe, tmp: Path) -> list[dict]:
    (tmp / "specs").mkdir()
    rel = f"specs/{rr.path.name}"
    shutil.copyfile(rr.path, tmp / rel)
    files = {}
    for role, p in rr.file_paths.items():
        target = f"specs/{role}-{p.name}"
        shutil.copyfile(p, tmp / target)
        files[role] = target
    return [{"name": rr.recipe.name, "version": rr.recipe.version, "hash": rr.hash, "kind": rr.recipe.dataset,
             "role": "recipe", "path": rel, "files": files}]


def write_router_snapshot(rr: ResolvedRecipe, *, root: Path, name: str, version: str, tables: dict[str, pa.Table],
                          plain: Sequence[str] = (), documents: dict[str, Any] | None = None, rejects: Sequence[dict] = (), extra: dict[str, Any],
                          split_counts: dict[str, int], card: str, extra_specs: Sequence[dict] = ()) -> FreezeResult:
    """Write `tables` (relative path -> table) plus rejects, recipe, card and manifest; atomically."""
    check_name(name, version)
    final = root / f"{name}@{version}"
    if final.exists():
        raise SnapshotError(f"snapshot {name}@{version} already exists at {final}; snapshots are never modified: "
                            "freeze under a new version")
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{name}@{version}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        for rel, table in tables.items():
            write_table(table, tmp / rel, plain=rel in plain)
        for rel, doc in (documents or {}).items():
            (tmp / rel).write_bytes(manifest_bytes(doc))
        reject_rows = sorted(rejects, key=lambda r: (r["code"], r["where"]))
        write_table(pa.Table.from_pylist([{k: r.get(k) for k in ("where", "code", "detail")} for r in reject_rows],
                                         schema=REJECT_SCHEMA), tmp / "rejects.parquet")
        spec_entries = _recipe_entries(rr, tmp) + list(extra_specs)
        manifest: dict[str, Any] = {
            "format": FORMAT, "name": name, "version": version, "ref": f"{name}@{version}",
            "kind": rr.recipe.dataset, "description": rr.recipe.description,
            "frozen_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "tool_version": __version__,
            "specs": spec_entries,
            "rejects": {"total": len(reject_rows), "by_code": dict(sorted(Counter(r["code"] for r in reject_rows).items()))},
            **extra,
        }
        manifest.setdefault("splits", {})["counts"] = {s: split_counts.get(s, 0) for s in SPLITS}
        seal(tmp, manifest, spec_entries, lambda m: card.replace("{snapshot_id}", m["snapshot_id"]))
        publish(tmp, final, manifest, f"{name}@{version}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return FreezeResult(final, manifest)


def card_text(title: str, kind: str, ref: str, store: str, body: list[str], fmt: str) -> str:
    """A short dataset card: how to load it, then the dataset's own lines."""
    return "\n".join([
        "---", f"pretty_name: {ref}", "---", "", f"# {ref}", "",
        f"A Mashbill {title} snapshot (kind `{kind}`). Snapshot id `{{snapshot_id}}`.", "", "## Load it", "",
        "```python", "from mashbill.curation.snapshots.pull import load_snapshot",
        f"ds = load_snapshot(\"{ref}\", format=\"{fmt}\", store=\"{store}\")", "```", "", *body, "",
        "`manifest.json` holds the sha256 of every file; `mashbill snapshot verify` re-checks them. Rows left out "
        "are in `rejects.parquet` with their file:row and code.", ""])
