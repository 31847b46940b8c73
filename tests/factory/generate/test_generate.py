"""Generate with the real embedded model into a real DuckDB store."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time

import pytest

from mashbill.errors import StoreError
from mashbill.factory.generate.generate import generate, parse_output, select_inputs
from mashbill.factory.store import Store
from mashbill.factory.teachers import make_teacher
from mashbill.specs import load_spec
from tests.conftest import MASHBILL, run_cli


@pytest.fixture(scope="module")
def teacher():
    from mashbill.specs.model import TeacherSpec

    t = make_teacher(TeacherSpec(), threads=2)
    yield t
    t.close()


def test_every_record_is_stored_with_spec_hash_and_codes(tiny_specs, tmp_path, teacher):
    rs = load_spec(tiny_specs / "tiny" / "tiny-plan@1.yaml")
    with Store.open(tmp_path / "s") as store:
        summary = generate(rs, store, teacher)
        assert summary.requested == 12 and summary.accepted + summary.rejected + summary.failed == 12
        rows = store.sql("SELECT r.record_id, r.status, r.spec_hash, r.raw, r.output, "
                         "list(v.code) FILTER (WHERE v.severity = 'reject') codes "
                         "FROM records r LEFT JOIN verdicts v USING (record_id) GROUP BY ALL").to_pylist()
        assert len(rows) == 12
        for row in rows:
            assert row["spec_hash"] == rs.hash
            assert row["raw"] is not None  # the teacher's text is always kept
            if row["status"] == "rejected":
                assert row["codes"], row
            else:
                assert row["status"] == "accepted" and not row["codes"] and row["output"] is not None
        calls = store.sql("SELECT count(*) n, sum(prompt_tokens) p, sum(cached_tokens) c, "
                          "count(finish_reason) f FROM teacher_calls").to_pylist()[0]
        assert calls["n"] == 12 and calls["f"] == 12 and calls["p"] > 0
        assert calls["c"] > 0  # the shared system prompt was reused from the KV cache
        run = store.sql("SELECT * FROM runs").to_pylist()[0]
        assert run["status"] == "completed" and run["accepted"] == summary.accepted
        assert json.loads(run["model_info"])["sha256"] == teacher.info()["sha256"]
        # a re-run does no teacher work and stores nothing new
        again = generate(rs, store, teacher)
        assert again.requested == 0 and again.skipped == 12
        assert store.sql("SELECT count(*) n FROM records").to_pylist() == [{"n": 12}]
    assert (tmp_path / "s" / "parquet" / "tiny-plan@1" / "records.parquet").is_file()


def test_malformed_teacher_output_is_a_reject_with_a_code(tiny_specs, tmp_path, teacher):
    """Unconstrained, the 135M model rarely writes valid JSON: each miss is stored with its code and text."""
    spec = tiny_specs / "tiny" / "tiny-plan@1.yaml"
    spec.write_text(spec.read_text().replace("teacher:\n  sampling:", "teacher:\n  constrained: false\n  sampling:"))
    rs = load_spec(spec)
    with Store.open(tmp_path / "s") as store:
        summary = generate(rs, store, teacher, limit=6)
        assert summary.rejected >= 1
        rejects = store.sql("SELECT r.raw, v.code FROM records r JOIN verdicts v USING (record_id) "
                            "WHERE r.status = 'rejected' AND v.severity = 'reject'").to_pylist()
        assert rejects and all(r["code"] in {"PARSE001", "PARSE002", "SCHEMA001", "TRUNC001"} for r in rejects)
        assert all(r["raw"] is not None for r in rejects)


def test_parse_output_codes():
    import jsonschema

    v = jsonschema.Draft202012Validator({"type": "object", "required": ["a"]})
    assert parse_output('{"a": 1}', "stop", v) == ({"a": 1}, [])
    assert [x.code for x in parse_output("nope", "stop", v)[1]] == ["PARSE001"]
    assert [x.code for x in parse_output("  ", "stop", v)[1]] == ["PARSE002"]
    assert [x.code for x in parse_output('{"b": 1}', "stop", v)[1]] == ["SCHEMA001"]
    out, verdicts = parse_output('{"a": ', "length", v)
    assert out is None and [x.code for x in verdicts] == ["TRUNC001", "PARSE001"]


@pytest.mark.parametrize("text,finish,codes,detail", [
    ("[" * 5000, "length", ["TRUNC001", "PARSE001"], "nested deeper than 64 levels at char 64"),
    ('{"a": ' + "[" * 70 + "1" + "]" * 70 + "}", "stop", ["PARSE001"], "nested deeper than 64 levels at char 69"),
    ("1" * 5000, "length", ["TRUNC001", "PARSE001"], "an integer of more than 4,300 digits at char 0"),
    ('{"a": NaN}', "stop", ["PARSE001"], "NaN is not JSON at char 6"),
    ('{"a": "NaN", "b": -Infinity}', "stop", ["PARSE001"], "-Infinity is not JSON at char 18"),
    ('{"a": 1e400}', "stop", ["PARSE001"], "1e400 is too large for a number at char 6"),
    ('{"a": "\\ud83d\\ude00 \\ud800"}', "stop", ["PARSE001"],
     "holds a lone surrogate (\\ud800), which no UTF-8 text can hold at char 20"),
    ('{"a": "\ud800"}', "stop", ["PARSE001"], "holds a lone surrogate (\\ud800), which no UTF-8 text can hold at char 7"),
], ids=["brackets", "deep", "digits", "nan", "infinity", "1e400", "escaped-surrogate", "surrogate"])
def test_runaway_answers_are_rejects_not_crashes(text, finish, codes, detail):
    """What a small model stuck in a loop writes (or a hostile server sends) is a reject with a code: Python's JSON
    reader would raise RecursionError or ValueError on it, or read NaN, which the store's JSON refuses."""
    import jsonschema

    v = jsonschema.Draft202012Validator({"type": "object"})
    out, verdicts = parse_output(text, finish, v)
    assert out is None and [x.code for x in verdicts] == codes
    assert verdicts[-1].detail == f"not JSON: {detail}"


def test_a_run_of_runaway_answers_completes_with_every_record_stored(write_spec, fault_server, tmp_path):
    from fault_server import RUNAWAY
    from teacher_helpers import sql, tag

    from mashbill.cli.make.generate import run_generate
    from mashbill.jsontext import storable

    server = fault_server(schedule=lambda key, attempt: "runaway" if tag(key) is not None else None)
    spec = write_spec(n=30)
    summary = run_generate(str(spec), tmp_path / "s", progress=False, base_url=server.url)
    assert summary.status == "completed" and summary.rejected == 30
    rows = sql(tmp_path / "s", "SELECT r.raw, v.detail FROM records r JOIN verdicts v USING (record_id) "
                               "WHERE v.severity = 'reject' AND v.code = 'PARSE001'")
    # every shape came, each stored (a lone surrogate as U+FFFD: no UTF-8 encoding exists for it) with its reason
    assert len(rows) == 30 and {raw for raw, _ in rows} == {storable(text) for text, _ in RUNAWAY}
    assert {d.split(" at char")[0] for _, d in rows} == {
        "not JSON: nested deeper than 64 levels", "not JSON: an integer of more than 4,300 digits",
        "not JSON: NaN is not JSON", "not JSON: holds a lone surrogate (\\ud800), which no UTF-8 text can hold"}


def test_shards_partition_the_inputs(tiny_specs):
    rs = load_spec(tiny_specs / "tiny" / "tiny-plan@1.yaml")
    everything = {rid for rid, _ in select_inputs(rs)}
    parts = [{rid for rid, _ in select_inputs(rs, shard=(i, 3))} for i in range(3)]
    assert set().union(*parts) == everything and sum(map(len, parts)) == len(everything)


def _state(store_path) -> dict:
    if not (store_path / "mashbill.duckdb").exists():
        return {}
    try:
        with Store.open(store_path, read_only=True) as store:
            rows = store.sql("SELECT record_id, status, raw, output FROM records").to_pylist()
    except StoreError as exc:  # killed while creating the store: no run began, so no record can exist yet
        assert "needs schema migrations" in str(exc), exc
        return {}
    return {r["record_id"]: r for r in rows}


def test_resume_after_kill_9_loses_nothing_and_duplicates_nothing(tiny_specs, tmp_path):
    spec = tiny_specs / "tiny" / "tiny-plan@1.yaml"
    store = tmp_path / "s"
    args = [*MASHBILL, "generate", str(spec), "--store", str(store), "--no-progress", "--threads", "1",
            "--allow-unlocked"]
    rng = random.Random(11)
    seen: dict = {}
    kills_mid_run = 0
    wal = store / "mashbill.duckdb.wal"  # grows with every commit until a clean close checkpoints it

    def wal_size() -> int:
        return wal.stat().st_size if wal.exists() else 0

    for attempt in range(12):
        low = wal_size()
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if attempt < 10:
            # kill after a random amount of committed work (the write-ahead log's growth), not after a random
            # time: a loaded machine slows the run, never moves the kill before the first batch. Growth counts
            # from the smallest size seen, since opening the store replays and truncates a killed run's log;
            # a batch of the tiny spec adds about 4.5 kB, the run row about 2 kB.
            grow = rng.uniform(4_000, 14_000)
            deadline = time.monotonic() + 600
            while proc.poll() is None and time.monotonic() < deadline:
                size = wal_size()
                low = min(low, size)
                if size - low >= grow:
                    break
                time.sleep(0.02)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        proc.wait()
        now = _state(store)
        for rid, row in seen.items():  # nothing stored earlier is lost or changed
            assert now.get(rid) == row
        if proc.returncode == -signal.SIGKILL and 0 < len(now) < 12:
            kills_mid_run += 1
        seen = now
        if proc.returncode == 0:
            break
    assert proc.returncode == 0, proc.stderr
    assert kills_mid_run >= 2, "fewer than two kills landed mid-run; the test proves nothing"
    final = run_cli("generate", spec, "--store", store, "--no-progress", "--json", "--allow-unlocked", check=True)
    summary = json.loads(final.stdout)
    assert summary["requested"] == 0  # all done already
    rs = load_spec(spec)
    expected = {rid for rid, _ in select_inputs(rs)}
    with Store.open(store, read_only=True) as s:
        ids = [r["record_id"] for r in s.sql("SELECT record_id FROM records").to_pylist()]
        calls = s.sql("SELECT record_id, count(*) n FROM teacher_calls GROUP BY 1 HAVING n > 1").to_pylist()
        runs = s.sql("SELECT status, count(*) n FROM runs GROUP BY 1").to_pylist()
    assert sorted(ids) == sorted(expected) and len(ids) == len(set(ids))
    assert calls == []  # no record was asked of the teacher twice after it was stored
    # a killed run is marked interrupted by the next run; none stays 'running'
    assert {r["status"] for r in runs} >= {"interrupted", "completed"} and "running" not in {r["status"] for r in runs}
    assert [p.name for p in (store / "parquet").rglob("*") if p.is_file()] == ["records.parquet"]  # no temporaries
