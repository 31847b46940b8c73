"""`mashbill eval` on a GGUF planner: SmolLM2-135M's own GGUF stamped with the metadata `mashbill export gguf` writes
(the plan snapshot's output schema, a training system prompt, the artifact lineage naming the snapshot), the way
the GGUF exporter stamps a merged student, on a two-row user set of gold plan facts. The schema-valid and rule-pass
rates and the facts right are recomputed here from the answers eval.json records, with the same checker."""

from __future__ import annotations

import json

import pytest

from mashbill.curation.snapshots.snapshot import verify
from mashbill.exporters.runs import Snapshot
from mashbill.specs.loader import load_spec
from tests.cli.conftest import invoke
from tests.exporters.conftest import plan_snapshot, smollm2_gguf  # noqa: F401

pytest.importorskip("llama_cpp")
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def planner(tmp_path_factory, plan_snapshot):  # noqa: F811
    from mashbill.exporters.gguf.gguf_meta import copy_with_metadata

    snap = Snapshot(plan_snapshot.path, verify(plan_snapshot.path))
    rs = load_spec(snap.spec_path())
    out = tmp_path_factory.mktemp("planner-gguf") / "model.gguf"
    lineage = {"schema": "mashbill.artifact-lineage/1", "snapshot": {"ref": snap.manifest["ref"],
                                                                    "id": snap.manifest["snapshot_id"]}}
    copy_with_metadata(smollm2_gguf(), out, {"mashbill.output_schema": json.dumps(rs.output_schema),
                                             "mashbill.system_prompt": "Plan the request as a JSON array of tasks.",
                                             "mashbill.lineage": json.dumps(lineage)})
    return out, rs


def test_eval_of_a_gguf_planner_on_gold_plan_facts(planner, plan_snapshot, tmp_path):  # noqa: F811
    from mashbill.exporters.evaluation.eval_metrics import plan_facts
    from mashbill.validators.checker import RecordChecker
    from mashbill.validators.plans.toolargs import compile_schema

    gguf, rs = planner
    path = tmp_path / "plans.jsonl"
    rows = [{"query": "What is 17 times 23?", "plan": {"categories": ["precision_tools"], "tool": "calculate"}},
            {"query": "Write a short poem about autumn.", "plan": {"categories": ["creative_writer"], "tool": None}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    store = plan_snapshot.path.parent.parent  # the store the snapshot was frozen from (STORE/snapshots/NAME@V)
    res = invoke("eval", gguf, "--on", path, "--store", store, "--max-tokens", "96")
    assert res.exit_code == 0, res.output
    doc = json.loads((gguf.parent / "eval.json").read_text())
    assert doc["target"]["form"] == "gguf" and doc["target"]["snapshot"] == str(plan_snapshot.path)
    got = doc["sets"][str(path)]
    st = got["student"]
    assert st["n"] == 2 and st["rules"] == f"validators:{RecordChecker.for_spec(rs).ruleset.name}@" \
                                            f"{RecordChecker.for_spec(rs).ruleset.version}"
    outputs = [p["output"] for p in got["predictions"]]
    schema_err = compile_schema(rs.output_schema)
    checker = RecordChecker.for_spec(rs)
    valid = [o is not None and schema_err(o) is None for o in outputs]
    passed = [v and not any(x.severity == "reject" for x in checker.check({"query": r["query"]}, o))
              for v, o, r in zip(valid, outputs, rows)]
    assert st["schema_valid_rate"] == sum(valid) / 2 and st["rule_pass_rate"] == sum(passed) / 2
    cats = [plan_facts(o)["categories"] == r["plan"]["categories"] for o, r in zip(outputs, rows)]
    assert st["categories_right"] == sum(cats) / 2 and st["categories_n"] == 2 and st["tool_n"] == 2
    # the reverse of the refusal test: a planner set on a classifier is refused in tests/exporters/evaluation/test_evaluate.py


def test_a_plan_snapshot_gives_a_planner_its_plans_facts(planner, plan_snapshot):  # noqa: F811
    from mashbill.exporters.evaluation.eval_metrics import plan_facts
    from mashbill.exporters.evaluation.eval_sets import load_set

    gguf, _ = planner
    store = plan_snapshot.path.parent.parent
    s = load_set("snapshot:plans@1:eval", store=store, want="planner")
    rows = [r for r in Snapshot(plan_snapshot.path, verify(plan_snapshot.path)).rows("eval")
            if r.get("row_kind") in (None, "sft") and not r.get("copy")]
    assert s.kind == "planner" and rows and s.queries == [r["query"] for r in rows]
    assert s.gold == [plan_facts(json.loads(r["completion"])) for r in rows]
    # the same snapshot read for a classifier: its category sets
    c = load_set("snapshot:plans@1:eval", store=store, want="classifier")
    assert c.kind == "classifier" and c.multi_label and len(c) >= 1
    res = invoke("eval", gguf, "--on", "snapshot:plans@1:eval", "--limit", "1", "--max-tokens", "64",
                 "--store", store)
    assert res.exit_code == 0, res.output
    assert json.loads((gguf.parent / "eval.json").read_text())["sets"]["snapshot:plans@1:eval"]["rows"] == 1


def test_eval_of_a_gguf_planner_on_the_plan_yardstick(planner, plan_snapshot):  # noqa: F811
    """`--on yardstick:plan`: every answer judged by plan_verdict against its hand-labelled row; the share right
    and the reasons recomputed here from the answers eval.json records."""
    from mashbill.exporters.evaluation.eval_metrics import plan_verdict, plan_yardstick
    from mashbill.exporters.evaluation.plan_yardstick import gold_facts, load_rows, renames

    gguf, _ = planner
    res = invoke("eval", gguf, "--on", "yardstick:plan", "--limit", "2", "--max-tokens", "64",
                 "--store", plan_snapshot.path.parent.parent)
    assert res.exit_code == 0, res.output
    got = json.loads((gguf.parent / "eval.json").read_text())["sets"]["yardstick:plan"]
    rows = load_rows("report")[:2]
    assert got["rows"] == 2 and [p["query"] for p in got["predictions"]] == [r["query"] for r in rows]
    outputs = [p["output"] for p in got["predictions"]]
    assert got["student"]["yardstick"] == plan_yardstick(outputs, [gold_facts(r) for r in rows], renames())
    want = [plan_verdict(o, gold_facts(r), renames()) for o, r in zip(outputs, rows)]
    assert [p["wrong"] for p in got["predictions"]] == want
