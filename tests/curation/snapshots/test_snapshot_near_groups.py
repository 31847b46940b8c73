"""Validation keeps each record's near-duplicate cluster (the record id its cluster keeps) and how it found them; a
freeze that would find its groups the same way reads them instead of finding every cluster again (issue 29), and
writes the bytes a freeze that finds them writes. Where it would not (another threshold, no duplicate check, records
from several validation runs), it finds them itself."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

import mashbill.curation.snapshots.snapshot_split as snapshot_split
from mashbill.curation.snapshots.snapshot import freeze
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from mashbill.validators.data.dedup import groups_profile
from mashbill.validators.run_store import spec_options, validate_spec_records
from tests.curation.conftest import SEEDS, add_records
from tests.curation.revision import same_snapshot

TETRIS = ("Write a Tetris game in Python with pygame.", "Please write a Tetris game in Python with pygame.")


@pytest.fixture
def validated(lib, tmp_path):
    spec = lib.write("plan-a", seeds=SEEDS)
    rs = load_spec(spec)
    with Store.open(tmp_path / "s") as store:
        add_records(store, rs, validate=False)
        validate_spec_records(rs, store, spec_options(rs, audit_sample=4))
    return spec, rs, tmp_path / "s"


def _groups(store_path) -> tuple[dict[str, str], dict[str, str], list]:
    with Store.open(store_path, read_only=True) as store:
        groups = dict(store.con.execute("SELECT record_id, near_group FROM record_validations").fetchall())
        queries = {r.id: r.input["query"] for r in store.records()}
        kept = store.con.execute("SELECT record_id, detail FROM verdicts WHERE code IN ('DUP001', 'DUP002')").fetchall()
        profiles = [p for (p,) in store.con.execute("SELECT near_groups_profile FROM validation_runs").fetchall()]
    return groups, queries, kept, profiles


def _sides(snap) -> dict[str, str]:
    return {rid: f.stem for f in (snap / "data").glob("*.parquet")
            for rid in pq.read_table(f, columns=["record_id"]).column("record_id").to_pylist()}


@pytest.fixture
def finds_clusters(monkeypatch):
    """Counts the freezes that found their near-duplicate clusters themselves."""
    calls = []
    real = snapshot_split.near_duplicate_clusters

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshot_split, "near_duplicate_clusters", spy)
    return calls


def test_validation_keeps_each_records_cluster_as_its_duplicate_verdicts_name_it(validated):
    _, rs, store_path = validated
    groups, queries, kept, profiles = _groups(store_path)
    assert profiles == [groups_profile(0.8)]
    assert set(groups) == set(queries)
    by_query = {q: rid for rid, q in queries.items()}
    first, second = sorted(by_query[q] for q in TETRIS)
    assert groups[first] == groups[second] == first  # the smaller id is kept, as DUP002 says
    [(dup, detail)] = [(r, d) for r, d in kept if r in (first, second)]
    assert dup == second and detail.endswith(f"kept {first}")
    # an exact duplicate (DUP001) joins its original's cluster, a near one (DUP002) the one it names; no other record
    # is in a cluster of two
    assert {rid: g for rid, g in groups.items() if g != rid} == {r: detail.split()[-1] for r, detail in kept}
    assert len(kept) == 2


def test_the_freeze_reads_the_clusters_and_writes_the_bytes_it_would_find(validated, tmp_path, finds_clusters):
    spec, _, store_path = validated
    read = freeze(spec, store_path=store_path, name="snap", version="1", out_dir=tmp_path / "read")
    assert finds_clusters == []
    assert set(_sides(read.path).values()) == {"train", "eval", "test"}  # (so one side for a cluster is no accident)
    with Store.open(store_path) as store:  # clusters found another way: found afresh
        store.con.execute("UPDATE validation_runs SET near_groups_profile = 'another'")
    found = freeze(spec, store_path=store_path, name="snap", version="1", out_dir=tmp_path / "found")
    assert finds_clusters == [1]
    assert same_snapshot(read.path, found.path) == []


def test_the_split_keeps_a_stored_cluster_on_one_side(validated, tmp_path, finds_clusters):
    spec, _, store_path = validated
    groups, *_ = _groups(store_path)
    ids = sorted(groups)
    with Store.open(store_path) as store:  # two clusters, by record id rather than by text
        store.con.execute("UPDATE record_validations SET near_group = CASE WHEN record_id < ? THEN ? ELSE ? END",
                          [ids[len(ids) // 2], ids[0], ids[len(ids) // 2]])
    snap = freeze(spec, store_path=store_path, name="snap", version="1", out_dir=tmp_path / "two")
    sides = _sides(snap.path)
    assert finds_clusters == [] and len(sides) == len(ids) - 1  # the exact duplicate is rejected
    low = {sides[r] for r in ids[:len(ids) // 2] if r in sides}
    high = {sides[r] for r in ids[len(ids) // 2:] if r in sides}
    assert len(low) == 1 and len(high) == 1


@pytest.mark.parametrize("case", ["another threshold", "no duplicate check", "two validation runs"])
def test_where_validation_clustered_otherwise_the_freeze_finds_the_clusters(lib, tmp_path, finds_clusters, case):
    spec = lib.write("plan-a", seeds=SEEDS, **({"curation": {"near_duplicate_threshold": 0.7}}
                                                if case == "another threshold" else {}))
    rs = load_spec(spec)
    with Store.open(tmp_path / "s") as store:
        add_records(store, rs, validate=False)
        opts = spec_options(rs, audit_sample=4, dedup=case != "no duplicate check")
        validate_spec_records(rs, store, opts)
        if case == "two validation runs":  # the latest marks of half the records come from a second run
            ids = sorted(r.id for r in store.records())[: len(SEEDS) // 2]
            marks = store.con.execute("SELECT record_id, passed FROM record_validations").fetchall()
            store.record_validation(spec_hash=rs.hash, source="store", counts={},
                                    results={rid: [] for rid, passed in marks if rid in ids and passed})
    snap = freeze(spec, store_path=tmp_path / "s", name="snap", version="1", out_dir=tmp_path / "snap")
    assert finds_clusters == [1]
    sides = _sides(snap.path)
    with Store.open(tmp_path / "s", read_only=True) as store:
        by_query = {r.input["query"]: r.id for r in store.records()}
    assert sides[by_query[TETRIS[0]]] == sides[by_query[TETRIS[1]]]
