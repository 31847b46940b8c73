"""`mashbill eval`: refusals that need no trained student, each one line, exit 2, nothing written (a GGUF planner
here is SmolLM2's own GGUF: the sets are checked before any model loads). The real students: tests/exporters/
test_evaluate.py."""

from __future__ import annotations

import pytest

from tests.cli.conftest import error_lines, invoke


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    """A copy of the SmolLM2 GGUF in a folder of its own, so that a stray eval.json would show."""
    import shutil

    from tests.exporters.conftest import smollm2_gguf

    dest = tmp_path_factory.mktemp("gguf") / "planner.gguf"
    try:
        dest.hardlink_to(smollm2_gguf())
    except OSError:
        shutil.copy(smollm2_gguf(), dest)
    return dest


def _refused(res, *words):
    assert res.exit_code == 2 and len(error_lines(res)) == 1, res.output
    for w in words:
        assert w in res.stderr, res.stderr


def test_a_classifier_set_on_a_planner(gguf, tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"query": "Hi!", "label": "trivial"}\n', encoding="utf-8")
    _refused(invoke("eval", gguf, "--on", path), "labels.jsonl", "a classifier set (gold labels) on a planner")
    _refused(invoke("eval", gguf, "--on", "yardstick:complexity"), "a classifier set")
    assert sorted(p.name for p in gguf.parent.iterdir()) == ["planner.gguf"]


@pytest.mark.parametrize("content, why", [
    ("\n\n", "holds no rows"),
    ('{"query": "Hi!", "plan": {"tool": "calculate"}}\n{"query": "Yo", "label": "trivial"}\n',
     ":2: mixes classifier rows"),
    ('{"query": "Hi!", "plan": {"categories": "general"}}\n', ":1: field 'plan.categories'"),
    ('{"query": 3, "plan": {"tool": null}}\n', ":1: field 'query'"),
    ("not json\n", ":1: not a UTF-8 JSON line"),
])
def test_bad_planner_sets(gguf, tmp_path, content, why):
    path = tmp_path / "plans.jsonl"
    path.write_text(content, encoding="utf-8")
    _refused(invoke("eval", gguf, "--on", path), "plans.jsonl", why)
    assert sorted(p.name for p in gguf.parent.iterdir()) == ["planner.gguf"]


def test_unknown_sets_and_targets(gguf, tmp_path):
    _refused(invoke("eval", gguf, "--on", "yardstick:plans"), "no shipped yardstick 'plans'")
    _refused(invoke("eval", gguf, "--on", "yardstick:complexity:middle"), "half 'middle'")
    _refused(invoke("eval", gguf, "--on", tmp_path / "missing.jsonl"), "missing.jsonl: no such file")
    _refused(invoke("eval", gguf, "--on", "snapshot:nope@1", "--store", tmp_path), "snapshot:nope@1")
    _refused(invoke("eval", tmp_path / "nothing", "--on", "yardstick:complexity"), "nothing")


def test_a_planner_run_folder_is_sent_to_its_gguf_export(tmp_path):
    import json

    from mashbill.trainers.runfolder import weight_hashes

    run, base = tmp_path / "sft-run", tmp_path / "base"
    (run / "adapter").mkdir(parents=True)
    base.mkdir()
    (base / "config.json").write_text("{}", encoding="utf-8")
    (run / "adapter" / "adapter_config.json").write_text("{}", encoding="utf-8")
    (run / "lineage.json").write_text(json.dumps({
        "schema": "mashbill.lineage/1", "run_id": "r1", "method": "sft", "config_sha256": "0" * 64,
        "snapshot": {"name": "s", "version": "1", "id": "x"}, "spec_hashes": {}, "base_model": {"path": str(base)},
        "files": weight_hashes(run)}), encoding="utf-8")
    _refused(invoke("eval", run, "--on", "yardstick:complexity"), "an sft run (a planner): evaluate its GGUF export")
    assert not (run / "eval.json").exists()
