"""Preference (DPO) pairs from rule edits, teacher samples and human corrections, and their checks."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from mashbill.curation.preference.preference import PREF_IDENTICAL, PairBuild, _make, sample_candidates
from mashbill.curation.preference.rules import failing_codes
from mashbill.curation.snapshots.pull import load_snapshot
from mashbill.curation.snapshots.snapshot import freeze
from mashbill.errors import MashbillError
from mashbill.factory.records import Record, SpecRef, record_id
from mashbill.factory.store import Store
from mashbill.specs import load_spec, render_prompt
from mashbill.validators.checker import RecordChecker
from tests.curation.conftest import SEEDS, add_records
from tests.curation.selection.test_select import decide

LAST_TURN = {"tokenizer": "embedded:smollm2-135m-instruct", "max_seq_len": 1024, "loss": "last-turn"}


def pref_spec(lib, name="plan-pref", *, sources=("rule", "teacher", "human"), seeds=None, loss="last-turn",
              **cfg):
    return lib.write(name, kind="preference", seeds=seeds,
                     curation={"preference": {"source_spec": "plan-src@1.yaml", "sources": list(sources), **cfg}},
                     extra={"trainer_profile": {**LAST_TURN, "loss": loss}})


@pytest.fixture
def source(lib, tmp_path):
    spec = lib.write("plan-src")
    with Store.open(tmp_path / "store") as s:
        recs = {r.input["query"]: r for r in add_records(s, load_spec(spec))}
    return load_spec(spec), tmp_path / "store", recs


def _pairs(path):
    return [r for s in ("train", "eval", "test") for r in pq.read_table(path / "data" / f"{s}.parquet").to_pylist()
            if r["row_kind"] == "preference"]


def test_rule_derived_pairs_break_exactly_the_named_rule(lib, source):
    src, store, recs = source
    spec = pref_spec(lib, sources=["rule"])
    res = freeze(spec, store_path=store, name="pairs", version="1", tokens=False)
    pairs = _pairs(res.path)
    checker = RecordChecker.for_spec(src)
    codes = checker.rule_codes()
    target = {"precision-to-llm": codes["precision-first"], "drop-legal-paragraph": codes["legal-paragraph"],
              "drop-research": codes["research-before-code"], "research-after-code": codes["research-order"],
              "break-tool-args": codes["tool-args"], "drop-domain": codes["dynamic-domain"]}
    by_rule = {}
    for p in pairs:
        rec = next(r for r in recs.values() if r.id == p["record_id"])
        chosen, rejected = json.loads(p["completion"]), json.loads(p["rejected"])
        assert p["source"] == "rule" and chosen == rec.output
        assert failing_codes(checker.check(rec.input, chosen, rec.meta)) == []
        assert failing_codes(checker.check(rec.input, rejected, rec.meta)) == [target[p["rule"]]] == p["rejected_codes"]
        by_rule[p["rule"]] = by_rule.get(p["rule"], 0) + 1
    # 6 precision plans (4 arithmetic, 2 weekdays), 2 legal, 4 research-before-code, 2 dynamic
    assert by_rule == {"precision-to-llm": 6, "break-tool-args": 6, "drop-legal-paragraph": 2, "drop-research": 4,
                       "research-after-code": 4, "drop-domain": 2}
    assert res.manifest["preference"]["pairs"] == {"rule": 24, "teacher": 0, "human": 0}
    one = next(p for p in pairs if p["rule"] == "precision-to-llm")
    rejected = json.loads(one["rejected"])
    assert all("mcp_tool" not in t and t["category"] == "technical_support" for t in rejected)
    moved = next(p for p in pairs if p["rule"] == "research-after-code")
    assert [t["category"] for t in json.loads(moved["rejected"])] == ["code_reviewer", "research"]
    ds = load_snapshot(res.path, "preference")
    row = ds["train"][0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["chosen"][0]["role"] == row["rejected"][0]["role"] == "assistant"
    assert row["chosen"][0]["content"] != row["rejected"][0]["content"]
    # pairs of one source record (one query) never straddle splits
    side = {}
    for s in ds:
        for r in ds[s]:
            side.setdefault(r["prompt"][1]["content"], set()).add(s)
    assert all(len(v) == 1 for v in side.values())


def test_human_corrections_become_checked_pairs(lib, source):
    src, store, recs = source
    poem = recs["Write a short poem about autumn in Hamburg."]
    tetris = recs["Write a Tetris game in Python with pygame."]
    better = [{"task": "Write a four-line poem about autumn in Hamburg", "category": "creative_writer"}]
    code_first = [{"task": "Implement Tetris", "category": "code_reviewer"},
                  {"task": "Look up the rules of Tetris", "category": "research", "search_query": "tetris rules"}]
    with Store.open(store) as s:
        decide(s, poem.id, "ann", "reject", corrected=better, valid=True)
        decide(s, tetris.id, "ann", "reject", corrected=code_first, valid=True)  # passes rejects, not the penalty
    res = freeze(pref_spec(lib, sources=["human"]), store_path=store, name="h", version="1", tokens=False)
    pairs = _pairs(res.path)
    assert [(p["source"], p["rule"], p["record_id"]) for p in pairs] == [("human", "human-rejected", poem.id)]
    assert json.loads(pairs[0]["completion"]) == better and json.loads(pairs[0]["rejected"]) == poem.output
    rejects = pq.read_table(res.path / "rejects.parquet").to_pylist()
    bad = [r for r in rejects if r["stage"] == "preference"]
    assert [(r["record_id"], r["codes"]) for r in bad] == [(tetris.id, ["PREF001"])]
    assert "HR007" in bad[0]["detail"]


def test_identical_and_repeated_pairs_are_removed():
    prompt = ({"role": "user", "content": "q"},)
    plan = [{"task": "a", "category": "general"}]
    build = PairBuild()
    seen = set()
    assert not build.add(_make("rule", "x", "r1", {"query": "q"}, {}, prompt, plan, plan, []), seen)
    other = [{"task": "b", "category": "general"}]
    assert build.add(_make("rule", "x", "r1", {"query": "q"}, {}, prompt, plan, other, ["HR001"]), seen)
    assert not build.add(_make("teacher", "y", "r1", {"query": "q"}, {}, prompt, plan, other, ["HR001"]), seen)
    assert len(build.pairs) == 1 and [e.codes for e in build.excluded] == [(PREF_IDENTICAL,), (PREF_IDENTICAL,)]


def test_correction_samples_only_when_the_wrong_turn_is_not_trained(lib, source):
    src, store, recs = source
    bad = pref_spec(lib, "plan-pref-bad", sources=["rule"], loss="assistant-only", correction_samples=True)
    with pytest.raises(MashbillError, match="last-turn or completion-only.*the wrong plan would be trained"):
        freeze(bad, store_path=store, name="c", version="1", tokens=False)
    assert not (store / "snapshots").exists()
    ok = pref_spec(lib, "plan-pref-ok", sources=["rule"], correction_samples=True)
    res = freeze(ok, store_path=store, name="c", version="1", tokens=False)
    rows = [r for s in ("train", "eval", "test") for r in pq.read_table(res.path / "data" / f"{s}.parquet").to_pylist()]
    corr = [r for r in rows if r["row_kind"] == "correction"]
    pairs = {r["record_id"]: r for r in rows if r["row_kind"] == "preference"}
    assert len(corr) == len({r["record_id"] for r in pairs.values()}) == 14  # one per plan that has an edit
    split_of = {r["example_id"]: s for s in ("train", "eval", "test")
                for r in pq.read_table(res.path / "data" / f"{s}.parquet").to_pylist()}
    for c in corr:
        t = c["turns"]
        assert [m["role"] for m in t] == ["system", "user", "assistant", "user", "assistant"]
        assert t[2]["content"] == c["rejected"] and t[4]["content"] == c["completion"]
        assert "PRECISION-FIRST" in t[3]["content"]
        assert failing_codes(RecordChecker.for_spec(src).check({"query": t[1]["content"]}, json.loads(t[4]["content"]),
                                                    next(r.meta for r in recs.values() if r.id == c["record_id"]))) == []
        assert split_of[c["example_id"]] == split_of[pairs[c["record_id"]]["example_id"]]
    # prompt-completion keeps the wrong plan in the prompt, so completion-only loss never trains it
    pc = load_snapshot(res.path, "prompt-completion")
    multi = [r for s in pc for r in pc[s] if len(r["prompt"]) == 4]
    assert len(multi) == 14 and all(r["prompt"][2]["role"] == "assistant" for r in multi)
    assert res.manifest["preference"]["correction_samples"] == 14
    assert res.manifest["trainer_profile"]["loss"] == "last-turn"


def _store_samples(store, rs, query, plans, *, validate=True):
    inputs = next(i for i in rs.seeds if i["query"] == query)
    gid = record_id(rs.hash, inputs)
    prompt = render_prompt(rs, inputs, gid)
    ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
    run = store.begin_run(spec_name=rs.spec.name, spec_version=1, spec_hash=rs.hash, kind="preference",
                          backend="llama_cpp", model="m", model_sha256=None, model_info=None, sampling={})
    recs = []
    for k, plan in enumerate(plans):
        inp = {**inputs, "sample": k}
        meta = {**prompt.meta(), "lang": inputs["lang"], "group": gid, "sample": k, "seed": k}
        recs.append(Record(record_id(rs.hash, inp), "preference", inp, plan, json.dumps(plan), ref, "accepted",
                           prompt.training_messages, meta))
    store.write_batch(run, recs, {}, [])
    if validate:
        checker = RecordChecker.for_spec(rs)
        store.record_validation(spec_hash=rs.hash, source="test", counts={},
                                results={r.id: checker.check(r.input, r.output, r.meta) for r in recs})
    return recs


def test_teacher_samples_pair_a_passing_with_a_failing_sample(lib, source):
    src, store, recs = source
    spec = pref_spec(lib, sources=["teacher"], samples_per_query=3)
    rs = load_spec(spec)
    good = [{"task": "Compute 1847 * 23 + 519", "category": "precision_tools", "mcp_tool": "calculate",
             "mcp_args": {"expression": "1847*23+519"}}]
    wrong = [{"task": "Compute 1847 * 23 + 519", "category": "math"}]
    with Store.open(store) as s:
        _store_samples(s, rs, "What is 1847 * 23 + 519?", [wrong, good, wrong])
        _store_samples(s, rs, "What is the capital of Canada?",
                       [[{"task": "Name the capital of Canada", "category": "general"}],
                        [{"task": "Say which city is the capital of Canada", "category": "general"}]])
    res = freeze(spec, store_path=store, name="t", version="1", tokens=False)
    pairs = _pairs(res.path)
    # two identical failing samples make one pair, not two; two passing samples make none
    assert [(p["source"], p["rule"], json.loads(p["completion"]), json.loads(p["rejected"])) for p in pairs] == \
        [("teacher", "HR001", good, wrong)]
    codes = [c for r in pq.read_table(res.path / "rejects.parquet").to_pylist() for c in r["codes"]]
    assert sorted(codes) == ["PREF002", "PREF003"]
    # unvalidated samples are refused
    with Store.open(store) as s:
        _store_samples(s, rs, "Wer hat die Relativitätstheorie entwickelt?", [good], validate=False)
    with pytest.raises(MashbillError, match="never checked by a validation run"):
        freeze(spec, store_path=store, name="t", version="2", tokens=False)


@pytest.mark.slow
def test_teacher_samples_from_the_real_model(lib, tmp_path):
    """Two seeded samples per query from the embedded teacher; the freeze pairs a passing with a failing one."""
    from mashbill.factory.teachers import make_teacher

    import yaml

    src = lib.write("plan-src", seeds=[s for s in SEEDS if s[0] == "What is the capital of Canada?"])
    with Store.open(tmp_path / "store") as s:
        add_records(s, load_spec(src))
    spec = pref_spec(lib, sources=["teacher"], seeds=[s for s in SEEDS if s[0] == "What is the capital of Canada?"],
                     samples_per_query=2)
    data = yaml.safe_load(spec.read_text())
    data["teacher"] = {"sampling": {"temperature": 1.0, "max_tokens": 40}}
    data["prompt"]["teacher"] = {
        "system": "Plan the request as a JSON array of tasks. Categories: general, translation, research, "
                  "precision_tools.\nExample request: What is the capital of France?\n"
                  "Example plan: [{\"task\": \"Name the capital of France\", \"category\": \"general\"}]",
        "user": "Request: {{ query }}"}
    spec.write_text(yaml.safe_dump(data, allow_unicode=True))
    rs = load_spec(spec)
    with Store.open(tmp_path / "store") as s:
        teacher = make_teacher(rs.spec.teacher, threads=2)
        try:
            summary = sample_candidates(rs, s, teacher)
            again = sample_candidates(rs, s, teacher)  # a re-run asks for nothing new
        finally:
            teacher.close()
        samples = s.records(spec_hash=rs.hash)
        seeds = sorted(r.meta["seed"] for r in samples)
        covered = s.sql("SELECT count(DISTINCT record_id) n FROM record_validations").to_pylist()[0]["n"]
    assert summary.samples == 2 and again.samples == 0 and seeds == [0, 1]
    assert len({r.meta["group"] for r in samples}) == 1
    assert covered >= summary.passing + summary.failing
    assert summary.passing >= 1 and summary.failing >= 1, [r.raw for r in samples]
    res = freeze(spec, store_path=tmp_path / "store", name="t", version="1", tokens=False)
    [pair] = _pairs(res.path)
    checker = RecordChecker.for_spec(rs)
    meta = samples[0].meta
    query = {"query": "What is the capital of Canada?"}
    assert failing_codes(checker.check(query, json.loads(pair["completion"]), meta)) == []
    assert failing_codes(checker.check(query, json.loads(pair["rejected"]), meta)) == pair["rejected_codes"] != []
