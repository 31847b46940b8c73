"""Write a snapshot atomically: rows to Parquet in a hidden temporary folder, the specs copied beside them,
every file fsynced, the manifest written last, then one rename into place (see curation.snapshots.snapshot)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mashbill import __version__
from mashbill.curation.selection.balance import BALANCE_CUT
from mashbill.curation.selection.select import Excluded
from mashbill.curation.snapshots.snapshot_card import dataset_card
from mashbill.curation.snapshots.snapshot_examples import Built
from mashbill.curation.snapshots.snapshot_find import verify
from mashbill.curation.snapshots.snapshot_format import (CARD, FORMAT, MANIFEST, MESSAGE, REJECT_SCHEMA, SCHEMA,
                                                         FreezeResult, SnapshotError, integrity_of, manifest_bytes,
                                                         snapshot_id_of)
from mashbill.curation.selection.split import SPLITS
from mashbill.curation.snapshots.snapshot_split import split_and_balance
from mashbill.factory.stats import percentiles
from mashbill.files import fsync_dir, fsync_tree
from mashbill.hashing import sha256_file
from mashbill.memory import trim_freed_memory
from mashbill.specs import ResolvedSpec

def copy_specs(specs: list[tuple[str, ResolvedSpec]], dest: Path) -> list[dict]:
    """Copy each spec and every file it references under specs/, keeping their relative layout."""
    paths = sorted({p for _, s in specs for p in [s.path, *s.file_paths.values()]})
    common = Path(os.path.commonpath([str(p.parent) for p in paths]))
    for p in paths:
        target = dest / "specs" / p.relative_to(common)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, target)
    out = []
    for role, s in specs:
        out.append({"role": role, "name": s.spec.name, "version": s.spec.version, "kind": s.spec.kind, "hash": s.hash,
                    "path": (Path("specs") / s.path.relative_to(common)).as_posix(),
                    "files": {r: (Path("specs") / p.relative_to(common)).as_posix() for r, p in
                              sorted(s.file_paths.items())}})
    return out




def seal(tmp: Path, manifest: dict, spec_entries: list[dict], card) -> None:
    """Hash every file of the folder, name the snapshot by that content, write its card (`card(manifest)`, once the
    id is known) and record the file list and the manifest's integrity."""
    files = {p.relative_to(tmp).as_posix(): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
    manifest["snapshot_id"] = snapshot_id_of(files, spec_entries)
    (tmp / CARD).write_text(card(manifest), encoding="utf-8")
    files[CARD] = sha256_file(tmp / CARD)
    manifest["files"] = dict(sorted(files.items()))
    manifest["integrity"] = integrity_of(manifest)


def publish(tmp: Path, final: Path, manifest: dict, ref: str) -> None:
    """Make the sealed folder durable, write its manifest last (a folder without it is not a snapshot) and rename it
    into place; a snapshot already at `final` is never replaced."""
    fsync_tree(tmp)
    with open(tmp / MANIFEST, "wb") as f:
        f.write(manifest_bytes(manifest))
        f.flush()
        os.fsync(f.fileno())
    if final.exists():
        raise SnapshotError(f"snapshot {ref} appeared at {final} while freezing; nothing was replaced")
    try:
        os.rename(tmp, final)
    except OSError as exc:  # another freeze of the same name@version won the race
        raise SnapshotError(f"snapshot {ref} appeared at {final} while freezing ({exc.strerror}); "
                            "nothing was replaced") from None


def prompts_at(t: pa.Table, rows, prompts_of) -> pa.ChunkedArray:
    """The prompts of the examples table's `rows` (positions, in that order): the table's own, and those of plain
    records read from the store (`prompts_of`, Store.prompts_of) in the same order, so they are copied once, not taken
    out of a column of every prompt (issue 29)."""
    import numpy as np

    rows = np.asarray(rows, dtype=np.int64)
    at = pa.array(rows, pa.int64())
    in_store = t.column("prompt_in_store").take(at).to_numpy(zero_copy_only=False)
    if not in_store.any():
        return t.column("prompt").take(at)
    stored = prompts_of(t.column("record_id").take(pa.array(rows[in_store], pa.int64()))).cast(pa.list_(MESSAGE))
    if in_store.all():
        return stored
    # some of both (reviewed or corrected records beside plain ones): the two parts, then each row from its part
    own = t.column("prompt").take(pa.array(rows[~in_store], pa.int64()))
    both = pa.concat_arrays([*stored.chunks, *own.chunks])
    k = len(stored)
    where = np.empty(len(rows), dtype=np.int64)
    where[in_store] = np.arange(k)
    where[~in_store] = k + np.arange(len(rows) - k)
    return pa.chunked_array([both.take(pa.array(where, pa.int64()))])


def split_tables(t: pa.Table, sp, n_tokens: list | None, prompts_of):
    """Each split's rows of the snapshot schema, one split at a time (split, table): its examples and their
    oversampled copies, sorted by (cell, row kind, key, copy). The order is found on those columns alone and the
    wide ones are taken once (the prompts read from the store into that order: `prompts_at`), so a split's rows are
    in memory once, not three times (issue 29)."""
    import numpy as np

    keys, copies = sp.keys, sp.copies
    rows = np.array(sp.rows, dtype=np.int64)  # sp.res's columns are aligned with these
    side = sp.res.side_index
    n_copies = (np.array([1 + copies.get(keys[i], 0) for i in sp.rows], dtype=np.int64) if copies
                else np.ones(len(rows), dtype=np.int64))
    tokens = pa.array(n_tokens, pa.int32()) if n_tokens is not None else pa.nulls(t.num_rows, pa.int32())
    narrow = t.select(["cell", "row_kind", "key"])
    wide = [f.name for f in SCHEMA if f.name in t.schema.names and f.name not in ("n_tokens", "prompt")]
    wide += ["key"] if "key" not in wide else []
    for j, split in enumerate(SPLITS):
        pos = np.nonzero(side == j)[0]
        counts = n_copies[pos]
        pos = np.repeat(pos, counts)  # positions in sp.rows, a row once per copy
        copy = np.arange(len(pos), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        order = narrow.take(pa.array(rows[pos], pa.int64())).append_column("copy", pa.array(copy, pa.int64()))
        # stable: rows of one key and copy (two records with the same messages and output) keep the examples' order
        order = pc.sort_indices(order, [("cell", "ascending"), ("row_kind", "ascending"), ("key", "ascending"),
                                        ("copy", "ascending")]).to_numpy()
        pos, copy = pos[order], copy[order]
        take = pa.array(rows[pos], pa.int64())
        sub = t.select(wide).take(take)  # only the columns written
        cols = {name: sub.column(name) for name in wide}
        cols["prompt"] = prompts_at(t, rows[pos], prompts_of)
        cols["example_id"] = sub.column("key")
        cols["group"] = sp.res.names.take(pa.array(sp.res.root_index[pos], pa.int64()))
        cols["copy"] = pa.array(copy.astype(np.int32), pa.int32())
        cols["n_tokens"] = tokens.take(take)
        # the prompts come in the store's batches; the Parquet writer writes the same bytes for chunked columns
        yield split, pa.table({f.name: cols[f.name] for f in SCHEMA}, schema=SCHEMA)
        del sub, cols


class Conversations:
    """Each row's conversation as a trainer renders it (its turns, else its prompt and the completion), made Python
    objects only for the slice asked for: every prompt of a million-record snapshot as Python objects at once was
    gigabytes (issue 29)."""

    def __init__(self, t: pa.Table, rows: list[int], prompts_of):
        at = pa.array(rows, pa.int64())
        self.turns, self.completions = t.column("turns").take(at), t.column("completion").take(at)
        self.prompts = prompts_at(t, rows, prompts_of)

    def __len__(self) -> int:
        return len(self.completions)

    def __getitem__(self, part: slice) -> list[list[dict]]:
        start, stop, _ = part.indices(len(self))
        turns, prompts, completions = (c.slice(start, max(0, stop - start)).to_pylist()
                                       for c in (self.turns, self.prompts, self.completions))
        return [turn or [*prompt, {"role": "assistant", "content": completion}]
                for turn, prompt, completion in zip(turns, prompts, completions)]


def write_snapshot(built: Built, rs: ResolvedSpec, stats: dict, teacher: list[dict], store_path: Path, root: Path,
           final: Path, name: str, version: str, tokens: bool, prompts_of, reuse: Path | None = None) -> FreezeResult:
    """`prompts_of`: the open store's `Store.prompts_of`, for the prompts the examples table left in the store."""
    sp = split_and_balance(built, rs)
    trim_freed_memory()  # the grouping's small objects, before the Arrow pool takes the splits' columns
    t = built.examples
    profile = rs.spec.trainer_profile
    n_tokens: list | None = None
    if tokens:
        from mashbill.curation.snapshots.tokens import token_lengths

        # the counts validation kept under this tokenizer and template; only the rest are rendered and counted
        known = t.column("n_tokens").take(pa.array(sp.rows, pa.int64())).to_pylist() if sp.rows else []
        todo = [i for i, n in enumerate(known) if n is None]
        counted = (token_lengths(profile, rs.home, Conversations(t, [sp.rows[i] for i in todo], prompts_of))
                   if todo else [])
        lengths = None
        if counted is not None:
            lengths = known
            for i, n in zip(todo, counted):
                lengths[i] = n
        if lengths is not None:
            last = {sp.keys[i]: n for i, n in zip(sp.rows, lengths)}  # rows sharing a key share one count
            n_tokens = [last.get(k) for k in sp.keys]
    cut_cols = {c: t.column(c).take(pa.array(sp.cut, pa.int64())).to_pylist()
                for c in ("record_id", "spec", "cell", "query", "completion")}
    excluded = list(built.excluded) + [
        Excluded(cut_cols["record_id"][i], cut_cols["spec"][i], "balance", (BALANCE_CUT,),
                 f"cell {cut_cols['cell'][i]} over its quota", cut_cols["query"][i], cut_cols["completion"][i])
        for i in range(len(sp.cut))]
    reject_rows = sorted(({"record_id": x.record_id, "spec": x.spec, "stage": x.stage, "codes": list(x.codes),
                           "detail": x.detail, "query": x.query, "output": x.output} for x in excluded),
                         key=lambda r: (r["stage"], r["record_id"], r["spec"], r["codes"]))
    balance = sp.balance
    copies = sp.copies
    res = sp.res
    leak = sp.leak

    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{name}@{version}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        (tmp / "data").mkdir()
        counts, cells, row_kinds = {}, {}, {}
        for s, table in split_tables(t, sp, n_tokens, prompts_of):  # one split in memory at a time
            write_parquet(table, tmp / "data" / f"{s}.parquet")
            counts[s] = table.num_rows
            cells[s] = dict(sorted(Counter(table.column("cell").to_pylist()).items()))
            row_kinds[s] = dict(sorted(Counter(table.column("row_kind").to_pylist()).items()))
            del table
        write_parquet(table_of(reject_rows, REJECT_SCHEMA), tmp / "rejects.parquet")
        if built.judge:
            write_parquet(pa.Table.from_pylist(built.judge["rows"]), tmp / "judge.parquet")
        spec_entries = copy_specs(built.specs, tmp)
        (tmp / "stats.json").write_bytes(manifest_bytes(stats))
        from mashbill.curation.snapshots.tokens import training_facts

        trainer_profile, train_tmpl = training_facts(profile, rs.home)
        if train_tmpl:  # what a trainer renders with, so nothing has to be wired in by hand
            (tmp / trainer_profile["training_template"]).write_text(train_tmpl, encoding="utf-8")

        lens = sorted(n for n in (last.values() if n_tokens is not None else ()) if n is not None)  # one per key
        manifest: dict[str, Any] = {
            "format": FORMAT, "name": name, "version": version, "ref": f"{name}@{version}",
            "kind": rs.spec.kind, "description": rs.spec.description,
            "frozen_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tool_version": __version__,
            "specs": spec_entries,
            "teacher": teacher,
            "trainer_profile": trainer_profile,
            "classes": classes_of(rs),
            "store": {"path": str(Path(store_path).resolve()), "run_ids": built.run_ids,
                      "validation_ids": built.validation_ids},
            "selection": {"records": built.records_seen, "examples": sum(counts.values()),
                          "excluded": len(reject_rows), "rules_engine": built.rules_engine},
            "splits": {"ratios": rs.spec.curation.splits.model_dump(), "counts": counts,
                       "row_kinds": row_kinds,
                       "groups": res.stats, "leakage": leak},
            "cells": {"dims": built.dims, "counts": cells, "quotas": rs.spec.curation.quotas.model_dump(),
                      "balance": balance.cells, "below_quota": balance.below_quota,
                      "oversampled": sum(copies.values())},
            "verdicts": built.verdicts,
            "rejects": {"total": len(reject_rows),
                        "by_code": dict(sorted(Counter(c for r in reject_rows for c in r["codes"]).items())),
                        "by_stage": dict(sorted(Counter(r["stage"] for r in reject_rows).items()))},
            "review": built.review,
            "preference": built.preference,
            **({"judge": built.judge["summary"]} if built.judge else {}),
            "tokens": ({"counted": len(lens), **{k: v for k, v in percentiles(lens).items() if k[0] == "p"},
                        "max": lens[-1], "over_max_seq_len": sum(n > profile.max_seq_len for n in lens)}
                       if lens else None),
        }
        seal(tmp, manifest, spec_entries, dataset_card)
        if reuse is not None:
            try:
                previous = verify(reuse)
            except SnapshotError:
                previous = None
            if previous is not None and previous["snapshot_id"] == manifest["snapshot_id"]:
                shutil.rmtree(tmp, ignore_errors=True)
                return FreezeResult(reuse, previous)
        publish(tmp, final, manifest, f"{name}@{version}")
        fsync_dir(root)
    except OSError as exc:  # a full disk, a write error: one line, and nothing left behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise SnapshotError(f"cannot write snapshot {name}@{version} under {root}: {exc.strerror or exc}; "
                            "nothing was written") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return FreezeResult(final, manifest)


def classes_of(rs: ResolvedSpec) -> dict:
    """The classifier's label mapping, from the spec (so ids do not depend on which labels occurred)."""
    from mashbill.curation.selection.labels import class_names

    kind = rs.spec.kind if rs.spec.kind != "preference" else "plan"
    names, problem = class_names(kind, rs.output_schema, rs.taxonomy)
    return {"names": names, "problem_type": problem}


def table_of(rows: list[dict] | dict[str, list], schema: pa.Schema) -> pa.Table:
    """Rows (dicts) or columns (name -> values) as an Arrow table, built column by column (about twice as fast
    as from_pylist at 100k rows)."""
    if isinstance(rows, dict):
        return pa.table({f.name: pa.array(rows[f.name], f.type) for f in schema}, schema=schema)
    return pa.table({f.name: pa.array([r[f.name] for r in rows], f.type) for f in schema}, schema=schema)


def write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, compression="zstd", write_statistics=False)
