"""The plan side of bench/yield.py (`--yardstick plan`): each method's spec is quickstart-plan@7 with the plan
yardstick's requests and the method's section, and one real single-shot run with the embedded teacher counts as
right exactly what the yardstick scorer says of its accepted records."""

from __future__ import annotations

import importlib
from argparse import Namespace
from pathlib import Path

import pytest
import yaml

from mashbill.exporters.evaluation.plan_yardstick import load_rows
from mashbill.specs import load_spec
from mashbill.specs.loader import spec_home

# bench/yield.py (`yield` is a keyword, so importlib; bench/checks/conftest.py puts bench/ on the path)
bench = importlib.import_module("yield")
ARGS = Namespace(attempts=2, samples=3, threads=1)


@pytest.mark.parametrize("method", ["single", "repair", "restart", "best_of_n"])
def test_each_plan_method_is_quickstart_plan_7_with_its_section(tmp_path, method):
    rows = load_rows("report")[:3]
    rs = load_spec(bench.plan_method_spec(tmp_path, method, rows, ARGS))
    base = load_spec(bench.PLAN_SPEC)
    assert rs.spec.kind == "plan" and rs.spec.teacher == base.spec.teacher
    assert Path(rs.spec.rules) == (spec_home(bench.PLAN_SPEC) / base.spec.rules).resolve()
    data = yaml.safe_load(next(tmp_path.glob("*.yaml")).read_text(encoding="utf-8"))
    assert data["seeds"] == [{"inline": [{"query": r["query"], "lang": r["lang"]} for r in rows]}]
    assert (data.get("repair") or {}).get("max_attempts") == (2 if method in ("repair", "restart") else None)
    assert (data.get("repair") or {}).get("mode") == ("restart" if method == "restart" else None)
    assert data.get("samples") == ({"n": 3, "pick": "first-accepted"} if method == "best_of_n" else None)


def test_the_retrieved_plan_methods_are_quickstart_plan_8_with_its_bank_and_holdout(tmp_path):
    rows = load_rows("report")[:3]
    rs = load_spec(bench.plan_method_spec(tmp_path, "repair+retrieved", rows, ARGS))
    base = load_spec(bench.PLAN_RETRIEVED_SPEC)
    assert rs.spec.examples.k == base.spec.examples.k and rs.spec.repair.max_attempts == 2
    assert rs.file_paths["examples.bank"] == base.file_paths["examples.bank"]  # the same bank file
    assert [Path(h) for h in rs.spec.holdout] == [(base.home / h).resolve() for h in base.spec.holdout]
    assert rs.spec.prompt.teacher == base.spec.prompt.teacher


def test_a_limited_run_spans_the_sources():
    rows = bench.load_plan_rows("report")
    assert sorted(r["query"] for r in rows) == sorted(r["query"] for r in load_rows("report"))
    n = len({r["source"] for r in rows})
    assert len({r["source"] for r in rows[:n]}) == n  # the first of every source come first


@pytest.mark.parametrize("method", ["vote", "vote+retrieved"])
def test_a_method_without_a_plan_side_is_refused(tmp_path, method):
    with pytest.raises(SystemExit, match="no plan side"):
        bench.plan_method_spec(tmp_path, method, load_rows("report")[:1], ARGS)


def test_a_vote_on_the_plan_side_is_refused_before_any_method_runs(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["yield.py", "--yardstick", "plan", "--methods", "single", "vote+retrieved"])
    with pytest.raises(SystemExit) as stop:
        bench.main()
    assert stop.value.code == 2 and "(no vote)" in capsys.readouterr().err


@pytest.mark.timeout(900)
def test_a_real_single_shot_run_is_scored_by_the_yardstick(tmp_path):
    pytest.importorskip("llama_cpp")
    from mashbill.exporters.evaluation.plan_yardstick import score_records
    from mashbill.factory.store import Store
    from mashbill.factory.teachers import make_teacher

    rows = [r for r in load_rows("all") if r["query"] in ("Hi there!", "What is 1847 * 23 + 519?")]
    teacher = make_teacher(load_spec(bench.PLAN_SPEC).spec.teacher, threads=1)
    try:
        res = bench.run_plan_method("single", rows, teacher, tmp_path, ARGS)
    finally:
        teacher.close()
    with Store.open(tmp_path / "plan-single", read_only=True, create=False) as store:
        records = store.records()
    scored = score_records(records, rows)
    assert res["requests"] == 2 and len(records) == 2 and res["calls"] >= 2
    assert (res["accepted"], res["right"]) == (scored["accepted"], scored["right"])
    assert res["right_per_100"] == 50 * scored["right"] and res["wrong_by"] == scored["wrong_by"]
