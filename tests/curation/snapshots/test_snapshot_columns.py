"""The columnar freeze (issue 29) writes the bytes the row-by-row freeze wrote: the same stores frozen by this
checkout and by the last revision before it (`git archive`, run in its own process), compared file by file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from mashbill.curation.snapshots.snapshot import freeze, verify
from mashbill.curation.snapshots.snapshot_examples import example_key
from mashbill.errors import StoreError
from mashbill.factory.records import Record, SpecRef
from mashbill.factory.store import Store
from mashbill.hashing import canonical_json
from mashbill.specs import load_spec
from tests.curation.conftest import SEEDS, add_records
from tests.curation.revision import checkout, has_revision, same_snapshot, store_for_revision
from tests.curation.selection.test_select import decide

BEFORE = "479ded1"  # the last commit with the row-by-row freeze


# The revision's own module path (before the sub-packages), and a check that its code, not this checkout's, runs:
# a module the revision lacks would be found by this checkout's editable install instead.
OLD = """
import importlib, json, sys
import mashbill
freeze = importlib.import_module("mashbill.curation" + ".snapshot").freeze
assert mashbill.__file__.startswith(sys.argv[1]), mashbill.__file__
assert freeze.__code__.co_filename.startswith(sys.argv[1]), freeze.__code__.co_filename
for spec, store, out, tokens in json.loads(sys.argv[2]):
    freeze(spec, store_path=store, name="snap", version="1", out_dir=out, tokens=tokens)
"""


@pytest.fixture
def stores(lib, tmp_path):
    """(spec, store, tokens) cases: plans with validation and parse rejects, near duplicates and every kind of
    review decision; the same store under quotas that cut and oversample, with paraphrase groups; labels over a
    path (the decoded-record route); and an odd record (a non-list output) on the plain path."""
    cases = []
    spec = lib.write("plan-a", seeds=SEEDS)
    rs = load_spec(spec)
    with Store.open(tmp_path / "a") as store:
        recs = {r.input["query"]: r for r in add_records(store, rs, parse_failures=(SEEDS[3][0],),
                                                          rejected_by_validation={SEEDS[1][0]: "HR001"})}
        q = [s[0] for s in SEEDS]
        decide(store, recs[q[0]].id, "ann", "reject")
        fixed = [{"task": "Compute it", "category": "precision_tools", "mcp_tool": "calculate",
                  "mcp_args": {"expression": "7**5-1000"}}]
        decide(store, recs[q[1]].id, "ann", "reject", corrected=fixed, valid=True)
        decide(store, recs[q[2]].id, "ann", "accept")
        decide(store, recs[q[5]].id, "ann", "accept")
        decide(store, recs[q[5]].id, "bob", "reject")
    cases.append((spec, tmp_path / "a", True))
    quota = lib.write("plan-b", seeds=SEEDS, curation={"group_by": ["type"],
                                                       "quotas": {"per_cell": 2, "min_per_cell": 0}})
    with Store.open(tmp_path / "b") as store:
        add_records(store, load_spec(quota))
    cases.append((quota, tmp_path / "b", False))
    over = lib.write("plan-c", seeds=SEEDS, curation={"quotas": {"dims": ["input.type", "lang"], "per_cell": 3,
                                                                  "oversample": True}})
    with Store.open(tmp_path / "c") as store:
        add_records(store, load_spec(over))
    cases.append((over, tmp_path / "c", False))
    odd = lib.write("plan-d", seeds=SEEDS[:10])
    rs = load_spec(odd)
    plans = {s[0]: [{"task": "t", "category": "general"}] for s in SEEDS[:10]}
    plans[SEEDS[4][0]] = {"category": "general", "complexity": "moderate"}  # an object, not a list of tasks
    plans[SEEDS[6][0]] = [{"task": "ü \"q\" \\ \n", "category": 5}, "x", {"task": "y"}]  # odd tasks
    with Store.open(tmp_path / "d") as store:
        add_records(store, rs, plans=plans)
    cases.append((odd, tmp_path / "d", False))
    return cases


def _card_names_the_module_where_it_lives_now(snap, old_store: Path) -> None:
    """The intended difference since the revision: the card's usage example imports `load_snapshot` from its
    sub-package (issue 25 moved the module). Rewritten in the revision's card, with the card's hash in its manifest,
    so that every other byte is still compared (`same_snapshot` compares the cards but for the store path each names:
    the revision froze a copy of the store, `store_for_revision`). (Spelled in pieces: a module rename must not
    rewrite it.)"""
    from mashbill.hashing import sha256_file

    card = snap / "README.md"
    was, now = "mashbill.curation" + ".pull import", "mashbill.curation" + ".snapshots.pull import"
    text = card.read_text(encoding="utf-8")
    assert text.count(was) == 1, "the revision's card no longer imports load_snapshot as expected"
    assert text.count(str(old_store)) == 2, "the revision's card no longer names its store twice"
    card.write_text(text.replace(was, now), encoding="utf-8")
    manifest = json.loads((snap / "manifest.json").read_text(encoding="utf-8"))
    manifest["files"]["README.md"] = sha256_file(card)
    (snap / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


@pytest.mark.skipif(not has_revision(BEFORE), reason=f"this clone lacks {BEFORE} (shallow)")
def test_the_columnar_freeze_writes_the_bytes_the_row_freeze_wrote(stores, tmp_path):
    pkg = checkout(BEFORE, tmp_path / "rev")
    jobs = [(str(spec), str(store_for_revision(store, pkg, tmp_path / f"store-{i}")), str(tmp_path / f"old-{i}"),
             tokens) for i, (spec, store, tokens) in enumerate(stores)]
    env = {**os.environ, "PYTHONPATH": str(pkg)}
    proc = subprocess.run([sys.executable, "-c", OLD, str(pkg), json.dumps(jobs)], env=env, capture_output=True,
                          cwd=tmp_path, text=True, timeout=600)  # not the checkout: `-c` puts the cwd first
    assert proc.returncode == 0, proc.stderr[-3000:]
    for i, (spec, store, tokens) in enumerate(stores):
        new = freeze(spec, store_path=store, name="snap", version="1", out_dir=tmp_path / f"new-{i}", tokens=tokens)
        old = tmp_path / f"old-{i}" / "snap@1"
        _card_names_the_module_where_it_lives_now(old, Path(jobs[i][1]))
        assert verify(new.path)["snapshot_id"] == json.loads((old / "manifest.json").read_text())["snapshot_id"], i
        assert same_snapshot(old, new.path) == [], i
    counts = [json.loads((tmp_path / f"new-{i}" / "snap@1" / "manifest.json").read_text()) for i in range(4)]
    assert counts[0]["rejects"]["by_code"].keys() >= {"PARSE001", "REVIEW001", "REVIEW003"}
    assert counts[0]["review"]["corrected"] == 1 and counts[0]["tokens"]["counted"] > 0
    assert counts[1]["rejects"]["by_code"].get("BAL001")  # the quota cut something
    assert counts[2]["cells"]["oversampled"] > 0


def test_plain_usable_gives_canonical_json_and_only_the_common_case(tmp_path):
    ref = SpecRef("p", 1, "h" * 64)
    odd = {"b": [1, 2.5, -0.0, 1e-07, "q\"uo\\te, : "], "a": "x, y: z", "ü": "Ärger \n\t\u0001 \u2028 \U0001F600"}
    # messages: plain strings (DuckDB's minified JSON), a control character DuckDB escapes in upper case and an
    # extra numeric field (both the regular expression)
    system = {"role": "system", "content": "Plan: «über» / \u2028 \\ \"q\", : " * 30}
    msgs = [(system, {"role": "user", "content": "q0"}),
            ({"role": "user", "content": "a\x0bb\x1f, : \\u000B"},), ({"role": "user", "content": "q2"},),
            ({"role": "user", "content": "x", "n": 1.5e-07},), ({"role": "user", "content": "q4"},)]
    recs = [Record(f"r{i}", "plan", {"query": f"q{i}", "lang": "en"}, odd if i == 1 else [{"category": "c"}], None,
                   ref, "accepted", msgs[i], {"lang": "en"}) for i in range(5)]
    recs.append(Record("r5", "plan", {"query": "q5"}, None, None, ref, "accepted", msgs[4], {}))  # no output
    with Store.open(tmp_path / "s") as s:
        run = s.begin_run(spec_name="p", spec_version=1, spec_hash=ref.hash, kind="plan", backend="t", model="m",
                          model_sha256=None, model_info=None, sampling={})
        from mashbill.factory.records import Verdict

        s.write_batch(run, recs, {"r3": [Verdict("J001", "reject", "judged", "judge")]}, [])
        s.record_validation(spec_hash=ref.hash, source="t", counts={}, results={
            "r0": [], "r1": [], "r2": [Verdict("F001", "flag", "z", "validate")], "r3": [], "r5": []})
        # r2: a flag leaves a record usable, so it is plain; r3: the judge rejected it; r4: never validated
        plain, others = s.plain_usable(ref.hash, [("lang", "input", "$.lang")])
        keyed, _ = s.plain_usable(ref.hash, key_label="sft")
        stored = dict(s.con.execute("SELECT record_id, sft_key FROM records").fetchall())
        s.con.execute("UPDATE records SET sft_key = NULL")  # a store written before migration 13
        computed, _ = s.plain_usable(ref.hash, key_label="sft")
        # the prompts stay in the store, read in the order asked for (an id may repeat), an unknown id refused
        prompts = s.prompts_of(pa.array(["r5", "r0", "r1", "r5"])).to_pylist()
        with pytest.raises(StoreError, match="1 of 2 records"):
            s.prompts_of(pa.array(["r0", "nope"]))
        with pytest.raises(ValueError):
            s.plain_usable(ref.hash, key_label="sft'; DROP TABLE records; --")
    assert plain.column("record_id").to_pylist() == ["r0", "r1", "r2", "r5"] and others == ["r3", "r4"]
    by_id = {r.id: r for r in recs}
    # the store's key is the example key curation computes over what a snapshot trains (no output: null): the one
    # kept when each record was written, and the one the store computes from the prompt for a record without one
    want = {r.id: example_key("sft", list(r.messages), canonical_json(r.output)) for r in recs}
    assert stored == want
    assert keyed.column("key").to_pylist() == computed.column("key").to_pylist() == [
        want[i] for i in ("r0", "r1", "r2", "r5")]
    assert "messages" not in keyed.column_names and "prompt" not in plain.column_names
    assert prompts == [[{"role": m["role"], "content": m["content"]} for m in by_id[i].messages]
                       for i in ("r5", "r0", "r1", "r5")]
    for row in plain.to_pylist():
        rec = by_id[row["record_id"]]
        assert row["output"] == (None if rec.output is None else canonical_json(rec.output))
        assert row["messages"] == canonical_json(list(rec.messages))
        assert row["lang"] == (None if "lang" not in rec.input else json.dumps(rec.input["lang"]))


@pytest.mark.parametrize("dims", [["complexity", "lang"], ["type", "category", "n_tasks", "complexity", "lang"]])
def test_complexity_labels_from_the_projected_paths_are_those_of_each_decoded_record(tmp_path, monkeypatch, dims):
    """A complexity record's labels, cell, class and language computed once per distinct combination of the values
    they read (snapshot_columns.PROJECTED) are those of each record decoded whole, odd records included."""
    import mashbill.curation.snapshots.snapshot_columns as columns

    ref = SpecRef("c", 1, "c" * 64)
    outputs = [{"complexity": "trivial"}, {"complexity": "complex", "why": "x"}, {"complexity": "Trivial"}, {"complexity": None},
               {}, {"other": "moderate"}, ["trivial"], "moderate", None, {"complexity": ["a", "b"]}]
    inputs = [{"query": "q", "lang": "de"}, {"query": "q", "type": "math"}, {"query": "q", "complexity": "moderate"},
              {"query": "q", "lang": None}, {"query": "q", "lang": "en", "complexity": "trivial", "type": "t"}]
    metas = [{"lang": "en"}, {}, {"lang": None}, {"lang": "de", "taxonomy_renamed": {"a": "b"}}]
    recs = [Record(f"r{i:03d}", "complexity", inputs[i % 5], outputs[i % 10], None, ref, "accepted",
                   ({"role": "user", "content": f"q{i}"},), metas[i % 4]) for i in range(60)]
    with Store.open(tmp_path / "s") as s:
        run = s.begin_run(spec_name="c", spec_version=1, spec_hash=ref.hash, kind="complexity", backend="t",
                          model="m", model_sha256=None, model_info=None, sampling={})
        s.write_batch(run, recs, {}, [])
        s.record_validation(spec_hash=ref.hash, source="t", counts={}, results={r.id: [] for r in recs})
        plain, _ = s.plain_usable(ref.hash, columns.paths_for("complexity", dims), "sft")
    assert columns.projected("complexity", dims) and plain.num_rows == 60
    projected = columns.plain_table(plain, "complexity", dims, "c@1")
    monkeypatch.setattr(columns, "PROJECTED", {"plan": columns.PROJECTED["plan"]})  # every record decoded
    decoded = columns.plain_table(plain, "complexity", dims, "c@1")
    assert projected.equals(decoded)
    assert len(set(projected.column("cell").to_pylist())) > 5


def test_a_split_written_with_its_prompts_in_chunks_is_the_bytes_of_one_chunk(tmp_path):
    """Each split's prompts arrive in the store's batches (Store.prompts_of); the snapshot's bytes must not depend on
    where those batches end."""
    from mashbill.curation.snapshots.snapshot_format import MESSAGE
    from mashbill.curation.snapshots.snapshot_write import write_parquet

    rows = [[{"role": "system", "content": "Plan. " * (i % 7 + 200)}, {"role": "user", "content": f"q{i} ü"}]
            for i in range(5000)]
    one = pa.chunked_array([pa.array(rows, pa.list_(MESSAGE))])
    parts = pa.chunked_array([pa.array(rows[a:b], pa.list_(MESSAGE)) for a, b in ((0, 1), (1, 2600), (2600, 5000))])
    for name, column in (("one", one), ("parts", parts)):
        write_parquet(pa.table({"id": pa.array(range(5000)), "prompt": column}), tmp_path / f"{name}.parquet")
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "parts.parquet").read_bytes()


def test_queries_read_from_their_json_text_are_what_json_loads_gives(tmp_path):
    """A plain record's query comes from the JSON text DuckDB gives for input.query: one without escapes is cut out
    in Arrow, the rest decoded; both as json.loads decodes the text (absent: ""), over classes of what a query holds."""
    from mashbill.curation.snapshots.snapshot_columns import _json_strings

    queries = ["plain", "", "Grüße aus Köln", "東京 🚀", 'say "hi"', "back\\slash", "tab\there\nline", "\u2028sep",
               "ends with \\", '"', "null", "\x00nul"]
    store = Store.open(tmp_path / "s")
    try:
        texts = [r[0] for r in store.con.execute(
            "SELECT json_extract(j, '$.query')::VARCHAR FROM (SELECT unnest(?::JSON[]) AS j)",
            [[json.dumps({"query": q}, ensure_ascii=a) for q in queries for a in (True, False)]
             + ['{"query": null}', "{}"]]).fetchall()]
    finally:
        store.close()
    assert any(t and "\\" not in t for t in texts) and any(t and "\\" in t for t in texts)  # both ways are taken
    chunked = pa.chunked_array([pa.array(texts[:7], pa.string()), pa.array(texts[7:], pa.string())])
    assert _json_strings(chunked).to_pylist() == ["" if t is None else json.loads(t) for t in texts]
    assert _json_strings(chunked).to_pylist()[-2:] == [None, ""]
