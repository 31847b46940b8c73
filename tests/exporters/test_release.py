"""The release gate (veto, rank, tie-break, record), tags and tag verification, and guard-file errors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import yaml

from mashbill.exporters.release import ReleaseError, decide, load_guards
from tests.conftest import run_cli


def _result(name, heldout, overall, guards_passed, guards_failed):
    items = [{"id": g, "guard": True, "pass": True} for g in guards_passed]
    items += [{"id": g, "guard": True, "pass": False} for g in guards_failed]
    return {"artifact": name, "heldout_accuracy": heldout, "overall_accuracy": overall,
            "guards_failed": sorted(guards_failed), "items": items}


def test_a_candidate_failing_a_guard_the_incumbent_passes_is_vetoed_whatever_its_accuracy():
    inc = _result("inc", 70.0, 70.0, ["g1", "g2"], ["g3"])
    cand = _result("cand", 99.0, 99.0, ["g1", "g3"], ["g2"])
    d = decide(inc, [cand])
    assert d["vetoed"] == [{"candidate": 0, "artifact": "cand", "guards_lost": ["g2"]}]
    assert not d["promote"] and d["winner"] == "incumbent"


def test_failing_a_guard_the_incumbent_also_fails_is_no_veto():
    inc = _result("inc", 70.0, 70.0, ["g1"], ["g3"])
    cand = _result("cand", 80.0, 80.0, ["g1"], ["g3"])
    d = decide(inc, [cand])
    assert d["vetoed"] == [] and d["promote"] and d["winner_artifact"] == "cand"


def test_within_half_a_point_overall_accuracy_decides_and_the_incumbent_stays_on_a_full_tie():
    inc = _result("inc", 80.0, 85.0, ["g"], [])
    better_heldout = _result("a", 80.4, 84.0, ["g"], [])  # +0.4 held-out, but worse overall
    d = decide(inc, [better_heldout])
    assert d["tie_break"] and not d["promote"]
    clearly = _result("b", 80.6, 70.0, ["g"], [])  # +0.6: outside the tie band, held-out decides
    assert decide(inc, [clearly])["winner_artifact"] == "b"
    same = _result("c", 80.0, 85.0, ["g"], [])
    assert not decide(inc, [same])["promote"]
    two = decide(inc, [better_heldout, _result("d", 80.3, 86.0, ["g"], [])])
    assert two["winner_artifact"] == "d" and [r["name"] for r in two["ranking"]][0] == "candidate0"


def test_the_decision_names_the_guard_or_the_score_that_decided():
    inc = _result("inc", 70.0, 70.0, ["g1", "g2"], [])
    vetoed = decide(inc, [_result("cand", 99.0, 99.0, ["g1"], ["g2"])])
    assert vetoed["decided_by"].startswith("guard(s) g2:"), vetoed["decided_by"]
    won = decide(inc, [_result("cand", 80.0, 81.0, ["g1", "g2"], [])])
    assert won["decided_by"] == "held-out accuracy 80.00 (candidate0) against 70.00 (incumbent)"
    lost = decide(inc, [_result("cand", 60.0, 61.0, ["g1", "g2"], [])])
    assert lost["decided_by"] == "held-out accuracy 70.00 (incumbent) against 60.00 (candidate0)"
    tie = decide(inc, [_result("cand", 70.3, 69.0, ["g1", "g2"], [])])
    assert tie["decided_by"].startswith("overall accuracy 70.00 (incumbent) against 69.00 (candidate0)")
    full = decide(inc, [_result("cand", 70.0, 70.0, ["g1", "g2"], [])])
    assert full["decided_by"].startswith("a full tie") and not full["promote"]


@pytest.mark.parametrize("content, needle", [
    ("heldout: [\n  - {text: a, expect: b\n", "guards.yaml:"),
    ("heldout: [{text: a, expect: b}]\n", "'guards'"),
    ("heldout: [{text: a, expect: b}]\nguards: [{text: '', expect: b}]\n", "guards[0]: field 'text'"),
    ("heldout: [{text: a, expect: 3}]\nguards: [{text: a, expect: b}]\n", "heldout[0]: field 'expect'"),
    ("heldout: [{text: a, expect: b, extra: 1}]\nguards: [{text: a, expect: b}]\n", "unknown field"),
    ("- just a list\n", "expected a mapping"),
])
def test_guard_file_errors_name_file_item_and_field(tmp_path, content, needle):
    g = tmp_path / "guards.yaml"
    g.write_text(content, encoding="utf-8")
    with pytest.raises(ReleaseError) as exc:
        load_guards(g)
    assert needle in str(exc.value) and str(g) in str(exc.value)


def test_unparseable_guard_file_on_the_cli_is_one_line_and_writes_no_record(tmp_path, onnx_export):
    path, _ = onnx_export
    g = tmp_path / "guards.yaml"
    g.write_text("heldout: [\n", encoding="utf-8")
    proc = run_cli("release", "check", path, "--incumbent", path, "--guards", g, "--dir", tmp_path / "rel")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and str(g) in proc.stderr
    assert not (tmp_path / "rel").exists()


@pytest.fixture(scope="module")
def worse_export(tmp_path_factory, plan_snapshot):
    """A second real export: the same MiniLM with an untrained head (a plausible bad candidate)."""
    from mashbill.exporters.build import export_onnx
    from tests.exporters.conftest import build_classifier

    run = build_classifier(tmp_path_factory.mktemp("runs") / "untrained", plan_snapshot, steps=0)
    out = tmp_path_factory.mktemp("exports") / "untrained-onnx"
    return export_onnx(run, out=out, snapshot=plan_snapshot.path, latency_samples=5, threads=(1,))[0]


def test_release_check_runs_real_artifacts_and_writes_a_record(tmp_path, onnx_export, worse_export, plan_snapshot):
    from mashbill.exporters.onnx.parity import labelled_texts
    from mashbill.exporters.runs import Snapshot

    good, _ = onnx_export
    snap = Snapshot(plan_snapshot.path, plan_snapshot.manifest)
    texts, gold = labelled_texts(snap)
    tr_texts, tr_gold = labelled_texts(snap, "train")
    guards = {"heldout": [{"text": t, "expect": g} for t, g in zip(texts, gold)],
              "guards": [{"id": f"g{i}", "text": t, "expect": g} for i, (t, g) in enumerate(zip(tr_texts, tr_gold))]}
    gfile = tmp_path / "guards.yaml"
    gfile.write_text(yaml.safe_dump(guards, allow_unicode=True), encoding="utf-8")
    proc = run_cli("release", "check", worse_export, "--incumbent", good, "--guards", gfile, "--dir",
                   tmp_path / "rel", "--json")
    records = list((tmp_path / "rel" / "checks").glob("*.json"))
    assert len(records) == 1
    rec = json.loads(records[0].read_text())
    inc, [cand] = rec["incumbent"], rec["candidates"]
    # the record's verdicts agree with the rule applied to its own per-item answers
    lost = sorted({r["id"] for r in inc["items"] if r["guard"] and r["pass"]} & set(cand["guards_failed"]))
    assert [v["guards_lost"] for v in rec["decision"]["vetoed"]] == ([lost] if lost else [])
    held = [r for r in cand["items"] if not r["guard"]]
    assert cand["heldout_accuracy"] == round(100 * np.mean([r["pass"] for r in held]), 2)
    assert proc.returncode == (0 if rec["decision"]["promote"] else 1)
    # an untrained head on top of a trained one: the trained incumbent stays
    assert not rec["decision"]["promote"]
    assert rec["guards"]["sha256"] and rec["incumbent"]["sha256"] != rec["candidates"][0]["sha256"]


def test_tag_then_verify_then_tamper(tmp_path, onnx_export):
    path, _ = onnx_export
    export = tmp_path / "router"
    shutil.copytree(path, export)
    rel = tmp_path / "rel"
    run_cli("release", "tag", "router-prod", export, "--dir", rel, check=True)
    ok = run_cli("release", "verify", "router-prod", "--dir", rel, check=True)
    assert "model.int8.onnx" in ok.stdout
    again = run_cli("release", "tag", "router-prod", export / "model.onnx", "--dir", rel)
    assert again.returncode == 2 and "already names" in again.stderr
    # tampering with the tagged file: refused, naming it
    with open(export / "model.int8.onnx", "ab") as f:
        f.write(b"\0")
    bad = run_cli("release", "verify", "router-prod", "--dir", rel)
    assert bad.returncode == 1 and str(export / "model.int8.onnx") in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_tampering_with_another_file_of_the_tagged_export_is_named(tmp_path, onnx_export):
    path, _ = onnx_export
    export = tmp_path / "router"
    shutil.copytree(path, export)
    rel = tmp_path / "rel"
    run_cli("release", "tag", "r1", export, "--dir", rel, check=True)
    (export / "tokenizer" / "tokenizer.json").write_text("{}")
    bad = run_cli("release", "verify", "r1", "--dir", rel)
    assert bad.returncode == 1 and "tokenizer/tokenizer.json" in bad.stderr
