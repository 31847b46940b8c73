"""Freeze -> verify -> pull, immutability, tamper detection, atomic writes and refusals of bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest

from mashbill.curation.snapshots.pull import load_snapshot
from mashbill.curation.snapshots.snapshot import (IntegrityError, SnapshotError, diff, freeze, incomplete_dirs, ls,
                                        resolve_snapshot, verify)
from mashbill.errors import MashbillError
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.curation.conftest import PLANS, SEEDS, add_records


@pytest.fixture
def plan_store(lib, tmp_path):
    path = lib.write("plan-t")
    rs = load_spec(path)
    with Store.open(tmp_path / "store") as store:
        add_records(store, rs, rejected_by_validation={"What is 17.5% of 4,360?": "HR001"},
                    parse_failures=("Wer hat die Relativitätstheorie entwickelt?",))
    return path, tmp_path / "store"


def _files(path):
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())


def test_freeze_writes_a_complete_verifiable_snapshot(plan_store):
    spec, store = plan_store
    res = freeze(spec, store_path=store, name="plans", version="1")
    m = res.manifest
    assert res.path == store / "snapshots" / "plans@1"
    assert set(m["files"]) == set(_files(res.path)) - {"manifest.json"}
    assert {"data/train.parquet", "data/eval.parquet", "data/test.parquet", "rejects.parquet", "README.md",
            "stats.json", "specs/plan/plan-t@1.yaml", "specs/shared/rules/moe-routing@4.yaml",
            "specs/shared/rules/moe-complexity@1.yaml",  # the recall cues moe-routing@4 reads ship with it
            "specs/shared/taxonomy/moe-experts@1.yaml", "specs/shared/tools/precision-tools@2.yaml",
            "specs/shared/schemas/plan@1.json", "specs/shared/prompts/planner@1.yaml"} <= set(m["files"])
    # 26 records: one parse failure and one validation reject are left out, with their codes
    assert sum(m["splits"]["counts"].values()) == 24
    assert m["rejects"]["by_code"] == {"HR001": 1, "PARSE001": 1}
    rejects = pq.read_table(res.path / "rejects.parquet").to_pylist()
    assert sorted((r["stage"], r["codes"][0]) for r in rejects) == [("generate", "PARSE001"), ("validate", "HR001")]
    # provenance: spec hash, teacher run facts, trainer profile with the chat template's hash, the store
    rs = load_spec(spec)
    assert m["specs"][0]["hash"] == rs.hash and m["specs"][0]["name"] == "plan-t"
    [teacher] = m["teacher"]
    assert teacher["backend"] == "llama_cpp" and teacher["model_sha256"] == "f" * 64
    assert teacher["sampling"]["max_tokens"] == 160
    assert m["trainer_profile"]["max_seq_len"] == 1024 and len(m["trainer_profile"]["chat_template_sha256"]) == 64
    assert m["tokens"]["counted"] == 24 and 0 < m["tokens"]["p50"] <= m["tokens"]["max"]
    assert m["store"]["run_ids"] == [teacher["run_id"]] and len(m["store"]["validation_ids"]) == 1
    assert m["splits"]["leakage"] == {"groups_across_splits": 0, "identical_queries_across_splits": 0}
    # the copied spec loads to the same content hash
    assert load_spec(res.path / "specs" / "plan" / "plan-t@1.yaml").hash == rs.hash
    assert verify(res.path)["snapshot_id"] == m["snapshot_id"]
    card = (res.path / "README.md").read_text()
    assert m["snapshot_id"] in card and "HR001" in card and "plan-t@1" in card


def test_refreezing_identical_inputs_gives_the_same_id(plan_store, tmp_path):
    spec, store = plan_store
    a = freeze(spec, store_path=store, name="plans", version="1", tokens=False)
    b = freeze(spec, store_path=store, name="plans", version="2", tokens=False)
    c = freeze(spec, store_path=store, name="plans", version="1", out_dir=tmp_path / "elsewhere", tokens=False)
    assert a.snapshot_id == b.snapshot_id == c.snapshot_id
    for rel in a.manifest["files"]:
        if rel != "README.md":  # the card names the version
            assert (a.path / rel).read_bytes() == (c.path / rel).read_bytes(), rel
    # a changed input (one more validation reject) changes the id
    rs = load_spec(spec)
    with Store.open(store) as s:
        from mashbill.factory.records import Verdict

        rec = next(r for r in s.records(spec_hash=rs.hash) if r.input["query"] == "What is 1847 * 23 + 519?")

        s.record_validation(spec_hash=rs.hash, source="store", results={rec.id: [Verdict("HR003", "reject", "x")]},
                            counts={})
    d = freeze(spec, store_path=store, name="plans", version="3", tokens=False)
    assert d.snapshot_id != a.snapshot_id
    assert sum(d.manifest["splits"]["counts"].values()) == 23


def test_every_format_pulls(plan_store):
    spec, store = plan_store
    res = freeze(spec, store_path=store, name="plans", version="1", tokens=False)
    counts = res.manifest["splits"]["counts"]
    msgs = load_snapshot("plans@1", "messages", store=store)
    assert {s: msgs[s].num_rows for s in msgs} == counts
    row = msgs["train"][0]["messages"]
    assert [m["role"] for m in row] == ["system", "user", "assistant"]
    assert json.loads(row[-1]["content"]) == PLANS[row[1]["content"]]
    pc = load_snapshot(res.path, "prompt-completion")
    first = pc["train"][0]
    assert [m["role"] for m in first["prompt"]] == ["system", "user"] and first["completion"][0]["role"] == "assistant"
    cls = load_snapshot(res.path, "classification")
    info = cls.label_info
    names = [info["id2label"][i] for i in range(len(info["id2label"]))]
    # every class of the taxonomy, in its order, whether or not it occurred; the mapping is in the manifest
    assert names[:3] == ["general", "technical_support", "code_reviewer"] and "vision" in names
    assert res.manifest["classes"] == {"names": names, "problem_type": "multi_label_classification"}
    assert info["problem_type"] == "multi_label_classification"
    assert cls["train"].features["labels"].feature.dtype == "float32"
    texts = {r["text"]: [names[i] for i, v in enumerate(r["labels"]) if v == 1.0] for s in cls for r in cls[s]}
    assert all(len(r["labels"]) == len(names) and set(r["labels"]) <= {0.0, 1.0} for s in cls for r in cls[s])
    assert texts["Write a Tetris game in Python with pygame."] == ["code_reviewer", "research"]
    with pytest.raises(SnapshotError, match="no preference pairs"):
        load_snapshot(res.path, "preference")


def test_one_changed_byte_in_any_file_fails_verify_and_pull_naming_it(plan_store, tmp_path):
    spec, store = plan_store
    res = freeze(spec, store_path=store, name="plans", version="1", tokens=False)
    names = _files(res.path)
    assert "manifest.json" in names and len(names) >= 12
    for i, rel in enumerate(names):
        copy = tmp_path / "tamper" / f"plans@{i}"
        shutil.copytree(res.path, copy)
        data = bytearray((copy / rel).read_bytes())
        pos = len(data) // 2
        data[pos] = (data[pos] + 1) % 256 if data[pos] not in (0x20, 0x0a) else 0x21
        (copy / rel).write_bytes(bytes(data))
        with pytest.raises(IntegrityError) as exc:
            verify(copy)
        assert rel in exc.value.files, (rel, str(exc.value))
        with pytest.raises(MashbillError, match=rel.replace(".", r"\.")):
            load_snapshot(copy, "messages")
    # a whitespace-only edit of the manifest is caught too, and so is an added file
    copy = tmp_path / "tamper" / "ws"
    shutil.copytree(res.path, copy)
    (copy / "manifest.json").write_bytes((copy / "manifest.json").read_bytes().replace(b"\n", b"\r\n", 1))
    with pytest.raises(IntegrityError, match="manifest.json"):
        verify(copy)
    copy = tmp_path / "tamper" / "extra"
    shutil.copytree(res.path, copy)
    (copy / "data" / "more.parquet").write_bytes(b"x")
    with pytest.raises(IntegrityError, match="data/more.parquet"):
        verify(copy)
    assert verify(res.path)  # the original is untouched


def test_a_killed_freeze_leaves_nothing_ls_or_pull_accept(plan_store, tmp_path):
    spec, store = plan_store
    # die at the worst moment: every file and the manifest written, the folder not yet renamed into place
    script = textwrap.dedent(f"""
        import os
        from mashbill.curation.snapshots.snapshot import freeze
        os.rename = lambda *a, **k: os._exit(9)
        freeze({str(spec)!r}, store_path={str(store)!r}, name="plans", version="1", tokens=False)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 9, proc.stderr
    root = store / "snapshots"
    leftovers = [d.name for d in root.iterdir()]
    assert len(leftovers) == 1 and leftovers[0].startswith(".tmp-plans@1-")
    assert (root / leftovers[0] / "manifest.json").is_file()  # complete inside, but never published
    assert ls(root) == [] and [d.name for d in incomplete_dirs(root)] == leftovers
    with pytest.raises(SnapshotError, match="no snapshot plans@1"):
        load_snapshot("plans@1", "messages", root=root)
    # a folder under the right name but without a manifest (a copy cut short) is not a snapshot either
    (root / "plans@2" / "data").mkdir(parents=True)
    assert ls(root) == []
    with pytest.raises(SnapshotError):
        resolve_snapshot("plans@2", root)
    # and the freeze can simply be run again
    res = freeze(spec, store_path=store, name="plans", version="1", tokens=False)
    assert [x["ref"] for x in ls(root)] == ["plans@1"] and verify(res.path)


def _nothing_written(store):
    root = store / "snapshots"
    return not root.exists() or not any(root.iterdir())


def test_bad_input_is_refused_and_writes_nothing(lib, tmp_path):
    store = tmp_path / "store"
    # unvalidated records
    spec = lib.write("plan-u")
    rs = load_spec(spec)
    with Store.open(store) as s:
        add_records(s, rs, validate=False, limit=4)
    with pytest.raises(MashbillError, match=r"4 accepted record\(s\) of plan-u@1 were never covered by a "
                                            r"validation run.*mashbill validate"):
        freeze(spec, store_path=store, name="u", version="1", tokens=False)
    assert _nothing_written(store)
    # an empty selection: every record rejected by validation
    spec = lib.write("plan-e", seeds=SEEDS[:3])
    rs = load_spec(spec)
    with Store.open(store) as s:
        add_records(s, rs, rejected_by_validation={q: "HR001" for q, *_ in SEEDS[:3]})
    with pytest.raises(MashbillError, match=r"selection is empty \(3 record\(s\) seen; left out by code: HR001: 3\)"):
        freeze(spec, store_path=store, name="e", version="1", tokens=False)
    assert _nothing_written(store)
    # a spec with no records in the store at all
    spec_none = lib.write("plan-none")
    with pytest.raises(MashbillError, match="has no records of plan-none@1"):
        freeze(spec_none, store_path=store, name="n", version="1", tokens=False)
    # quotas that cannot be met
    spec = lib.write("plan-q", curation={"quotas": {"dims": ["category", "lang"], "min_per_cell": 2}})
    rs = load_spec(spec)
    with Store.open(store) as s:
        add_records(s, rs)
    with pytest.raises(MashbillError, match=r"quotas cannot be met: .*cell dynamic/de has 1 record\(s\), "
                                            r"below min_per_cell 2"):
        freeze(spec, store_path=store, name="q", version="1", tokens=False)
    spec = lib.write("plan-q2", curation={"quotas": {"dims": ["category", "lang"], "cells": {"vision/en": 3}}})
    rs = load_spec(spec)
    with Store.open(store) as s:
        add_records(s, rs)
    with pytest.raises(MashbillError, match="cell vision/en has no record at all"):
        freeze(spec, store_path=store, name="q", version="1", tokens=False)
    assert _nothing_written(store)
    # a name@version that exists
    ok = lib.write("plan-ok")
    with Store.open(store) as s:
        add_records(s, load_spec(ok))
    first = freeze(ok, store_path=store, name="ok", version="1", tokens=False)
    before = {p: p.read_bytes() for p in first.path.rglob("*") if p.is_file()}
    with pytest.raises(MashbillError, match="ok@1 already exists.*never modified"):
        freeze(ok, store_path=store, name="ok", version="1", tokens=False)
    assert {p: p.read_bytes() for p in first.path.rglob("*") if p.is_file()} == before
    assert [d.name for d in (store / "snapshots").iterdir()] == ["ok@1"]
    with pytest.raises(MashbillError, match="snapshot version"):
        freeze(ok, store_path=store, name="ok", version="1/../../x", tokens=False)


def test_diff_shows_added_removed_relabelled_and_spec_changes(lib, tmp_path):
    store = tmp_path / "store"
    spec = lib.write("plan-d", seeds=SEEDS[:20])
    rs = load_spec(spec)
    with Store.open(store) as s:
        add_records(s, rs)
    a = freeze(spec, store_path=store, name="d", version="1", tokens=False)
    # a new spec version: one more seed, one plan relabelled, one record rejected
    spec2 = lib.write("plan-d", seeds=SEEDS[:21],
                      extra={"changelog": ["2: one more seed"]})
    rs2 = load_spec(spec2)
    assert rs2.hash != rs.hash
    plans = dict(PLANS)
    plans["Explain the difference between weather and climate."] = [{"task": "Explain", "category": "science"}]
    with Store.open(store) as s:
        add_records(s, rs2, plans=plans, rejected_by_validation={"What is 1847 * 23 + 519?": "HR001"})
    b = freeze(spec2, store_path=store, name="d", version="2", tokens=False)
    d = diff(a.path, b.path)
    assert not d["identical"]
    # record ids depend on the spec hash, so a new spec version shows every record as new; the queries tell
    added = {r["query"] for r in d["added"]}
    removed = {r["query"] for r in d["removed"]}
    assert added - removed == {"What is the capital of Canada?"}
    assert removed - added == {"What is 1847 * 23 + 519?"}
    assert d["spec_changes"] and d["spec_changes"][0]["files_changed"] == ["spec"]
    total_a = sum(sum(v.values()) for v in d["cell_shifts"].values())
    assert total_a == 0  # one added, one removed: the totals balance across cells
    # a relabelled record under the same spec: same record id, another cell
    with Store.open(store) as s:
        rec = next(r for r in s.records(spec_hash=rs2.hash) if r.input["query"] == "Fasse die Ursachen des Ersten "
                                                                                   "Weltkriegs zusammen.")
        now = __import__("datetime").datetime.now()
        s.con.execute("INSERT INTO review_decisions VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                      [rec.id, "ann", "submitted", "reject", json.dumps([{"task": "Fasse die Ursachen des Ersten Weltkriegs zusammen", "category": "reasoning"}]),
                       True, None, "{}", now, now, "ds"])
    c = freeze(spec2, store_path=store, name="d", version="3", tokens=False)
    d2 = diff(b.path, c.path)
    assert d2["relabelled"] == [{"record_id": rec.id, "from": "general/trivial/de", "to": "reasoning/trivial/de"}]
    assert d2["changed_output"] == [rec.id] and not d2["added"] and not d2["removed"]
    assert diff(c.path, c.path)["identical"]


def test_classification_of_a_single_label_kind(lib, tmp_path):
    """Complexity labels pull as one ClassLabel per example; cells default to complexity x lang."""
    path = lib.write("cx", extra={
        "kind": "complexity", "output_schema": "../shared/schemas/complexity@1.json", "rules": None,
        "taxonomy": None, "tools": None,
        "prompt": {"file": "../shared/prompts/complexity@1.yaml",
                   "teacher": {"system": "Label the request.", "user": "{{ query }}"},
                   "training": {"system": "Label the request.", "user": "{{ query }}"}}})
    data = path.read_text().replace("rules: null\n", "").replace("taxonomy: null\n", "").replace("tools: null\n", "")
    path.write_text(data)
    rs = load_spec(path)
    labels = {q: {"complexity": "trivial" if t in ("general", "creative", "translation") else "moderate"}
              for q, _, t, _ in SEEDS}
    with Store.open(tmp_path / "store") as s:
        add_records(s, rs, plans=labels)
    res = freeze(path, store_path=tmp_path / "store", name="cx", version="1", tokens=False)
    assert res.manifest["cells"]["dims"] == ["complexity", "lang"]
    assert set(res.manifest["cells"]["balance"]) == {"moderate/de", "moderate/en", "trivial/de", "trivial/en"}
    ds = load_snapshot(res.path, "classification")
    feat = ds["train"].features["label"]
    # class ids come from the schema's enum, not from the two labels that occurred
    assert feat.names == ["trivial", "moderate", "complex", "memory_recall"]
    assert ds.label_info["label2id"] == {"trivial": 0, "moderate": 1, "complex": 2, "memory_recall": 3}
    assert ds.label_info["problem_type"] == "single_label_classification"
    got = {r["text"]: feat.names[r["label"]] for s in ds for r in ds[s]}
    assert got == {q: v["complexity"] for q, v in labels.items()}
