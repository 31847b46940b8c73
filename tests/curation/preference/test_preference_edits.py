"""The rule-derived edits that apply to single-task plans: drop-search-query (PLAN004) and unshown-category (PLAN003,
a real expert name the record was not shown), each checked by the real routing rules through a freeze; a spec that
lists no edits keeps the first six."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from mashbill.curation.preference.preference_edits import DEFAULT_EDITS, PREFERENCE_EDITS, apply_edit, edits_of
from mashbill.curation.preference.rules import failing_codes
from mashbill.curation.snapshots.snapshot import freeze
from mashbill.errors import MashbillError
from mashbill.factory.store import Store
from mashbill.specs import LIBRARY, find_spec, load_spec
from mashbill.validators.checker import RecordChecker
from tests.curation.conftest import add_records
from tests.curation.preference.test_preference import pref_spec


def test_new_edits_break_exactly_their_rule_and_nothing_else(lib, tmp_path):
    src = load_spec(lib.write("plan-src"))
    with Store.open(tmp_path / "store") as s:
        recs = {r.id: r for r in add_records(s, src)}
    spec = pref_spec(lib, sources=["rule"], edits=["drop-search-query", "unshown-category"])
    res = freeze(spec, store_path=tmp_path / "store", name="p", version="1", tokens=False)
    rows = [r for sp in ("train", "eval", "test") for r in pq.read_table(res.path / "data" / f"{sp}.parquet").to_pylist()]
    checker = RecordChecker.for_spec(src)
    changed = {}
    for p in rows:
        rec = recs[p["record_id"]]
        chosen, rejected = json.loads(p["completion"]), json.loads(p["rejected"])
        assert chosen == rec.output and failing_codes(checker.check(rec.input, chosen, rec.meta)) == []
        want = {"drop-search-query": "PLAN004", "unshown-category": "PLAN003"}[p["rule"]]
        assert failing_codes(checker.check(rec.input, rejected, rec.meta)) == [want] == p["rejected_codes"]
        diff = [(a.get("category"), b.get("category"), sorted(set(a) - set(b))) for a, b in zip(chosen, rejected)
                if a != b]
        assert len(diff) == 1  # one task changed, in one field
        changed.setdefault(p["rule"], []).append(diff[0])
    # the four research-before-code plans lose their research task's query
    assert sorted(changed["drop-search-query"]) == [("research", "research", ["search_query"])] * 4
    # this spec shows the fixed taxonomy: the unshown names are the renames of the shown experts. Renaming the
    # creative expert of a poem request also breaks creative-fit (FIT001, moe-routing@3), and renaming the
    # translation expert of a translation request breaks translation-fit (FIT002, @4): not minimal, no pair.
    assert sorted((a, b) for a, b, _ in changed["unshown-category"]) == [("medical_consult", "medical_advisor")] + [
        ("technical_support", "it_support")] * 2
    # research -> web_researcher in a research-before-code plan also drops its research task (HR006), and the
    # creative and translation renames break FIT001 and FIT002: refused as not minimal
    rejects = [r for r in pq.read_table(res.path / "rejects.parquet").to_pylist() if r["stage"] == "preference"]
    assert all(r["codes"] == ["PREF004"] for r in rejects)
    assert sum("HR006" in r["detail"] for r in rejects) == 4 and sum("FIT001" in r["detail"] for r in rejects) == 2
    assert sum("FIT002" in r["detail"] for r in rejects) == 2
    assert len(rejects) == 8
    assert res.manifest["preference"]["edits"] == ["drop-search-query", "unshown-category"]


def test_unshown_category_names_what_a_memorising_planner_would(lib):
    rs = load_spec(lib.write("plan-src"))
    checker = RecordChecker.for_spec(rs)
    shown = ["translator", "general", "math", "research", "precision_tools", "dynamic"]
    meta = {"taxonomy_shown": shown, "taxonomy_renamed": {"translator": "translation"}}
    query = {"query": "Translate 'good night' into German."}
    plan = [{"task": "Translate 'good night' into German", "category": "translator"}]
    assert failing_codes(checker.check(query, plan, meta)) == []
    # a renamed expert: its original name, the one the variation exists to unlearn
    edited = apply_edit("unshown-category", plan, rs, meta)
    assert edited == [{**plan[0], "category": "translation"}] and plan[0]["category"] == "translator"
    assert failing_codes(checker.check(query, edited, meta)) == ["PLAN003"]
    # research: the novel expert doing the same job, only when this record did not show it
    research = [{"task": "Find the capital of Canada", "category": "research", "search_query": "capital of Canada"}]
    assert apply_edit("unshown-category", research, rs, meta)[0]["category"] == "web_researcher"
    assert apply_edit("unshown-category", research, rs, {**meta, "taxonomy_shown": shown + ["web_researcher"]}) is None
    # an expert with no other name has no plausible wrong name: no edit rather than noise
    assert apply_edit("unshown-category", [{"task": "Prove it", "category": "math"}], rs, meta) is None
    # drop-search-query needs a research task that has a query
    assert apply_edit("drop-search-query", research, rs, meta) == [{k: v for k, v in research[0].items()
                                                                     if k != "search_query"}]
    assert apply_edit("drop-search-query", plan, rs, meta) is None


def test_specs_without_edits_keep_the_first_six(lib):
    assert edits_of(load_spec(pref_spec(lib))) == list(DEFAULT_EDITS) == list(PREFERENCE_EDITS[:6])
    with pytest.raises(MashbillError, match=r"curation.preference.preference.edits: unknown edit\(s\) \['drop-everything'\]"):
        edits_of(load_spec(pref_spec(lib, "plan-pref-bad", edits=["drop-search-query", "drop-everything"])))
    # the shipped quick-start versions: @1 as it was frozen, @2 (the quick start's) lists every edit
    assert edits_of(load_spec(find_spec("quickstart-preference@1", LIBRARY))) == list(DEFAULT_EDITS)
    latest = load_spec(find_spec("quickstart-preference", LIBRARY))
    assert latest.spec.version >= 2 and edits_of(latest) == list(PREFERENCE_EDITS)
