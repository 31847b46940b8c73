"""The report's judge figures, from a store and from a snapshot: scores, unparseable judgments, Cohen's kappa
against reviewers, judge errors on hard rules (a passing score, and a preferred sample in a pair), and the
judge-ranked pairs (judged in both orders, inconsistent, below the margin). The judgments are stored the way
`mashbill judge` stores them; which scores the real (weak) judge gives is not under test here, the counting is.
"""

from __future__ import annotations

import re
from html import escape as html_escape

import yaml

from mashbill.curation.reports.report import build_report, summary_lines
from mashbill.curation.snapshots.snapshot import freeze
from mashbill.factory.generate.judge import judge_ref
from mashbill.factory.records import Record, record_id
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.curation.preference.test_preference import _store_samples, pref_spec, source  # noqa: F401 (fixture)
from tests.curation.preference.test_preference_judge_pairs import GOOD, WRONG, _judge
from tests.curation.selection.test_select import decide
from tests.factory.synth_specs import judge_section

GENERAL = [{"task": "Name it", "category": "general"}]
OTHER = [{"task": "Say the capital", "category": "general"}]


def _score(store, rs, rec, score):
    """A stored score judgment of `rec` (None: an answer that did not parse, stored as failed)."""
    ref = judge_ref(rs, "score")
    inputs = {"record_id": rec.id}
    out = None if score is None else {"score": score, "rationale": "test"}
    run = store.begin_run(spec_name=ref.name, spec_version=1, spec_hash=ref.hash, kind="judge", backend="llama_cpp",
                          model="m", model_sha256=None, model_info=None, sampling={})
    store.write_batch(run, [Record(record_id(ref.hash, inputs), "judge", inputs, out, "prose" if out is None else "{}",
                                   ref, "failed" if out is None else "accepted", (),
                                   {"judge_model": "m", "prompt_hash": "h"})], {}, [])


def _row(html: str, label: str) -> str:
    found = re.search(re.escape(html_escape(label)) + r"</td><td>([^<]*)<", html)
    assert found, f"no report row {label!r}"
    return found.group(1)


def test_the_report_counts_the_judges_scores_errors_kappa_and_pairs(lib, source, tmp_path, capsys):
    _, store_path, _ = source
    spec = pref_spec(lib, sources=["judge"], samples_per_query=2, min_judge_margin=1.5)
    d = yaml.safe_load(spec.read_text(encoding="utf-8"))
    d["judge"] = judge_section(threshold=3, below="penalty")
    spec.write_text(yaml.safe_dump(d, allow_unicode=True), encoding="utf-8")
    rs = load_spec(spec)
    with Store.open(store_path) as s:
        # the run that tells the report where the spec file is (as `mashbill generate` records it)
        s.begin_run(spec_name=rs.spec.name, spec_version=1, spec_hash=rs.hash, kind="preference", backend="llama_cpp",
                    model="m", model_sha256=None, model_info=None, sampling={}, args={"spec_path": str(spec)})
        kept = _store_samples(s, rs, "What is 1847 * 23 + 519?", [GOOD, WRONG])
        biased = _store_samples(s, rs, "What is the capital of Canada?", [GENERAL, OTHER])
        small = _store_samples(s, rs, "Wer hat die Relativitätstheorie entwickelt?", [GENERAL, OTHER])
        error = _store_samples(s, rs, "What is 17.5% of 4,360?", [[{**GOOD[0], "task": "Compute 17.5% of 4360",
                                                                    "mcp_args": {"expression": "4360 * 0.175"}}],
                                                                  WRONG])
        _judge(s, rs, kept[0], kept[1], 5, 2)  # consistent, margin 2.5: kept
        _judge(s, rs, kept[1], kept[0], 2, 4)
        _judge(s, rs, biased[0], biased[1], 5, 3)  # whichever is shown first wins: position bias
        _judge(s, rs, biased[1], biased[0], 5, 3)
        _judge(s, rs, small[0], small[1], 4, 3)  # a margin of 1 < 1.5
        _judge(s, rs, small[1], small[0], 3, 4)
        _judge(s, rs, error[0], error[1], 2, 5)  # prefers the plan that fails HR001, in both orders
        _judge(s, rs, error[1], error[0], 5, 1)
        # scores (threshold 3): WRONG passes although it fails HR001, a judge error
        for rec, score in ((kept[0], 5), (kept[1], 4), (biased[0], 2), (biased[1], 4), (small[0], 1)):
            _score(s, rs, rec, score)
        _score(s, rs, small[1], None)
        for rec, decision in ((kept[0], "accept"), (kept[1], "reject"), (biased[0], "reject"), (biased[1], "accept"),
                              (small[0], "accept")):
            decide(s, rec.id, "ann", decision)
    out, data = build_report(store_path, tmp_path / "store.html")
    [j] = [f for f in data["judge"] if f["spec"] == rs.ref]
    assert (j["scored"], j["failed_judgments"], j["below_threshold"]) == (5, 1, 2)
    assert j["scores"] == {"1": 1, "2": 1, "4": 2, "5": 1}
    # judge passes T T F T F, reviewers accept T F F T T: observed 3/5, chance 0.6*0.6 + 0.4*0.4 = 0.52
    assert j["with_human_decision"] == 5 and j["kappa"] == round((0.6 - 0.52) / (1 - 0.52), 4)
    assert j["judge_errors"] == 1 and [(x["record_id"], x["codes"]) for x in j["judge_error_examples"]] == \
        [(kept[1].id, ["HR001"])]
    assert (j["pairs_judged_both_orders"], j["pairs_inconsistent"], j["pairs_below_margin"],
            j["pair_judge_errors"]) == (4, 1, 1, 1)
    html = out.read_text(encoding="utf-8")
    assert _row(html, "agreement with reviewers (Cohen's kappa)") == "0.167 over 5"
    assert _row(html, "judge errors (passed a plan that fails a hard rule)") == "1"
    assert _row(html, "pairs inconsistent across orders (dropped, PREF006)") == "1"
    assert _row(html, "judge errors in pairs (preferred a plan failing a hard rule, PREF008)") == "1"
    assert _row(html, "unparseable judgments (JUDGE001, retried)") == "1"
    assert "<h3>Judge errors</h3>" in html and "fails HR001" in html
    lines = "\n".join(summary_lines(data))
    assert f"judge {rs.ref}: 5 scored" in lines and "kappa 0.167" in lines and "1 inconsistent" in lines

    # the snapshot: the scores of its records (judge.parquet) and its judge pairs, from the manifest
    res = freeze(spec, store_path=store_path, name="jr", version="1", tokens=False)
    snap, sdata = build_report(res.path, tmp_path / "snap.html")
    [sj] = sdata["judge"]
    assert sj["judge_model"] == "embedded:smollm2-135m-instruct" and sj["scored"] == res.manifest["judge"]["scored"]
    assert (sj["pairs_judged_both_orders"], sj["pairs_inconsistent"], sj["pair_judge_errors"], sj["pairs"]) == \
        (4, 1, 1, 1)
    shtml = snap.read_text(encoding="utf-8")
    assert _row(shtml, "judge model") == "embedded:smollm2-135m-instruct"
    assert _row(shtml, "records scored") == str(res.manifest["judge"]["scored"])
    assert _row(shtml, "pairs inconsistent across orders (dropped, PREF006)") == "1"
    assert _row(shtml, "judge pairs kept") == "1"
    assert "None" not in re.search(r"<h2>Judge: .*?</table>", shtml, re.S).group(0)
    from mashbill.cli.curate.snapshot import print_manifest

    capsys.readouterr()
    print_manifest(res.manifest, res.path)  # what `snapshot freeze` prints
    printed = " ".join(capsys.readouterr().out.split())
    assert "judge 1;" in printed and "4 judged in both orders, 1 inconsistent (PREF006)" in printed
    assert f"judge scores: {res.manifest['judge']['scored']} (mean" in printed
