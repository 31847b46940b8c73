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

import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mashbill import __version__
from mashbill.curation.balance import BALANCE_CUT, apply_quotas, oversample
from mashbill.curation.labels import cell_name, classification_label, dims_for, labels_of
from mashbill.curation.run_stats import store_series
from mashbill.curation.select import Excluded, Selection, select_records
from mashbill.curation.groups import near_duplicate_pairs
from mashbill.curation.split import SPLITS, assign_splits
from mashbill.validators.leakage import across_splits
from mashbill.errors import MashbillError
from mashbill.factory.stats import percentiles
from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec, canonical_json, find_spec, load_spec
from mashbill.specs.loader import sha256_file

log = logging.getLogger(__name__)

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


# ---------------------------------------------------------------- building examples


@dataclass
class Example:
    key: str
    record_id: str
    row_kind: str  # sft | preference | correction
    spec: str
    source: str
    rule: str | None
    query: str
    lang: str
    labels: dict
    cell: str
    class_labels: list[str]
    prompt: list[dict]
    completion: str
    rejected: str | None = None
    rejected_codes: list[str] = field(default_factory=list)
    turns: list[dict] | None = None
    group_links: list[str] = field(default_factory=list)  # other keys this example must share a split with
    inputs: dict = field(default_factory=dict)  # the record's input (for curation.group_by), not written

    def row(self, split_group: str, copy: int, n_tokens: int | None) -> dict:
        return {"example_id": self.key, "record_id": self.record_id, "row_kind": self.row_kind, "spec": self.spec,
                "source": self.source, "rule": self.rule, "query": self.query, "lang": self.lang,
                "labels": canonical_json(self.labels), "cell": self.cell, "class_labels": self.class_labels,
                "prompt": self.prompt, "completion": self.completion, "rejected": self.rejected,
                "rejected_codes": self.rejected_codes, "turns": self.turns, "group": split_group, "copy": copy,
                "n_tokens": n_tokens}

    @property
    def conversation(self) -> list[dict]:
        return self.turns or [*self.prompt, {"role": "assistant", "content": self.completion}]


def _key(*parts: Any) -> str:
    return hashlib.sha256(canonical_json(list(parts)).encode()).hexdigest()


def _cls(value) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def sft_examples(sel: Selection, dims: list[str]) -> list[Example]:
    spec = sel.rs.spec
    out = []
    for cand in sel.candidates:
        rec = cand.record
        completion = canonical_json(cand.output)
        labels = labels_of(dims, spec.kind, rec.input, cand.output, rec.meta)
        out.append(Example(
            _key("sft", list(rec.messages), completion), rec.id, "sft", spec.ref, cand.origin, None,
            rec.input.get("query", ""), labels.get("lang") or rec.input.get("lang") or rec.meta.get("lang") or "none",
            labels, cell_name(labels, dims), _cls(classification_label(spec.kind, cand.output, rec.meta)),
            list(rec.messages), completion, inputs=rec.input))
    return out


def _lang(inputs: dict, meta: dict) -> str:
    return inputs.get("lang") or meta.get("lang") or "none"


# ---------------------------------------------------------------- freeze


@dataclass
class FreezeResult:
    path: Path
    manifest: dict

    @property
    def snapshot_id(self) -> str:
        return self.manifest["snapshot_id"]


def _check_name(name: str, version: str) -> None:
    if not NAME_RE.match(name):
        raise SnapshotError(f"snapshot name {name!r}: expected lower-case letters, digits, '.', '_' or '-'")
    if not VERSION_RE.match(str(version)):
        raise SnapshotError(f"snapshot version {version!r}: expected letters, digits, '.', '_' or '-' (e.g. 1, 2024.06)")


def default_root(store_path: Path) -> Path:
    return Path(store_path) / "snapshots"


def _resolve_spec(spec: str | Path | ResolvedSpec) -> ResolvedSpec:
    if isinstance(spec, ResolvedSpec):
        return spec
    return load_spec(find_spec(str(spec)))


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
        latest = max(existing, key=lambda d: _version_key(d.name.split("@", 1)[1]))
    if version is None:
        ints = [int(d.name.split("@", 1)[1]) for d in existing if d.name.split("@", 1)[1].isdigit()]
        version = str(max(ints, default=0) + 1)
    version = str(version)
    _check_name(name, version)
    rs = _resolve_spec(spec)
    store_path = Path(store_path)
    final = root / f"{name}@{version}"
    if final.exists():
        raise SnapshotError(f"snapshot {name}@{version} already exists at {final}; snapshots are never modified: "
                            "freeze under a new version")
    with Store.open(store_path, read_only=True) as store:
        built = _build(store, rs)
        from mashbill.curation.judging import judge_export

        built.judge = judge_export(store, rs, [e.record_id for e in built.examples])
        reviewed = built.review["reviewed"] or built.review["require_review"]
        stats = _run_stats(store, built.spec_hashes, built.review if reviewed else None)
        teacher = _teacher_facts(store, built.run_ids)
    return _write(built, rs, stats, teacher, store_path, root, final, name, version, tokens,
                  latest if reuse_identical else None)


@dataclass
class Built:
    examples: list[Example]
    excluded: list[Excluded]
    verdicts: dict[str, int]
    review: dict
    run_ids: list[str]
    validation_ids: list[str]
    specs: list[tuple[str, ResolvedSpec]]  # (role, spec)
    rules_engine: str | None
    preference: dict | None
    records_seen: int
    spec_hashes: list[str]
    dims: list[str]
    judge: dict | None = None  # judge scores of the selected records (curation.judging.judge_export)


def _build(store: Store, rs: ResolvedSpec) -> Built:
    spec = rs.spec
    dims = dims_for(spec.kind, spec.curation.quotas.dims)
    if spec.kind != "preference":
        sel = select_records(store, rs)
        return Built(sft_examples(sel, dims), sel.excluded, sel.verdict_counts, sel.review, sel.run_ids,
                     sel.validation_ids, [("snapshot", rs)], None, None, sel.review["records"], [rs.hash], dims)
    from mashbill.curation.preference import (build_pairs, check_correction_loss, correction_turns, edits_of,
                                              review_request_of, source_spec_of)

    cfg = spec.curation.preference
    if cfg.correction_samples:
        check_correction_loss(rs)
    src = source_spec_of(rs)
    src_sel = select_records(store, src)
    samples = [r for r in store.records(spec_hash=rs.hash) if r.status != "failed"] if {"teacher", "judge"} & set(cfg.sources) else []
    marks = {r[0] for r in store.con.execute(
        "SELECT DISTINCT record_id FROM record_validations WHERE record_id IN "
        "(SELECT record_id FROM records WHERE spec_hash = ?)", [rs.hash]).fetchall()}
    unvalidated = [r.id for r in samples if r.status == "accepted" and r.id not in marks]
    if unvalidated:
        raise MashbillError(f"store {store.root}: {len(unvalidated)} teacher sample(s) of {rs.ref} were never "
                            f"checked by a validation run (first: {unvalidated[0][:16]}). Nothing was written.")
    judgments = []
    if "judge" in cfg.sources:
        from mashbill.factory.judge import pair_judgments

        judgments = pair_judgments(store, rs)
    pb = build_pairs(rs, src_sel, samples, judgments)
    examples: list[Example] = []
    for p in pb.pairs:
        labels = labels_of(dims, "preference", p.inputs, p.chosen, p.meta, p.source)
        examples.append(Example(
            p.pair_id, p.record_id, "preference", rs.ref, p.source, p.rule, p.inputs.get("query", ""),
            _lang(p.inputs, p.meta), labels, cell_name(labels, dims),
            _cls(classification_label("plan", p.chosen, p.meta)), list(p.prompt), p.chosen_text, p.rejected_text,
            list(p.rejected_codes), inputs=p.inputs))
    corrections = 0
    if cfg.correction_samples:
        order = {"human": 0, "rule": 1, "teacher": 2, "judge": 3}
        first: dict[str, Example] = {}
        for ex, p in sorted(zip(examples, pb.pairs), key=lambda t: (order[t[1].source], t[0].key)):
            first.setdefault(p.record_id, ex)
        by_key = {p.pair_id: p for p in pb.pairs}
        for ex in sorted(first.values(), key=lambda e: e.key):
            turns = correction_turns(by_key[ex.key], review_request_of(rs))
            examples.append(Example(_key("correction", turns), ex.record_id, "correction", rs.ref, ex.source, ex.rule,
                                    ex.query, ex.lang, ex.labels, ex.cell, ex.class_labels, ex.prompt,
                                    ex.completion, ex.rejected, ex.rejected_codes, turns, [ex.key], ex.inputs))
            corrections += 1
    verdicts = Counter(src_sel.verdict_counts)
    sample_codes = store.con.execute(
        "SELECT code, count(*) FROM verdicts WHERE record_id IN (SELECT record_id FROM records WHERE spec_hash = ?) "
        "GROUP BY code", [rs.hash]).fetchall()
    verdicts.update(dict(sample_codes))
    sample_runs = [r[0] for r in store.con.execute(
        "SELECT DISTINCT run_id FROM records WHERE spec_hash = ? AND status <> 'failed'", [rs.hash]).fetchall()] \
        if samples else []
    sample_validations = [r[0] for r in store.con.execute(
        "SELECT DISTINCT validation_id FROM record_validations WHERE record_id IN "
        "(SELECT record_id FROM records WHERE spec_hash = ?)", [rs.hash]).fetchall()] if samples else []
    pref = {"sources": cfg.sources, "pairs": dict(pb.counts), "correction_samples": corrections,
            "edits": edits_of(rs), "samples_per_query": cfg.samples_per_query, "source_spec": src.ref,
            "rules_engine": pb.engine, "rejected_pairs": dict(Counter(e.codes[0] for e in pb.excluded)),
            **pb.notes}
    return Built(examples, src_sel.excluded + pb.excluded, dict(sorted(verdicts.items())), src_sel.review,
                 sorted(set(src_sel.run_ids) | set(sample_runs)),
                 sorted(set(src_sel.validation_ids) | set(sample_validations)),
                 [("snapshot", rs), ("source", src)], pb.engine, pref, src_sel.review["records"] + len(samples),
                 [rs.hash, src.hash], dims)


def _split_and_balance(built: Built, rs: ResolvedSpec):
    spec = rs.spec
    cur = spec.curation
    base = [e for e in built.examples if e.row_kind != "correction"]
    derived = [e for e in built.examples if e.row_kind == "correction"]
    if not base:
        codes = Counter(c for x in built.excluded for c in x.codes)
        why = ", ".join(f"{c}: {n}" for c, n in codes.most_common(8)) or "no records"
        raise SnapshotError(f"nothing to freeze for {rs.ref}: the selection is empty ({built.records_seen} record(s) "
                            f"seen; left out by code: {why}). Nothing was written.")
    balance = apply_quotas([e.key for e in base], [e.cell for e in base], built.dims, cur.quotas, rs.ref)
    kept = set(balance.kept)
    cut = [e for e in base if e.key not in kept]
    base = [e for e in base if e.key in kept]
    derived = [e for e in derived if all(k in kept for k in e.group_links)]
    examples = base + derived
    keys = [e.key for e in examples]
    links = [(e.key, other) for e in examples for other in e.group_links]
    # paraphrase groups and shared sources
    for fieldname in cur.group_by:
        first: dict[str, str] = {}
        for e in examples:
            value = e.inputs.get(fieldname)
            if value is None:
                continue
            value = canonical_json(value)
            if value in first:
                links.append((first[value], e.key))
            else:
                first[value] = e.key
    by_record: dict[str, str] = {}
    for e in examples:
        if e.record_id in by_record:
            links.append((by_record[e.record_id], e.key))
        else:
            by_record[e.record_id] = e.key
    links += near_duplicate_pairs(keys, [e.query for e in examples], cur.near_duplicate_threshold)
    ratios = {"train": cur.splits.train, "eval": cur.splits.eval, "test": cur.splits.test}
    res = assign_splits(keys, [e.cell for e in examples], links, ratios)
    train_by_cell: dict[str, list[str]] = defaultdict(list)
    for e in base:
        if res.assignment[e.key] == "train":
            train_by_cell[e.cell].append(e.key)
    copies = oversample(balance, train_by_cell, cur.quotas, rs.ref)
    leak = across_splits(res.assignment, {e.key: e.query for e in examples}, res.groups)
    if leak["groups_across_splits"] or leak["identical_queries_across_splits"]:
        raise SnapshotError(f"{rs.ref}: the split leaks across train/eval/test ({leak}); this is a bug")
    return examples, cut, balance, res, copies, leak


def _copy_specs(specs: list[tuple[str, ResolvedSpec]], dest: Path) -> list[dict]:
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


def _fsync_tree(root: Path) -> None:
    for dirpath, _, files in os.walk(root):
        for f in files:
            fd = os.open(os.path.join(dirpath, f), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(dirpath, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _teacher_facts(store: Store, run_ids: list[str]) -> list[dict]:
    if not run_ids:
        return []
    rows = store.con.execute(
        "SELECT run_id, spec_name, spec_version, backend, model, model_sha256, model_info, sampling FROM runs "
        f"WHERE run_id IN ({', '.join('?' for _ in run_ids)}) ORDER BY run_id", run_ids).fetchall()
    out = []
    for run_id, sname, sver, backend, model, sha, info, sampling in rows:
        info = json.loads(info) if info else {}
        out.append({"run_id": run_id, "spec": f"{sname}@{sver}", "backend": backend, "model": model,
                    "model_sha256": sha, "revision": info.get("revision"),
                    "sampling": json.loads(sampling) if sampling else {}})
    return out


def _run_stats(store: Store, spec_hashes: list[str], review: dict) -> dict:
    """What the report plots about how the records were made (kept with the snapshot)."""
    return store_series(store, spec_hashes, review)


def _write(built: Built, rs: ResolvedSpec, stats: dict, teacher: list[dict], store_path: Path, root: Path,
           final: Path, name: str, version: str, tokens: bool, reuse: Path | None = None) -> FreezeResult:
    examples, cut, balance, res, copies, leak = _split_and_balance(built, rs)
    profile = rs.spec.trainer_profile
    n_tokens: dict[str, int | None] = {}
    if tokens:
        from mashbill.curation.tokens import token_lengths

        lengths = token_lengths(profile, rs.path.parent, [e.conversation for e in examples])
        if lengths is not None:
            n_tokens = {e.key: n for e, n in zip(examples, lengths)}
    rows: dict[str, list[dict]] = {s: [] for s in SPLITS}
    for e in examples:
        split = res.assignment[e.key]
        for c in range(1 + copies.get(e.key, 0)):
            rows[split].append(e.row(res.groups[e.key], c, n_tokens.get(e.key)))
    for s in SPLITS:
        rows[s].sort(key=lambda r: (r["cell"], r["row_kind"], r["example_id"], r["copy"]))
    excluded = list(built.excluded) + [Excluded(e.record_id, e.spec, "balance", (BALANCE_CUT,),
                                                f"cell {e.cell} over its quota", e.query, e.completion) for e in cut]
    reject_rows = sorted(({"record_id": x.record_id, "spec": x.spec, "stage": x.stage, "codes": list(x.codes),
                           "detail": x.detail, "query": x.query, "output": x.output} for x in excluded),
                         key=lambda r: (r["stage"], r["record_id"], r["spec"], r["codes"]))

    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{name}@{version}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        (tmp / "data").mkdir()
        for s in SPLITS:
            _write_parquet(pa.Table.from_pylist(rows[s], schema=SCHEMA), tmp / "data" / f"{s}.parquet")
        _write_parquet(pa.Table.from_pylist(reject_rows, schema=REJECT_SCHEMA), tmp / "rejects.parquet")
        if built.judge:
            _write_parquet(pa.Table.from_pylist(built.judge["rows"]), tmp / "judge.parquet")
        spec_entries = _copy_specs(built.specs, tmp)
        (tmp / "stats.json").write_bytes(manifest_bytes(stats))
        from mashbill.curation.tokens import training_facts

        trainer_profile, train_tmpl = training_facts(profile, rs.path.parent)
        if train_tmpl:  # what a trainer renders with, so nothing has to be wired in by hand
            (tmp / trainer_profile["training_template"]).write_text(train_tmpl, encoding="utf-8")

        counts = {s: len(rows[s]) for s in SPLITS}
        cells = {s: dict(sorted(Counter(r["cell"] for r in rows[s]).items())) for s in SPLITS}
        lens = sorted(n for n in n_tokens.values() if n is not None)
        manifest: dict[str, Any] = {
            "format": FORMAT, "name": name, "version": version, "ref": f"{name}@{version}",
            "kind": rs.spec.kind, "description": rs.spec.description,
            "frozen_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tool_version": __version__,
            "specs": spec_entries,
            "teacher": teacher,
            "trainer_profile": trainer_profile,
            "classes": _classes(rs),
            "store": {"path": str(Path(store_path).resolve()), "run_ids": built.run_ids,
                      "validation_ids": built.validation_ids},
            "selection": {"records": built.records_seen, "examples": sum(counts.values()),
                          "excluded": len(reject_rows), "rules_engine": built.rules_engine},
            "splits": {"ratios": rs.spec.curation.splits.model_dump(), "counts": counts,
                       "row_kinds": {s: dict(sorted(Counter(r["row_kind"] for r in rows[s]).items())) for s in SPLITS},
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
        files = {p.relative_to(tmp).as_posix(): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        manifest["snapshot_id"] = snapshot_id_of(files, spec_entries)
        (tmp / CARD).write_text(dataset_card(manifest), encoding="utf-8")
        files[CARD] = sha256_file(tmp / CARD)
        manifest["files"] = dict(sorted(files.items()))
        manifest["integrity"] = integrity_of(manifest)
        if reuse is not None:
            try:
                previous = verify(reuse)
            except SnapshotError:
                previous = None
            if previous is not None and previous["snapshot_id"] == manifest["snapshot_id"]:
                shutil.rmtree(tmp, ignore_errors=True)
                return FreezeResult(reuse, previous)
        _fsync_tree(tmp)
        with open(tmp / MANIFEST, "wb") as f:  # last: a folder without it is not a snapshot
            f.write(manifest_bytes(manifest))
            f.flush()
            os.fsync(f.fileno())
        if final.exists():
            raise SnapshotError(f"snapshot {name}@{version} appeared at {final} while freezing; nothing was replaced")
        try:
            os.rename(tmp, final)
        except OSError as exc:  # another freeze of the same name@version won the race
            raise SnapshotError(f"snapshot {name}@{version} appeared at {final} while freezing ({exc.strerror}); "
                                "nothing was replaced") from None
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:  # a full disk, a write error: one line, and nothing left behind
        shutil.rmtree(tmp, ignore_errors=True)
        raise SnapshotError(f"cannot write snapshot {name}@{version} under {root}: {exc.strerror or exc}; "
                            "nothing was written") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return FreezeResult(final, manifest)


def _classes(rs: ResolvedSpec) -> dict:
    """The classifier's label mapping, from the spec (so ids do not depend on which labels occurred)."""
    from mashbill.curation.labels import class_names

    kind = rs.spec.kind if rs.spec.kind != "preference" else "plan"
    names, problem = class_names(kind, rs.output_schema, rs.taxonomy)
    return {"names": names, "problem_type": problem}


def _write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, compression="zstd", write_statistics=False)


# ---------------------------------------------------------------- the dataset card


def dataset_card(m: dict) -> str:
    langs = sorted({k.split("/")[-1] for s in m["cells"]["counts"].values() for k in s} - {"none"}) \
        if m["cells"]["dims"] and m["cells"]["dims"][-1] == "lang" else []
    lines = ["---", f"pretty_name: {m['ref']}"]
    if langs:
        lines += ["language:"] + [f"- {x}" for x in langs]
    lines += ["configs:", "- config_name: default", "  data_files:"]
    lines += [f"  - split: {s}\n    path: data/{s}.parquet" for s in SPLITS]
    lines += ["---", "", f"# {m['ref']}", "",
              f"A Mashbill snapshot of {m['kind']} examples. Snapshot id `{m['snapshot_id']}`.", ""]
    if m.get("description"):
        lines += [m["description"].strip(), ""]
    lines += ["## Load it", "", "```bash", f"mashbill snapshot verify {m['ref']}",
              f"mashbill snapshot pull {m['ref']} --format "
              f"{'preference' if m['kind'] == 'preference' else 'messages'} --out ./{m['name']}", "```", "",
              "```python", "from mashbill.curation.pull import load_snapshot",
              f"ds = load_snapshot(\"{m['ref']}\", format=\"{'preference' if m['kind'] == 'preference' else 'messages'}\", "
              f"store=\"{m['store']['path']}\")",
              "```", "", "## Splits", "", "| split | examples |", "|---|---|"]
    lines += [f"| {s} | {m['splits']['counts'][s]} |" for s in SPLITS]
    leak = m["splits"]["leakage"]
    lines += ["", f"Near-duplicate clusters and paraphrase groups stay on one side ({m['splits']['groups']['groups']} "
                  f"groups, {m['splits']['groups']['multi_record_groups']} with more than one example). Leakage "
                  f"checks after the split: {leak['groups_across_splits']} groups and "
                  f"{leak['identical_queries_across_splits']} identical queries across splits.", "",
              f"## Label cells ({' × '.join(m['cells']['dims'])})", "", "| cell | train | eval | test |",
              "|---|---|---|---|"]
    all_cells = sorted({c for s in m["cells"]["counts"].values() for c in s})
    for c in all_cells:
        lines.append(f"| {c} | " + " | ".join(str(m["cells"]["counts"][s].get(c, 0)) for s in SPLITS) + " |")
    below = m["cells"]["below_quota"]
    lines += [""]
    if below:
        lines += ["**Cells below quota** (shipped as they are, not hidden):", ""]
        lines += [f"- {c}: {v['kept']} of {v['target'] or m['cells']['quotas']['min_per_cell']}" for c, v in
                  sorted(below.items())]
        lines += [""]
    lines += ["## Provenance", ""]
    for s in m["specs"]:
        lines.append(f"- spec `{s['name']}@{s['version']}` ({s['kind']}, {s['role']}), hash `{s['hash']}`")
    for t in m["teacher"]:
        lines.append(f"- teacher run `{t['run_id']}`: {t['backend']} `{t['model']}`"
                     + (f" (sha256 `{t['model_sha256'][:16]}…`)" if t.get("model_sha256") else "")
                     + f", sampling {canonical_json(t['sampling'])}")
    tp = m["trainer_profile"]
    lines += [f"- trainer profile: tokenizer `{tp['tokenizer']}`, max_seq_len {tp['max_seq_len']}, loss {tp['loss']}, "
              f"chat template sha256 `{tp.get('chat_template_sha256') or 'unknown'}`",
              f"- store `{m['store']['path']}`, {len(m['store']['run_ids'])} run(s), "
              f"{len(m['store']['validation_ids'])} validation run(s); tool version {m['tool_version']}", ""]
    if m.get("tokens"):
        t = m["tokens"]
        lines += ["## Token lengths", "", f"p50 {t['p50']}, p95 {t['p95']}, p99 {t['p99']}, max {t['max']}; "
                  f"{t['over_max_seq_len']} example(s) over max_seq_len {tp['max_seq_len']}.", ""]
    if m.get("preference"):
        p = m["preference"]
        lines += ["## Preference pairs", "", "| source | pairs |", "|---|---|"]
        lines += [f"| {k} | {p['pairs'].get(k, 0)} |" for k in ("rule", "teacher", "human")]
        lines += ["", f"Multi-turn correction samples: {p['correction_samples']} (loss `{tp['loss']}`: the wrong "
                      "turn is not trained).", ""]
    r = m["review"]
    lines += ["## Review", "", f"{r['reviewed']} of {r['records']} records reviewed: {r['accepted']} accepted, "
              f"{r['corrected']} corrected, {r['rejected']} rejected, {r['disagreements']} disagreements"
              f"{' (review required)' if r['require_review'] else ''}.", "", "## Left out", ""]
    if m["rejects"]["by_code"]:
        lines += ["| code | records |", "|---|---|"] + [f"| {c} | {n} |" for c, n in m["rejects"]["by_code"].items()]
    else:
        lines.append("Nothing.")
    lines += ["", "Every left-out record is in `rejects.parquet` with its codes. `manifest.json` holds the sha256 of "
                  "every file; `mashbill snapshot verify` re-checks them.", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- finding, verifying, listing


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
            return max(found, key=lambda d: _version_key(d.name.split("@", 1)[1]))
    have = ", ".join(d.name for d in list_dirs(root)) or "none"
    raise SnapshotError(f"no snapshot {ref} under {root} (snapshots there: {have})")


def _version_key(v: str):
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
        if m and not _pid_alive(int(m.group(1))):
            shutil.rmtree(d, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
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
        elif sha256_file(f) != digest:
            problems.append((rel, "sha256 differs from the manifest"))
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


# ---------------------------------------------------------------- diff


def read_split_rows(path: Path) -> dict[str, list[dict]]:
    cols = ["example_id", "record_id", "row_kind", "cell", "copy", "query"]
    return {s: pq.read_table(path / "data" / f"{s}.parquet", columns=cols).to_pylist() for s in SPLITS}


def diff(a: str | Path, b: str | Path) -> dict:
    a, b = Path(a), Path(b)
    ma, mb = verify(a), verify(b)
    ra, rb = read_split_rows(a), read_split_rows(b)

    def index(rows):
        out = {}
        for s, rs_ in rows.items():
            for r in rs_:
                if r["copy"] == 0:
                    out[(r["record_id"], r["row_kind"], r["example_id"])] = (s, r["cell"], r["query"])
        return out

    ia, ib = index(ra), index(rb)
    rec_a = {(k[0], k[1]): v for k, v in ia.items()}
    rec_b = {(k[0], k[1]): v for k, v in ib.items()}
    added = sorted(set(rec_b) - set(rec_a))
    removed = sorted(set(rec_a) - set(rec_b))
    both = set(rec_a) & set(rec_b)
    relabelled = sorted((k, rec_a[k][1], rec_b[k][1]) for k in both if rec_a[k][1] != rec_b[k][1])
    moved = sorted((k, rec_a[k][0], rec_b[k][0]) for k in both if rec_a[k][0] != rec_b[k][0])
    changed_output = sorted(k for k in both if
                            {e for e in ia if (e[0], e[1]) == k} != {e for e in ib if (e[0], e[1]) == k})
    cells_a = {s: Counter(r["cell"] for r in ra[s]) for s in SPLITS}
    cells_b = {s: Counter(r["cell"] for r in rb[s]) for s in SPLITS}
    shifts = {s: {c: cells_b[s][c] - cells_a[s][c] for c in sorted(set(cells_a[s]) | set(cells_b[s]))
                  if cells_b[s][c] != cells_a[s][c]} for s in SPLITS}
    specs_a = {s["name"]: s for s in ma["specs"]}
    specs_b = {s["name"]: s for s in mb["specs"]}
    spec_changes = []
    for n in sorted(set(specs_a) | set(specs_b)):
        sa, sb = specs_a.get(n), specs_b.get(n)
        if sa is None or sb is None or sa["hash"] != sb["hash"] or sa["version"] != sb["version"]:
            files_changed = []
            if sa and sb:
                fa = {r: ma["files"].get(p) for r, p in sa["files"].items()}
                fb = {r: mb["files"].get(p) for r, p in sb["files"].items()}
                files_changed = sorted(r for r in set(fa) | set(fb) if fa.get(r) != fb.get(r))
                if ma["files"].get(sa["path"]) != mb["files"].get(sb["path"]):
                    files_changed.insert(0, "spec")
            spec_changes.append({"name": n, "a": f"{n}@{sa['version']} {sa['hash'][:12]}" if sa else None,
                                 "b": f"{n}@{sb['version']} {sb['hash'][:12]}" if sb else None,
                                 "files_changed": files_changed})
    codes = sorted(set(ma["verdicts"]) | set(mb["verdicts"]))
    verdict_shift = {c: mb["verdicts"].get(c, 0) - ma["verdicts"].get(c, 0) for c in codes
                     if mb["verdicts"].get(c, 0) != ma["verdicts"].get(c, 0)}
    return {"a": {"ref": ma["ref"], "snapshot_id": ma["snapshot_id"]},
            "b": {"ref": mb["ref"], "snapshot_id": mb["snapshot_id"]},
            "identical": ma["snapshot_id"] == mb["snapshot_id"],
            "added": [{"record_id": k[0], "row_kind": k[1], "split": rec_b[k][0], "cell": rec_b[k][1],
                       "query": rec_b[k][2]} for k in added],
            "removed": [{"record_id": k[0], "row_kind": k[1], "split": rec_a[k][0], "cell": rec_a[k][1],
                         "query": rec_a[k][2]} for k in removed],
            "relabelled": [{"record_id": k[0], "from": x, "to": y} for k, x, y in relabelled],
            "moved_split": [{"record_id": k[0], "from": x, "to": y} for k, x, y in moved],
            "changed_output": [k[0] for k in changed_output],
            "cell_shifts": shifts, "spec_changes": spec_changes, "verdict_shifts": verdict_shift,
            "counts": {"a": ma["splits"]["counts"], "b": mb["splits"]["counts"]}}
