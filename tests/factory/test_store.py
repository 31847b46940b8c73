"""The store: migrations, refusal to touch stores it cannot own, and all-or-nothing batches."""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re
import subprocess
import sys
import textwrap
import time

import duckdb
import pytest

from mashbill.errors import StoreError
from mashbill.factory.records import Record, SpecRef, TeacherCall, Verdict
from mashbill.factory.store import DB_NAME, Store, decode_records, migrations
from tests.curation.revision import UNDO

REF = SpecRef("t", 1, "h" * 64)


def _rec(i: int, status="accepted") -> Record:
    return Record(f"id{i:04d}", "plan", {"query": f"q{i}"}, [{"task": "x", "category": "general"}], "[...]", REF,
                  status, ({"role": "system", "content": "s"}, {"role": "user", "content": f"q{i}"}), {"lang": "en"})


def _begin(store: Store) -> str:
    return store.begin_run(spec_name="t", spec_version=1, spec_hash=REF.hash, kind="plan", backend="test",
                           model="m", model_sha256=None, model_info=None, sampling={})


def test_new_store_is_migrated_and_reopens(tmp_path):
    with Store.open(tmp_path / "s") as store:
        assert store.schema_version == max(n for n, _, _ in migrations())
        run = _begin(store)
        store.write_batch(run, [_rec(1)], {"id0001": [Verdict("X001", "flag", "d")]},
                          [TeacherCall("id0001", "p", 1, "test", "m", 0.1, 10, 0, 5, "stop")])
    with Store.open(tmp_path / "s", read_only=True) as store:
        assert store.sql("SELECT count(*) n FROM records").to_pylist() == [{"n": 1}]
        [rec] = store.records()
        assert rec == _rec(1)


def test_a_validation_keeps_its_near_duplicate_clusters_under_how_it_found_them(tmp_path):
    """Migration 11: validation's clusters (record id -> the record id its cluster keeps) and how they were found;
    `near_groups` gives them only to a reader that groups the same way."""
    with Store.open(tmp_path / "s"):
        pass
    con = duckdb.connect(str(tmp_path / "s" / DB_NAME))  # the store as migration 10 left it
    for statement in UNDO[13] + UNDO[12] + UNDO[11]:
        con.execute(statement)
    con.execute("DELETE FROM schema_migrations WHERE version >= 11")
    con.close()
    with pytest.raises(StoreError, match=r"needs schema migrations \[11, 12, 13\]"):
        Store.open(tmp_path / "s", read_only=True)
    with Store.open(tmp_path / "s") as store:
        found = store.record_validation(spec_hash="h", source="store", results={"a": [], "b": [], "c": []}, counts={},
                                        near_groups={"a": "a", "b": "a", "c": "c"}, near_groups_profile="jaccard>=0.8")
        assert sorted(store.near_groups(found, "jaccard>=0.8").to_pylist(), key=lambda r: r["record_id"]) == [
            {"record_id": "a", "near_group": "a"}, {"record_id": "b", "near_group": "a"},
            {"record_id": "c", "near_group": "c"}]
        assert store.near_groups(found, "jaccard>=0.7") is None
        none = store.record_validation(spec_hash="h", source="store", results={"a": []}, counts={},
                                       near_groups_profile="jaccard>=0.8")  # no duplicate check ran: no clusters
        assert store.near_groups(none, "jaccard>=0.8") is None and store.near_groups("v-unknown", "x") is None


def test_only_the_primary_keys_are_indexed_and_an_older_store_loses_its_other_indexes(tmp_path):
    """Migration 10: every store query joins or scans in bulk (none is a point lookup an ART index serves), so the
    secondary indexes only slowed deletes and inserts; the primary keys, which keep a resumed run from storing a
    record twice, stay. A store made before it loses them when it is opened for writing."""
    def indexes(con) -> set[str]:
        return {n for (n,) in con.execute("SELECT index_name FROM duckdb_indexes()").fetchall()}

    def primary_keys(con) -> set[str]:
        return {t for (t,) in con.execute("SELECT table_name FROM duckdb_constraints() "
                                          "WHERE constraint_type = 'PRIMARY KEY'").fetchall()}

    with Store.open(tmp_path / "s") as store:
        assert indexes(store.con) == set()
        keys = primary_keys(store.con)
        assert {"records", "runs", "teacher_calls", "validation_runs", "record_attempts"} <= keys
    con = duckdb.connect(str(tmp_path / "s" / DB_NAME))  # the store as migrations 1-9 left it
    for statement in UNDO[13] + UNDO[12] + UNDO[11]:  # (later migrations undone too, before the indexes on columns)
        con.execute(statement)
    for name, table, column in (("records_spec", "records", "spec_hash"), ("verdicts_record", "verdicts", "record_id"),
                                ("teacher_calls_record", "teacher_calls", "record_id"),
                                ("record_validations_record", "record_validations", "record_id"),
                                ("review_decisions_record", "review_decisions", "record_id")):
        con.execute(f"CREATE INDEX {name} ON {table} ({column})")
    con.execute("DELETE FROM schema_migrations WHERE version >= 10")
    assert len(indexes(con)) == 5
    con.close()
    with pytest.raises(StoreError, match="needs schema migrations"):
        Store.open(tmp_path / "s", read_only=True)
    with Store.open(tmp_path / "s") as store:
        assert store.schema_version == max(n for n, _, _ in migrations())
        assert indexes(store.con) == set() and primary_keys(store.con) == keys


def test_batch_is_all_or_nothing(tmp_path):
    with Store.open(tmp_path / "s") as store:
        run = _begin(store)
        store.write_batch(run, [_rec(1)], {}, [])
        # The second batch repeats id0001 (a finished record): the primary key rejects it, and the
        # whole batch, including the new record and its verdicts, must roll back.
        with pytest.raises(duckdb.ConstraintException):
            store.write_batch(run, [_rec(2), _rec(1)], {"id0002": [Verdict("X", "reject")]}, [])
        assert store.sql("SELECT record_id FROM records").to_pylist() == [{"record_id": "id0001"}]
        assert store.sql("SELECT count(*) n FROM verdicts").to_pylist() == [{"n": 0}]


def test_failed_record_is_replaced_on_retry(tmp_path):
    with Store.open(tmp_path / "s") as store:
        run = _begin(store)
        store.write_batch(run, [_rec(1, "failed")], {"id0001": [Verdict("TEACHER001", "reject", "timeout")]}, [])
        assert store.finished_ids(REF.hash) == set()
        store.write_batch(run, [_rec(1)], {}, [])
        assert store.finished_ids(REF.hash) == {"id0001"}
        assert store.sql("SELECT status FROM records").to_pylist() == [{"status": "accepted"}]
        assert store.sql("SELECT count(*) n FROM verdicts").to_pylist() == [{"n": 0}]


def test_store_from_a_newer_schema_is_refused_untouched(tmp_path):
    with Store.open(tmp_path / "s") as store:
        store.con.execute("INSERT INTO schema_migrations VALUES (999, 'future', now())")
    db = tmp_path / "s" / DB_NAME
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    with pytest.raises(StoreError, match="newer than this mashbill"):
        Store.open(tmp_path / "s")
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_store_locked_by_another_writer(tmp_path):
    Store.open(tmp_path / "s").close()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from mashbill.factory.store import Store
        s = Store.open({str(tmp_path / 's')!r})
        print('ready', flush=True)
        time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match="locked by another process"):
            Store.open(tmp_path / "s")
    finally:
        holder.kill()
        holder.wait()


def test_unwritable_store_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match="cannot create store folder"):
        Store.open(blocker / "store")


def test_read_only_open_of_missing_store(tmp_path):
    with pytest.raises(StoreError, match="no store at"):
        Store.open(tmp_path / "nothing", read_only=True)
    assert not (tmp_path / "nothing").exists()


def test_kill_during_batches_never_leaves_a_partial_batch(tmp_path):
    """Kill -9 a writer in the middle of many 50-record batches; every batch is whole or absent."""
    script = textwrap.dedent(f"""
        import sys
        from mashbill.factory.records import Record, SpecRef, Verdict
        from mashbill.factory.store import Store
        ref = SpecRef("t", 1, "h" * 64)
        s = Store.open({str(tmp_path / 's')!r})
        run = s.begin_run(spec_name="t", spec_version=1, spec_hash=ref.hash, kind="plan", backend="test",
                          model="m", model_sha256=None, model_info=None, sampling={{}})
        for b in range(100000):
            recs = [Record(f"b{{b:06d}}-{{i:02d}}", "plan", {{"q": i}}, [], "x" * 2000, ref, "accepted",
                           ({{"role": "user", "content": "x" * 2000}},), {{}}) for i in range(50)]
            s.write_batch(run, recs, {{r.id: [Verdict("F", "flag")] for r in recs}}, [])
            if b == 2:
                print("ready", flush=True)
    """)
    rng = random.Random(7)
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0, 0.5))  # land anywhere: inside a transaction, between batches
        proc.kill()
        proc.wait()
        with Store.open(tmp_path / "s") as store:
            per_batch = store.sql("SELECT substr(record_id, 1, 7) b, count(*) n FROM records GROUP BY 1").to_pylist()
            assert per_batch and all(row["n"] == 50 for row in per_batch)
            verdicts = store.sql("SELECT count(*) n FROM verdicts").to_pylist()[0]["n"]
            records = store.sql("SELECT count(*) n FROM records").to_pylist()[0]["n"]
            assert verdicts == records
            # the next writer continues after the last whole batch
            store.con.execute("DELETE FROM records")
            store.con.execute("DELETE FROM verdicts")


def test_record_validation_replaces_earlier_validate_verdicts(tmp_path):
    with Store.open(tmp_path / "s") as store:
        run = _begin(store)
        store.write_batch(run, [_rec(1), _rec(2)], {"id0001": [Verdict("GEN", "flag", stage="generate")]}, [])
        store.record_validation(spec_hash=REF.hash, source="store", counts={"HR001": 1},
                                results={"id0001": [Verdict("HR001", "reject", "x", "validate")], "id0002": []})
        store.record_validation(spec_hash=REF.hash, source="store", counts={},
                                results={"id0001": [Verdict("HR002", "flag", "y", "validate")], "id0002": []})
        codes = store.sql("SELECT code FROM verdicts ORDER BY code").to_pylist()
        assert codes == [{"code": "GEN"}, {"code": "HR002"}]
        latest = store.sql("SELECT record_id, arg_max(passed, validated_at) passed, count(*) n "
                           "FROM record_validations GROUP BY 1 ORDER BY 1").to_pylist()
        assert [r["n"] for r in latest] == [2, 2] and all(r["passed"] for r in latest)


def test_transaction_stores_all_of_a_block_or_none_of_it(tmp_path):
    with Store.open(tmp_path / "s") as store:
        run = _begin(store)
        with pytest.raises(RuntimeError):
            with store.transaction() as con:
                con.execute("INSERT INTO events VALUES (?, now(), 'a', NULL)", [run])
                raise RuntimeError("stop half way")
        with store.transaction() as con:
            con.execute("INSERT INTO events VALUES (?, now(), 'b', NULL)", [run])
        assert store.sql("SELECT kind FROM events").to_pylist() == [{"kind": "b"}]


def test_a_failed_commit_is_one_store_error_not_cannot_rollback(tmp_path):
    """A COMMIT that fails ends the transaction itself (DuckDB then refuses ROLLBACK with "cannot rollback - no
    transaction is active"); the error names the store, and the store still works. The full-disk case, through
    the CLI, is in tests/factory/generate/test_generate_disk_full.py."""
    with Store.open(tmp_path / "s") as store:
        store.con.execute("CREATE TABLE u (k INTEGER PRIMARY KEY)")
        other = store.con.cursor()
        with pytest.raises(StoreError, match=r"mashbill\.duckdb: the commit failed, nothing of it was stored"):
            with store.transaction() as con:
                con.execute("INSERT INTO u VALUES (5)")
                other.execute("BEGIN")  # another transaction commits the same key first: our COMMIT fails
                other.execute("INSERT INTO u VALUES (5)")
                other.execute("COMMIT")
        other.close()
        assert store.con.execute("SELECT k FROM u").fetchall() == [(5,)]
        with store.transaction() as con:  # no transaction is left open
            con.execute("INSERT INTO u VALUES (6)")
        assert store.con.execute("SELECT count(*) FROM u").fetchall() == [(2,)]


def test_runs_of_a_dead_process_are_marked_interrupted_on_the_next_write_open(tmp_path):
    """kill -9 leaves a run 'running'; whoever next holds the write lock marks it interrupted, with its
    committed figures; a read-only open changes nothing, and this process's own running run is left alone."""
    path = tmp_path / "s"
    code = textwrap.dedent(f"""
        import os
        from mashbill.factory.records import Record, SpecRef, TeacherCall
        from mashbill.factory.store import Store
        s = Store.open({str(path)!r})
        run = s.begin_run(spec_name="t", spec_version=1, spec_hash="h" * 64, kind="plan", backend="test",
                          model="m", model_sha256=None, model_info=None, sampling={{}})
        rec = Record("id0001", "plan", {{"query": "q"}}, [], "[]", SpecRef("t", 1, "h" * 64), "accepted", (), {{}})
        s.write_batch(run, [rec], {{}}, [TeacherCall("id0001", "p", 1, "test", "m", 0.1, 10, 0, 5, "stop")])
        os._exit(0)  # dies without finishing the run, like kill -9
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
    with Store.open(path, read_only=True) as store:
        assert store.sql("SELECT status FROM runs").to_pylist() == [{"status": "running"}]
    with Store.open(path) as store:
        mine = _begin(store)
        [dead] = store.reaped
        rows = store.sql("SELECT run_id, status, accepted, calls, tokens_in, pid FROM runs ORDER BY run_id = ?",
                         [mine]).to_pylist()
        assert rows[0]["run_id"] == dead and rows[0]["status"] == "interrupted"
        assert (rows[0]["accepted"], rows[0]["calls"], rows[0]["tokens_in"]) == (1, 1, 10)
        assert rows[1]["status"] == "running"
        again = Store.open(path)  # the same process opening again leaves its own live run alone
        assert again.reaped == []
        again.close()
        [(detail,)] = store.con.execute("SELECT detail FROM events WHERE kind = 'interrupted'").fetchall()
        assert "ended without finishing the run" in detail


def test_a_stale_export_temporary_is_removed_when_the_store_is_opened_for_writing(tmp_path):
    with Store.open(tmp_path / "s") as store:
        run = _begin(store)
        store.write_batch(run, [_rec(1)], {}, [])
        final = store.export_parquet("t", 1, REF.hash)
    stale = final.parent / ".records.parquet.tmp-4242"  # a kill during an export leaves this (0 bytes)
    stale.write_bytes(b"")
    with Store.open(tmp_path / "s", read_only=True):
        assert stale.exists()  # a reader holds no lock, so it removes nothing
    Store.open(tmp_path / "s").close()
    assert sorted(p.name for p in final.parent.iterdir()) == ["records.parquet"]


@pytest.mark.parametrize("routed", [False, True], ids=["ranges", "routed"])
@pytest.mark.parametrize("part_rows, read_rows, batch_bytes, row_groups",
                         [(4, None, None, 6), (100, 5, 1, 5), (100, 5, None, 1), (None, None, None, 1)])
def test_an_export_holds_what_duckdbs_one_sorted_copy_holds(tmp_path, monkeypatch, part_rows, read_rows,
                                                             batch_bytes, row_groups, routed):
    """A spec's export, whole or in parts sorted on their own (one sort of every whole record ran out of memory
    under a cap, issue 29) and streamed in batches: the rows and values of DuckDB's own single sorted COPY, in
    record id order, with the table's NOT NULLs and JSON types; a row group per part, per batch when
    EXPORT_BATCH_BYTES is smaller than one batch, or per many batches; no temporary left behind. The same whether
    each part is read by a range of ids or the records are routed to their parts in one scan (in batches of 3,
    so that a part's records come from several batches, each holding several parts)."""
    import pyarrow.parquet as pq

    import mashbill.factory.store as store_module

    for name, value in (("EXPORT_PART_ROWS", part_rows), ("EXPORT_READ_ROWS", read_rows),
                        ("EXPORT_BATCH_BYTES", batch_bytes), ("EXPORT_RANGE_PARTS", 0 if routed else None),
                        ("EXPORT_ROUTE_ROWS", 3 if routed else None)):
        if value is not None:
            monkeypatch.setattr(store_module, name, value)
    with Store.open(tmp_path / "s") as store:
        run = _begin(store)
        recs = [_rec(i) for i in range(22)] + [dataclasses.replace(_rec(22, "failed"), output=None)]
        random.Random(7).shuffle(recs)  # stored out of id order
        store.write_batch(run, recs, {}, [])
        other = SpecRef("other", 1, "o" * 64)  # another spec's record stays out
        other_run = store.begin_run(spec_name="other", spec_version=1, spec_hash=other.hash, kind="plan",
                                    backend="test", model="m", model_sha256=None, model_info=None, sampling={})
        store.write_batch(other_run, [dataclasses.replace(_rec(99), spec=other)], {}, [])
        reference = tmp_path / "duckdb.parquet"
        store.con.execute(f"COPY (SELECT * EXCLUDE (sft_key) FROM records WHERE spec_hash = ? ORDER BY record_id) "
                          f"TO '{reference}' (FORMAT parquet)", [REF.hash])
        final = store.export_parquet("t", 1, REF.hash)
    whole, exported = pq.read_table(reference), pq.read_table(final)
    assert pq.ParquetFile(final).metadata.num_row_groups == row_groups
    assert exported.column_names == whole.column_names and exported.num_rows == whole.num_rows == 23
    for name in whole.column_names:  # the same values and types; nullability is the table's (below)
        assert exported.column(name).combine_chunks().equals(whole.column(name).combine_chunks()), name
    declared_null = {"output", "raw"}  # the records table's nullable columns that are exported
    assert {f.name for f in exported.schema if f.nullable} == declared_null
    assert {f.name for f in exported.schema if str(f.type) == "extension<arrow.json>"} == {
        "input", "output", "messages", "meta"}
    ids = exported.column("record_id").to_pylist()
    assert ids == sorted(ids)
    assert sorted(p.name for p in final.parent.iterdir()) == ["records.parquet"]


@pytest.mark.parametrize("routed", [False, True], ids=["ranges", "routed"])
def test_an_export_that_fails_midway_leaves_no_file_and_the_store_usable(tmp_path, monkeypatch, routed):
    """A write that fails after the first row group (a full disk) is one StoreError naming the file; no temporary is
    left (nor the spill file of records routed to their parts), the store's connection still runs statements (a
    half-read batch reader would hold it), and the next export writes the file."""
    import errno

    import pyarrow.parquet as pq

    import mashbill.factory.store as store_module

    monkeypatch.setattr(store_module, "EXPORT_READ_ROWS", 1)  # a row group per record: the reader is mid-way
    monkeypatch.setattr(store_module, "EXPORT_BATCH_BYTES", 1)
    if routed:
        monkeypatch.setattr(store_module, "EXPORT_RANGE_PARTS", 0)
        monkeypatch.setattr(store_module, "EXPORT_PART_ROWS", 4)
    real, calls = pq.ParquetWriter.write_table, []

    def fill_disk(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    with Store.open(tmp_path / "s") as store:
        store.write_batch(_begin(store), [_rec(i) for i in range(10)], {}, [])
        monkeypatch.setattr(pq.ParquetWriter, "write_table", fill_disk)
        try:
            store.export_parquet("t", 1, REF.hash)
            pytest.fail("the export did not fail")
        except StoreError as exc:  # asked while the failure's traceback (and what its frames hold) is alive
            assert re.search(r"cannot write the Parquet export .*records\.parquet: No space left", str(exc))
            assert store.con.execute("SELECT count(*) FROM records").fetchall() == [(10,)]
            assert list((tmp_path / "s" / "parquet" / "t@1").iterdir()) == []
            with pytest.raises(duckdb.CatalogException):  # the part being written is no longer registered
                store.con.execute("SELECT count(*) FROM _export_part")
        monkeypatch.setattr(pq.ParquetWriter, "write_table", real)
        assert pq.read_table(store.export_parquet("t", 1, REF.hash)).num_rows == 10


@pytest.mark.parametrize("damage", ["truncate", "lost_migration"])
def test_a_damaged_store_is_one_store_error(tmp_path, damage):
    with Store.open(tmp_path / "s") as store:
        store.write_batch(_begin(store), [_rec(i) for i in range(200)], {}, [])
    db = tmp_path / "s" / DB_NAME
    if damage == "truncate":
        with open(db, "r+b") as f:
            f.truncate(db.stat().st_size // 2)
        expected = r"is damaged or unreadable \("
    else:
        con = duckdb.connect(str(db))
        con.execute("DELETE FROM schema_migrations WHERE version = 3")
        con.close()
        expected = r"schema_migrations lacks version\(s\) \[3\]"
    with pytest.raises(StoreError, match=expected):
        Store.open(tmp_path / "s")


def test_long_prompts_are_stored_zstd_compressed_and_read_back_whole(tmp_path):
    """Every record's `messages` repeats a long system prompt; DuckDB's automatic dictionary+FSST choice spent
    ~10 s of a 100,000-record commit on it (bench/RESULTS.md). The writer's connection stores strings with zstd."""
    prompt = "You plan requests for an orchestrator. " * 100  # ~4 KB, as a plan spec's system prompt
    recs = [Record(f"id{i:05d}", "plan", {"query": f"q{i}"}, [{"task": "x"}], "[...]", REF, "accepted",
                   ({"role": "system", "content": prompt}, {"role": "user", "content": f"q{i}"}), {"lang": "en"})
            for i in range(3000)]
    with Store.open(tmp_path / "s") as store:
        store.write_batch(_begin(store), recs, {}, [])
        store.con.execute("CHECKPOINT")
        kinds = {c for c, in store.con.execute("SELECT DISTINCT compression FROM pragma_storage_info('records') "
                                                "WHERE column_name = 'messages' AND segment_type = 'JSON'").fetchall()}
    assert kinds == {"ZSTD"}
    with Store.open(tmp_path / "s", read_only=True) as store:
        assert store.records()[2999] == recs[2999]


def test_record_batches_read_what_records_reads_in_windows_of_the_tables_order(tmp_path):
    """A pass over a large store holds one batch: the batches, joined, are ``records`` with the same filters, each
    record once; each batch is sorted by id and holds the records written after those of the batch before it (the
    table's order, which a window of row ids reads without scanning the rest of the table)."""
    other = SpecRef("t", 1, "o" * 64)
    recs = [_rec(i, "rejected" if i % 3 == 0 else "accepted") for i in random.Random(5).sample(range(40), 23)]
    recs.insert(11, Record("id9999", "plan", {"query": "x"}, None, "{", other, "accepted", (), {}))
    written = {r.id: at for at, r in enumerate(recs)}
    with Store.open(tmp_path / "s") as store:
        store.write_batch(_begin(store), recs[:15], {}, [])
        store.write_batch(_begin(store), recs[15:], {}, [])
        for filters in ({}, {"spec_hash": REF.hash}, {"spec_hash": REF.hash, "status": "accepted"},
                        {"status": "rejected"}):
            whole = store.records(**filters)
            assert whole and whole == sorted(whole, key=lambda r: r.id)
            for size in (1, 2, 7, len(whole), 1000):
                batches = list(store.record_batches(**filters, batch_size=size))
                assert sorted((r for b in batches for r in b), key=lambda r: r.id) == whole, (filters, size)
                assert all(0 < len(b) <= size for b in batches)
                assert all([r.id for r in b] == sorted(r.id for r in b) for b in batches)
                spans = [(min(written[r.id] for r in b), max(written[r.id] for r in b)) for b in batches]
                assert all(last < first for (_, last), (first, _) in zip(spans, spans[1:])), (filters, size)
            raw = list(store.record_batches(**filters, batch_size=3, decoded=False))
            assert [decode_records(b) for b in raw] == list(store.record_batches(**filters, batch_size=3))
        assert list(store.record_batches(spec_hash="n" * 64)) == []


def test_record_batches_fail_in_one_line_when_the_table_changes_under_them(tmp_path):
    """Row ids are read once: a record deleted between two batches is named as a changed table, not skipped."""
    recs = [_rec(i, "accepted") for i in range(6)]
    with Store.open(tmp_path / "s") as store:
        store.write_batch(_begin(store), recs, {}, [])
        batches = store.record_batches(batch_size=3)
        first = next(batches)
        store.con.execute("DELETE FROM records WHERE record_id = ?", [recs[-1].id])
        with pytest.raises(StoreError, match=r"records table changed while it was read .* held 2 of the 3"):
            next(batches)
    assert [r.id for r in first] == [r.id for r in recs[:3]]


def _temp_tables(store: Store) -> list[str]:
    return [t for (t,) in store.con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()]


def test_record_batches_with_checks_give_each_batch_the_checks_kept_for_its_records(tmp_path):
    """Each batch of rows comes with the own checks kept for its records under one spec hash and checks profile,
    kept in another order than the records; checks under another profile, for another spec hash or for records the
    filter leaves out stay out. The temporary table the reader joins them in is gone once it ends,
    read to the end or not, and a read-only store is read the same way."""
    other = SpecRef("t", 1, "o" * 64)
    recs = [_rec(i, "rejected" if i % 4 == 0 else "accepted") for i in random.Random(7).sample(range(40), 25)]
    recs.insert(9, Record("id9999", "plan", {"query": "x"}, None, "{", other, "accepted", (), {}))
    with Store.open(tmp_path / "s") as store:
        store.write_batch(_begin(store), recs[:12], {}, [])
        store.write_batch(_begin(store), recs[12:], {}, [])
        kept = {r.id: f'{{"n": {i}}}' for i, r in enumerate(recs) if i % 3 != 1 and r.spec is REF}
        store.keep_record_checks(REF.hash, "p", sorted(kept.items(), reverse=True))
        store.keep_record_checks(REF.hash, "q", [(r.id, "{}") for r in recs if r.spec is REF and r.id not in kept])
        store.keep_record_checks(other.hash, "p", [("id9999", "{}")])
    with Store.open(tmp_path / "s", read_only=True) as store:
        for status in (None, "accepted"):
            rows = [r[0] for b in store.record_batches(spec_hash=REF.hash, status=status, decoded=False) for r in b]
            assert rows
            for size in (1, 4, len(rows)):
                batches = list(store.record_batches_with_checks(REF.hash, "p", status, batch_size=size))
                assert [r for b, _ in batches for r in b] == [r for b in store.record_batches(
                    spec_hash=REF.hash, status=status, batch_size=size, decoded=False) for r in b]
                assert all(found == {r[0]: kept[r[0]] for r in b if r[0] in kept} for b, found in batches)
                assert sum(len(found) for _, found in batches) == sum(1 for i in rows if i in kept) > 0
                assert _temp_tables(store) == []
        reader = store.record_batches_with_checks(REF.hash, "p", batch_size=2)
        next(reader)
        assert len(_temp_tables(store)) == 1
        reader.close()
        assert _temp_tables(store) == []
        assert [f for _, f in store.record_batches_with_checks(REF.hash, "none")] == [{}]


def test_the_store_takes_a_memory_limit_from_the_environment(tmp_path, monkeypatch):
    """MASHBILL_STORE_MEMORY caps DuckDB's memory for a store connection (DuckDB's default is 80% of RAM: a
    million-record merge held 5.5 GB); unset, the store keeps DuckDB's own default (what `mashbill --help` says);
    a value that is not a size is one clear error naming the variable."""
    monkeypatch.delenv("MASHBILL_STORE_MEMORY", raising=False)
    default = duckdb.connect().execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    with Store.open(tmp_path / "s") as store:
        assert store.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0] == default
    monkeypatch.setenv("MASHBILL_STORE_MEMORY", "512MB")
    with Store.open(tmp_path / "s") as store:
        assert store.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0] == "488.2 MiB"
    monkeypatch.setenv("MASHBILL_STORE_MEMORY", "lots")
    with pytest.raises(StoreError, match="MASHBILL_STORE_MEMORY='lots' is not a size"):
        Store.open(tmp_path / "s", read_only=True)


def _kept_checks(store: Store) -> dict[str, str]:
    return {k: v for _, found in store.record_batches_with_checks(REF.hash, "p") for k, v in found.items()}


def test_a_retried_failed_record_loses_the_own_checks_kept_of_its_failed_copy(tmp_path):
    """`validate --per-record --all` may keep checks of a failed record; the retry that replaces the record has
    other content, so its kept checks go with the failed copy (and a validation checks the new one itself)."""
    with Store.open(tmp_path / "s") as store:
        run = _begin(store)
        store.write_batch(run, [_rec(1, "failed"), _rec(2, "accepted")], {}, [])
        store.keep_record_checks(REF.hash, "p", [("id0001", "{}"), ("id0002", "{}")])
        assert _kept_checks(store) == {"id0001": "{}", "id0002": "{}"}
        store.write_batch(run, [_rec(1, "accepted")], {}, [])
        assert _kept_checks(store) == {"id0002": "{}"}
        assert store.record_checks_held(REF.hash) == {"p": 1}


def test_records_keep_their_example_key_from_migration_13_and_older_ones_have_none(tmp_path):
    """Migration 13: each record written keeps its example key (`sft_key`, what a freeze keys its training example
    by); records written before it have none (a freeze computes theirs from the stored prompt)."""
    from mashbill.curation.snapshots.snapshot_examples import example_key
    from mashbill.hashing import canonical_json

    with Store.open(tmp_path / "s") as store:
        store.write_batch(_begin(store), [_rec(1)], {}, [])
    con = duckdb.connect(str(tmp_path / "s" / DB_NAME))  # the store as migration 12 left it
    for statement in UNDO[13]:
        con.execute(statement)
    con.execute("DELETE FROM schema_migrations WHERE version >= 13")
    con.close()
    with Store.open(tmp_path / "s") as store:
        store.write_batch(_begin(store), [_rec(2)], {}, [])
        kept = dict(store.con.execute("SELECT record_id, sft_key FROM records").fetchall())
    new = _rec(2)
    assert kept == {_rec(1).id: None, new.id: example_key("sft", list(new.messages), canonical_json(new.output))}


def test_loads_many_decodes_each_text_as_json_loads_does(monkeypatch):
    """Chunks of short values are decoded as one JSON array, chunks of long ones (a prompt) value by value: either
    way each text comes back as json.loads gives it, None as None, across chunk boundaries."""
    import json
    import random

    import mashbill.factory.store as store_module

    rng = random.Random(7)
    pieces = ['"q"', "1", "-0.5e3", "true", "null", "[]", "{}", '{"a": [1, {"b": "\\u00e9\\n"}]}', '"\\ud83d\\ude00"',
              '"tab\\tquote\\"back\\\\slash"', '"Köln 東京"']
    short = [rng.choice(pieces) for _ in range(500)] + [None] * 20
    long = [json.dumps([{"role": "system", "content": "x" * rng.randint(1500, 3000)},
                        {"role": "user", "content": rng.choice(pieces)}]) for _ in range(300)] + [None] * 5
    calls = []
    real_loads = json.loads
    monkeypatch.setattr(store_module.json, "loads", lambda t: calls.append(len(t)) or real_loads(t))
    for texts in (short, long, short + long):
        rng.shuffle(texts)
        calls.clear()
        got = store_module.loads_many(texts, chunk=97)
        assert got == [None if t is None else real_loads(t) for t in texts]
        if texts is short:
            assert len(calls) == -(-len(texts) // 97)  # one parser call a chunk
        elif texts is long:
            assert len(calls) == sum(t is not None for t in texts)  # one a value


def test_text_with_a_lone_surrogate_is_kept_as_u_fffd_not_a_failed_write(tmp_path):
    """A teacher's text, a call's error, a verdict's detail or a reviewer's answer may hold a lone surrogate (an escape
    in a server's JSON reply): no UTF-8 form exists for one, and the write raised UnicodeEncodeError."""
    from datetime import datetime

    with Store.open(tmp_path / "s") as store:
        run = _begin(store)
        rec = dataclasses.replace(_rec(1, "rejected"), raw='{"a": "\ud800"}')
        call = TeacherCall("id0001", "p" * 64, 1, "openai", "m", 0.1, 10, 0, 5, "stop", "bad \udc00 body")
        store.write_batch(run, [rec], {"id0001": [Verdict("PARSE001", "reject", "not JSON: \ud800")]}, [call])
        when = datetime(2026, 12, 5)
        store.write_review_decisions([{
            "record_id": "id0001", "reviewer": "ann", "status": "submitted", "decision": "reject",
            "corrected_output": None, "correction_valid": None, "correction_issues": None,
            "response_values": '{"comment": "see \ud83d"}', "responded_at": when, "pulled_at": when, "dataset": "d"}])
        assert store.sql("SELECT raw FROM records").to_pylist() == [{"raw": '{"a": "\ufffd"}'}]
        assert store.sql("SELECT error FROM teacher_calls").to_pylist() == [{"error": "bad \ufffd body"}]
        assert store.sql("SELECT detail FROM verdicts").to_pylist() == [{"detail": "not JSON: \ufffd"}]
        assert [r["response_values"] for r in store.review_rows(record_ids=["id0001"])] == ['{"comment": "see \ufffd"}']
