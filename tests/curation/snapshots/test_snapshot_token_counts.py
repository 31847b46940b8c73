"""Validation keeps each record's token count (the span check's total under the trainer's tokenizer and chat
template) with its validation mark; a freeze under the same tokenizer and template reads those counts instead of
rendering and counting every example again (issue 29), and writes the bytes a freeze that counts them all writes."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from mashbill.curation.snapshots.snapshot import freeze
from mashbill.curation.snapshots.tokens import known_tokens_profile, token_lengths
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from mashbill.validators.run import SpanPass
from mashbill.validators.run_store import spec_options, validate_spec_records
from tests.curation.conftest import SEEDS, add_records
from tests.curation.revision import same_snapshot


@pytest.fixture
def validated(lib, tmp_path):
    """A plan store (a parse failure and a validation reject among its records) validated by `validate`, with the
    token spans counted by the spec's real tokenizer (SmolLM2's)."""
    spec = lib.write("plan-a", seeds=SEEDS)
    rs = load_spec(spec)
    with Store.open(tmp_path / "s") as store:
        add_records(store, rs, validate=False, parse_failures=(SEEDS[3][0],))
        validate_spec_records(rs, store, spec_options(rs, audit_sample=8))
    return spec, rs, tmp_path / "s"


def _stored(store_path):
    with Store.open(store_path, read_only=True) as store:
        counts = dict(store.con.execute("SELECT record_id, n_tokens FROM record_validations").fetchall())
        [(profile,)] = store.con.execute("SELECT tokens_profile FROM validation_runs").fetchall()
        records = {r.id: r for r in store.records(status="accepted")}
    return counts, profile, records


def test_validation_stores_what_the_freeze_would_count(validated):
    spec, rs, store_path = validated
    counts, profile, records = _stored(store_path)
    assert profile == known_tokens_profile(rs) and profile is not None
    assert set(counts) == set(records) and len(records) == len(SEEDS) - 1  # the parse failure is not validated
    ids = sorted(records)
    expected = token_lengths(rs.spec.trainer_profile, rs.home, [records[i].training_messages for i in ids])
    assert [counts[i] for i in ids] == expected and min(expected) > 100


def _rows(snap) -> dict[str, int]:
    out = {}
    for f in sorted((snap / "data").glob("*.parquet")):
        t = pq.read_table(f, columns=["record_id", "n_tokens"])
        out.update(zip(t.column("record_id").to_pylist(), t.column("n_tokens").to_pylist()))
    return out


def test_the_freeze_reads_the_stored_counts_only_under_its_own_tokenizer_and_template(validated, tmp_path):
    spec, rs, store_path = validated
    counts, profile, _ = _stored(store_path)
    read = freeze(spec, store_path=store_path, name="snap", version="1", out_dir=tmp_path / "read")
    assert _rows(read.path) and all(_rows(read.path)[k] == counts[k] for k in _rows(read.path))
    with Store.open(store_path) as store:  # counts made under another tokenizer or template: counted afresh
        store.con.execute("UPDATE validation_runs SET tokens_profile = 'another'")
        store.con.execute("UPDATE record_validations SET n_tokens = n_tokens + 1000")
    recounted = freeze(spec, store_path=store_path, name="snap", version="1", out_dir=tmp_path / "recounted")
    assert same_snapshot(read.path, recounted.path) == []
    with Store.open(store_path) as store:  # under its own: the stored count is what the snapshot says
        store.con.execute("UPDATE validation_runs SET tokens_profile = ?", [profile])
    shifted = freeze(spec, store_path=store_path, name="snap", version="1", out_dir=tmp_path / "shifted")
    assert _rows(shifted.path) == {k: n + 1000 for k, n in _rows(read.path).items()}
    tokens = json.loads((shifted.path / "manifest.json").read_text())["tokens"]
    assert tokens["max"] == max(_rows(read.path).values()) + 1000


def test_no_count_is_kept_from_a_pass_whose_audit_found_the_fast_counts_wrong(validated):
    _, rs, _ = validated
    spans = SpanPass(spec_options(rs), report=None)
    spans.counts[False].extend([120, -1])
    assert spans.counts_by_key(["a", "b"]) == {"a": 120}  # -1: a span error, no count
    assert spans.counts_by_key(["a"]) == {}  # rows and keys out of step: nothing rather than a wrong count
    spans.audit_clean = False
    assert spans.counts_by_key(["a", "b"]) == {}
