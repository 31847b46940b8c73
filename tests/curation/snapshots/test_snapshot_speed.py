"""The freeze's speed shortcuts give what the plain code gives (bench/freeze.py --before checks whole snapshots)."""

from __future__ import annotations


def test_the_sft_key_shortcut_hashes_what_example_key_hashes():
    from mashbill.curation.snapshots.snapshot_examples import example_key
    from mashbill.factory.records import sft_key as _sft_key

    system = {"role": "system", "content": "Plan the request. \u00fcber \"quoted\" \\ \n" * 50}
    shared: dict = {}
    for user, completion in (("What is 2+2?", '[{"task":"x"}]'), ("Wie spät ist es?", "[]")):
        msgs = [system, {"role": "user", "content": user}]
        assert _sft_key(msgs, completion, shared) == example_key("sft", msgs, completion)
    odd = [{"role": "system", "content": "s", "name": "x"}, {"content": "u", "role": "user"}]
    assert _sft_key(odd, "1", shared) == example_key("sft", odd, "1")
    assert len(shared) == 1  # the system prompt was encoded once


def test_normalising_once_gives_what_normalize_gives():
    from mashbill.curation.selection.groups import near_duplicate_clusters, normalized
    from mashbill.validators.data.dedup import normalize
    from mashbill.validators.data.leakage import across_splits

    texts = ["What is 7-3?", None, "", "what is 7 - 3", "E-Mail km/h", "What is 7-3?", "Ärger über ÄRGER"]
    assert normalized(texts) == [normalize(t or "") for t in texts]
    assert near_duplicate_clusters(texts, norms=normalized(texts)) == near_duplicate_clusters(texts)
    keys = [f"k{i}" for i in range(len(texts))]
    side = dict(zip(keys, ["train", "eval", "test", "train", "eval", "test", "train"]))
    groups = {k: k for k in keys}
    raw = dict(zip(keys, texts))
    assert across_splits(side, raw, groups, dict(zip(keys, normalized(texts)))) == across_splits(side, raw, groups)
    assert across_splits(side, raw, groups)["identical_queries_across_splits"] == 1


def test_the_usable_fast_path_answers_as_the_rules_do(tmp_path):
    from mashbill.factory.records import Record, SpecRef, Verdict
    from mashbill.factory.store import Store
    from mashbill.factory.usable import usability

    ref = SpecRef("u", 1, "h" * 64)
    recs = [Record(f"r{i}", "plan", {"query": str(i)}, [], None, ref, "accepted" if i % 3 else "rejected", (), {})
            for i in range(9)]
    with Store.open(tmp_path / "s") as s:
        run = s.begin_run(spec_name="u", spec_version=1, spec_hash=ref.hash, kind="plan", backend="t", model="m",
                          model_sha256=None, model_info=None, sampling={})
        s.write_batch(run, recs, {"r0": [Verdict("HR001", "reject", "x")]}, [])
        s.record_validation(spec_hash=ref.hash, source="t", counts={}, results={
            r.id: [Verdict("HR002", "reject", "y", "validate")] if r.id == "r4" else
            [Verdict("F001", "flag", "z", "validate")] if r.id == "r5" else [] for r in recs if r.status == "accepted"})
        for require in (False, True):
            states = s.usable(ref.hash, require_review=require)
            assert len(states) == 9
            for st in states:
                assert st.usability == usability(st.record.status, st.mark and st.mark[0], st.verdicts, st.decision,
                                                  require_review=require)
            usable = [st.usability.usable for st in states]
            assert usable == ([False] * 9 if require else [False, True, True, False, False, True, False, True, True])
