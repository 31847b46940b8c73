"""GGUF verification scores answers with the record metadata `mashbill validate` uses (issue 26): a snapshot row
keeps no metadata, so the taxonomy each record was shown is rebuilt; an answer naming a category the prompt did not
show must fail PLAN003 in both places. Real spec, store, snapshot and record checker; no model is needed."""

from __future__ import annotations

import shutil

import pytest

from mashbill.curation.preference.rules import failing_codes
from mashbill.curation.snapshots.snapshot import freeze
from mashbill.exporters.gguf.gguf_verify import SPLIT_ORDER, _checker, row_meta
from mashbill.exporters.runs import Snapshot
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.curation.conftest import SHARED, Lib, add_records

SPLITS = {"train": 0.5, "eval": 0.4, "test": 0.1}


@pytest.fixture(scope="module")
def varied(tmp_path_factory):
    """A plan snapshot whose records were each shown their own random taxonomy (variation on), and its records."""
    root = tmp_path_factory.mktemp("varied")
    shutil.copytree(SHARED, root / "lib" / "shared")
    spec = Lib(root / "lib").write("plan-v", curation={"splits": SPLITS}, extra={
        "taxonomy": {"file": "../shared/taxonomy/moe-experts@1.yaml", "variation": True}})
    with Store.open(root / "store") as store:
        records = {r.id: r for r in add_records(store, load_spec(spec))}
    res = freeze(spec, store_path=root / "store", name="varied", version="1", tokens=False)
    snap = Snapshot(res.path, res.manifest)
    rows = [r for s in SPLIT_ORDER for r in snap.rows(s) if r["row_kind"] == "sft"]
    return snap, rows, records


def test_rebuilt_meta_is_the_meta_generation_stored(varied):
    snap, rows, records = varied
    rs, checker = _checker(snap)
    assert rows
    for row in rows:
        meta, source = row_meta(rs, checker, row)
        stored = records[row["record_id"]].meta
        assert source == "rebuilt"
        assert meta["taxonomy_shown"] == stored["taxonomy_shown"], row["record_id"]
        assert meta["taxonomy_renamed"] == stored["taxonomy_renamed"], row["record_id"]


def test_an_unshown_category_fails_verification_as_it_fails_validate(varied):
    """The issue's case: `creative_writer` where the prompt did not show it was rule-pass 1.0 in verify.json
    (an empty meta: the spec's whole taxonomy) while validate rejected it with PLAN003."""
    snap, rows, records = varied
    rs, checker = _checker(snap)
    answer = [{"task": "Write the answer as a short poem", "category": "creative_writer"}]
    unshown = 0
    for row in rows:
        rec = records[row["record_id"]]
        validate = failing_codes(checker.check(rec.input, answer, rec.meta))
        verify = failing_codes(checker.check({"query": row["query"]}, answer, row_meta(rs, checker, row)[0]))
        assert verify == validate, row["query"]
        if "creative_writer" not in rec.meta["taxonomy_shown"]:
            unshown += 1
            assert "PLAN003" in verify
            assert "PLAN003" not in failing_codes(checker.check({"query": row["query"]}, answer, {}))  # the old way
    assert 0 < unshown < len(rows)  # both cases occur, so the comparison means something


def test_a_prompt_that_lists_other_categories_wins_over_the_rebuilt_draw(varied):
    """Samples of one input share their first sample's draw, so the record id's own draw can differ from what the
    prompt showed: the prompt's category list is then what the answer is checked against."""
    snap, rows, _ = varied
    rs, checker = _checker(snap)
    row = dict(rows[0])
    system = "CATEGORIES:\n- general  Anything\n- research  Look things up\n\nPlan it."
    row["prompt"] = [{"role": "system", "content": system}, {"role": "user", "content": row["query"]}]
    meta, source = row_meta(rs, checker, row)
    assert source == "prompt" and meta["taxonomy_shown"] == ["general", "research"]
