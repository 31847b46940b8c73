"""Snapshots: immutable, verifiable folders of curated examples that trainers pull.

    NAME@VERSION/
      data/train.parquet  data/eval.parquet  data/test.parquet
      rejects.parquet           every record left out, with its codes
      specs/...                 the resolved specs and every file they reference
      stats.json                run statistics the report plots (accept rate, latency, review)
      README.md                 the dataset card, generated from the manifest
      manifest.json             written last: sha256 of every file, provenance, counts

A freeze writes into a hidden temporary folder, fsyncs every file, writes the manifest last and renames
the folder into place, so a freeze killed at any moment leaves only a `.tmp-*` folder that `ls` and
`pull` ignore. The snapshot id is a hash of the content (the files and the spec hashes), never of the
time: re-freezing identical inputs gives the same id. `verify` re-hashes everything and names the file
that changed; the manifest itself carries an integrity hash and must be byte-for-byte as written.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mashbill.curation.reports.run_stats import store_series
from mashbill.curation.snapshots.snapshot_card import dataset_card
from mashbill.curation.snapshots.snapshot_diff import diff, read_split_rows
from mashbill.curation.snapshots.snapshot_examples import Built, Example, build, sft_examples
from mashbill.curation.snapshots.snapshot_find import (incomplete_dirs, list_dirs, ls, read_manifest, remove_stale_tmp,
                                             resolve_snapshot, verify, version_key)
from mashbill.curation.snapshots.snapshot_format import (CARD, FORMAT, MANIFEST, MESSAGE, NAME_RE, REJECT_SCHEMA, SCHEMA,
                                               VERSION_RE, FreezeResult, IntegrityError, SnapshotError, check_name,
                                               integrity_of, manifest_bytes, snapshot_id_of)
from mashbill.curation.selection.split import SPLITS
from mashbill.curation.snapshots.snapshot_write import write_snapshot
from mashbill.curation.snapshots.tokens import known_tokens_profile
from mashbill.factory.store import Store
from mashbill.memory import fewer_collections
from mashbill.specs import ResolvedSpec, find_spec, load_spec

log = logging.getLogger(__name__)

__all__ = ["CARD", "FORMAT", "MANIFEST", "MESSAGE", "NAME_RE", "REJECT_SCHEMA", "SCHEMA", "SPLITS", "VERSION_RE",
           "Built", "Example", "FreezeResult", "IntegrityError", "SnapshotError", "build", "check_name",
           "dataset_card", "default_root", "diff", "freeze", "incomplete_dirs", "integrity_of",
           "list_dirs", "ls", "manifest_bytes", "read_manifest", "read_split_rows", "remove_stale_tmp",
           "resolve_snapshot", "sft_examples", "snapshot_id_of", "verify", "version_key"]


def default_root(store_path: Path) -> Path:
    return Path(store_path) / "snapshots"


def resolve_spec(spec: str | Path | ResolvedSpec) -> ResolvedSpec:
    if isinstance(spec, ResolvedSpec):
        return spec
    # a freeze looks the spec's records up by its hash and never reads its seed rows (a changed seed file changes
    # the hash, so it finds no records)
    return load_spec(find_spec(str(spec)), seed_rows=False)


@fewer_collections()  # the examples and the split's lists are hundreds of thousands of objects alive at once
def freeze(spec: str | Path | ResolvedSpec, *, store_path: str | Path, name: str, version: str | None,
           out_dir: str | Path | None = None, tokens: bool = True, reuse_identical: bool = False) -> FreezeResult:
    """Select, balance, split and write one snapshot; raises MashbillError (writing nothing) on bad input.

    `version=None` takes the next free integer version. With `reuse_identical`, a freeze whose content equals
    the latest existing version of `name` writes nothing and returns that snapshot (idempotent re-runs).
    """
    root = Path(out_dir) if out_dir is not None else default_root(Path(store_path))
    remove_stale_tmp(root)
    latest = None
    existing = [d for d in list_dirs(root) if d.name.split("@", 1)[0] == name]
    if existing:
        latest = max(existing, key=lambda d: version_key(d.name.split("@", 1)[1]))
    if version is None:
        ints = [int(d.name.split("@", 1)[1]) for d in existing if d.name.split("@", 1)[1].isdigit()]
        version = str(max(ints, default=0) + 1)
    version = str(version)
    check_name(name, version)
    rs = resolve_spec(spec)
    store_path = Path(store_path)
    final = root / f"{name}@{version}"
    if final.exists():
        raise SnapshotError(f"snapshot {name}@{version} already exists at {final}; snapshots are never modified: "
                            "freeze under a new version")
    with Store.open(store_path, read_only=True) as store:
        built = build(store, rs, known_tokens_profile(rs) if tokens else None)
        from mashbill.curation.preference.judging import judge_export

        built.judge = judge_export(store, rs, built.examples.column("record_id").to_pylist())
        reviewed = built.review["reviewed"] or built.review["require_review"]
        stats = store_series(store, built.spec_hashes, built.review if reviewed else None)
        teacher = teacher_facts(store, built.run_ids)
        # with the store open: the plain records' prompts are read from it as each split is written
        return write_snapshot(built, rs, stats, teacher, store_path, root, final, name, version, tokens,
                              store.prompts_of, latest if reuse_identical else None)


def teacher_facts(store: Store, run_ids: list[str]) -> list[dict]:
    if not run_ids:
        return []
    return [{"run_id": r["run_id"], "spec": f"{r['spec_name']}@{r['spec_version']}", "backend": r["backend"],
             "model": r["model"], "model_sha256": r["model_sha256"], "revision": r["model_info"].get("revision"),
             "sampling": r["sampling"]} for r in store.runs_info(run_ids)]

