"""Sharded runs (`generate --shard i/n --store shard_i`) and `mashbill merge`: the merged store equals
an unsharded run; overlaps are verified (identical copies kept once, different copies refused)."""

from __future__ import annotations

import json

import duckdb
import pytest
from teacher_helpers import records, run_cli, sql, tag

from mashbill.cli.make.generate import run_generate
from mashbill.errors import StoreError
from mashbill.factory.shards import MergeConflict, merge_stores

N = 30


def shards(spec, tmp_path, url, n=3, prefix="shard"):
    paths = []
    for i in range(n):
        path = tmp_path / f"{prefix}_{i}"
        run_generate(str(spec), path, shard=(i, n), progress=False, base_url=url)
        paths.append(path)
    return paths


def test_merged_shards_equal_the_unsharded_run(write_spec, fault_server, tmp_path):
    server = fault_server()
    spec = write_spec(n=N)
    full = tmp_path / "full"
    run_generate(str(spec), full, progress=False, base_url=server.url)
    parts = shards(spec, tmp_path, server.url)
    sizes = [len(records(p)) for p in parts]
    assert sum(sizes) == N and all(sizes)  # a partition: every record in exactly one shard

    out = tmp_path / "merged"
    proc = run_cli("merge", out, *parts, "--require-complete", "--json", check=True)
    report = json.loads(proc.stdout)
    assert report["inserted"] == N and report["identical"] == 0 and report["runs"] == 3
    assert report["specs"]["fault-plan@1"]["missing"] == [] and report["specs"]["fault-plan@1"]["shards"] == 3
    assert records(out) == records(full)
    assert sql(out, "SELECT count(*) FROM teacher_calls")[0][0] == N
    assert sorted(s for s, in sql(out, "SELECT shard FROM runs")) == ["0/3", "1/3", "2/3"]
    assert (out / "parquet" / "fault-plan@1" / "records.parquet").is_file()

    again = merge_stores(out, parts)  # idempotent
    assert (again.inserted, again.identical, again.runs) == (0, N, 0)
    assert sql(out, "SELECT count(*) FROM records")[0][0] == N
    assert sql(out, "SELECT count(*) FROM teacher_calls")[0][0] == N


def test_missing_shards_warn_or_fail(write_spec, fault_server, tmp_path):
    server = fault_server()
    parts = shards(write_spec(n=N), tmp_path, server.url)
    report = merge_stores(tmp_path / "partial", parts[:2])
    assert report.warnings == ["fault-plan@1: shard(s) 2/3 of 3 not among the merged stores"]
    proc = run_cli("merge", tmp_path / "strict", *parts[:2], "--require-complete")
    assert proc.returncode == 2 and "shard(s) 2/3 of 3 not among the merged stores" in proc.stderr


def test_identical_copies_are_kept_once_and_different_copies_refused(write_spec, fault_server, tmp_path):
    good = fault_server()
    spec = write_spec(n=N)
    a = shards(spec, tmp_path, good.url, n=2, prefix="a")
    b = shards(spec, tmp_path, good.url, n=2, prefix="b")  # the same shards again, the same answers
    report = merge_stores(tmp_path / "twice", [a[0], b[0], a[1]])
    assert report.inserted == N and report.sources[1]["identical"] == len(records(b[0]))

    bad = fault_server(schedule=lambda key, attempt: "schema" if tag(key) is not None else None)
    c0 = tmp_path / "c_0"
    run_generate(str(spec), c0, shard=(0, 2), progress=False, base_url=bad.url)  # same ids, different answers
    out = tmp_path / "conflict"
    proc = run_cli("merge", out, a[0], c0)
    assert proc.returncode == 2
    assert "stored with different content in more than one store (nothing was merged)" in proc.stderr
    assert not out.exists()  # a refused merge into a new folder leaves no half-made store
    merged = tmp_path / "merged"
    merge_stores(merged, a)
    with pytest.raises(MergeConflict):  # a conflict with what the output store already holds
        merge_stores(merged, [c0])
    assert records(merged) == {**records(a[0]), **records(a[1])}


def test_a_failed_copy_is_replaced_by_a_finished_one(write_spec, fault_server, tmp_path):
    server = fault_server(schedule=lambda key, attempt: "500" if tag(key) == 3 and attempt == 1 else None)
    spec = write_spec(n=N, runtime={"max_retries": 0})
    parts = shards(spec, tmp_path, server.url, n=2)
    out = tmp_path / "merged"
    merge_stores(out, parts)
    assert sql(out, "SELECT count(*) FROM records WHERE status = 'failed'")[0][0] == 1
    owner = next(p for p in parts if any(s == "failed" for s, _, _ in records(p).values()))
    run_generate(str(spec), owner, shard=(parts.index(owner), 2), progress=False, base_url=server.url)  # resume
    report = merge_stores(out, parts)
    assert report.replaced == 1 and report.inserted == 0
    assert {s for s, _, _ in records(out).values()} == {"accepted"}
    assert sql(out, "SELECT count(*) FROM verdicts WHERE code = 'TEACHER001'")[0][0] == 0


def test_records_outside_their_shard_and_bad_arguments_are_refused(write_spec, fault_server, tmp_path):
    server = fault_server()
    parts = shards(write_spec(n=N), tmp_path, server.url, n=2)
    con = duckdb.connect(str(parts[0] / "mashbill.duckdb"))
    con.execute("UPDATE runs SET shard = '1/2'")  # a store reused with a different --shard
    con.close()
    with pytest.raises(MergeConflict, match="belongs to shard 0/2"):
        merge_stores(tmp_path / "m1", parts)
    with pytest.raises(StoreError, match="also given as a shard"):
        merge_stores(parts[1], [parts[1]])
    with pytest.raises(StoreError, match="given twice"):
        merge_stores(tmp_path / "m2", [parts[1], parts[1]])
    with pytest.raises(StoreError, match="no store at"):
        merge_stores(tmp_path / "m3", [tmp_path / "nothing"])

