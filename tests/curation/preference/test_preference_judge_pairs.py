"""Judge-ranked preference pairs: both orders, position bias dropped and counted, a minimum margin, judge errors.

The samples and the judge's pairwise judgments are stored the way `snapshot sample`/`generate` and
`mashbill judge --pairs` store them (records of the preference spec and of its judge ref); the freeze
pairs them. Which judgments the real (weak) judge gives is not under test here; the pairing is.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from mashbill.curation.preference.judging import cohen_kappa
from mashbill.curation.snapshots.snapshot import freeze
from mashbill.factory.generate.judge import judge_ref
from mashbill.factory.records import Record, record_id
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.curation.preference.test_preference import _pairs, _store_samples, pref_spec, source  # noqa: F401 (fixture)
from tests.factory.synth_specs import judge_section

GOOD = [{"task": "Compute 1847 * 23 + 519", "category": "precision_tools", "mcp_tool": "calculate",
         "mcp_args": {"expression": "1847*23+519"}}]
WRONG = [{"task": "Compute 1847 * 23 + 519", "category": "math"}]


def _judge(store, rs, a, b, score_a, score_b):
    ref = judge_ref(rs, "pairs")
    inputs = {"a": a.id, "b": b.id}
    rec = Record(record_id(ref.hash, inputs), "judge_pair", inputs, {"score_a": score_a, "score_b": score_b,
                 "rationale": "test"}, "{}", ref, "accepted", (), {"judge_model": "m", "prompt_hash": "h"})
    run = store.begin_run(spec_name=ref.name, spec_version=1, spec_hash=ref.hash, kind="judge_pair",
                          backend="llama_cpp", model="m", model_sha256=None, model_info=None, sampling={})
    store.write_batch(run, [rec], {}, [])


def test_judge_pairs_need_both_orders_to_agree_a_margin_and_no_hard_rule_failure(lib, source):
    src, store, recs = source
    spec = pref_spec(lib, sources=["judge"], samples_per_query=2, min_judge_margin=1.5)
    data = spec.read_text()
    import yaml

    d = yaml.safe_load(data)
    d["judge"] = judge_section()
    spec.write_text(yaml.safe_dump(d, allow_unicode=True))
    rs = load_spec(spec)
    general = [{"task": "Name it", "category": "general"}]
    other = [{"task": "Say the capital", "category": "general"}]
    with Store.open(store) as s:
        kept = _store_samples(s, rs, "What is 1847 * 23 + 519?", [GOOD, WRONG])
        biased = _store_samples(s, rs, "What is the capital of Canada?", [general, other])
        small = _store_samples(s, rs, "Wer hat die Relativitätstheorie entwickelt?", [general, other])
        good2 = [{"task": "Compute 17.5% of 4360", "category": "precision_tools", "mcp_tool": "calculate",
                  "mcp_args": {"expression": "4360 * 0.175"}}]
        error = _store_samples(s, rs, "What is 17.5% of 4,360?", [good2, WRONG])
        _judge(s, rs, kept[0], kept[1], 5, 2)  # GOOD first: GOOD +3
        _judge(s, rs, kept[1], kept[0], 2, 4)  # WRONG first: GOOD +2 -> kept, margin 2.5
        _judge(s, rs, biased[0], biased[1], 5, 3)  # whichever is shown first wins: position bias
        _judge(s, rs, biased[1], biased[0], 5, 3)
        _judge(s, rs, small[0], small[1], 4, 3)  # consistent, but a margin of 1 < 1.5
        _judge(s, rs, small[1], small[0], 3, 4)
        _judge(s, rs, error[0], error[1], 2, 5)  # the judge prefers the plan that fails HR001, in both orders
        _judge(s, rs, error[1], error[0], 5, 1)
    res = freeze(spec, store_path=store, name="jp", version="1", tokens=False)
    pairs = _pairs(res.path)
    assert [(p["source"], json.loads(p["completion"]), json.loads(p["rejected"])) for p in pairs] == \
        [("judge", GOOD, WRONG)]
    assert pairs[0]["record_id"] == kept[0].id and pairs[0]["rejected_codes"] == ["HR001"]
    codes = sorted(c for r in pq.read_table(res.path / "rejects.parquet").to_pylist() for c in r["codes"]
                   if c.startswith("PREF"))
    assert codes == ["PREF006", "PREF007", "PREF008"]
    m = res.manifest["preference"]
    assert m["pairs"]["judge"] == 1 and m["judge_pairs_judged"] == 4
    assert (m["judge_inconsistent"], m["judge_below_margin"], m["judge_errors"]) == (1, 1, 1)


def test_cohen_kappa():
    assert cohen_kappa([True, False, True, False], [True, False, True, False]) == 1.0
    assert cohen_kappa([True, True, False, False], [True, False, True, False]) == 0.0
    assert round(cohen_kappa([True, True, True, False, False], [True, True, False, False, True]), 4) == 0.1667
    assert cohen_kappa([], []) is None and cohen_kappa([True, True], [True, True]) is None
