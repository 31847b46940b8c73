"""`mashbill train`: the config's store is overridden by --store or MASHBILL_STORE; a stage that cannot run is
refused in one line before any model is loaded. (Training itself: tests/trainers/.)"""

from __future__ import annotations

import json

from tests.cli.conftest import error_lines, invoke


def test_stages_reads_the_store_from_mashbill_store(cli_store, tmp_path):
    store = cli_store.copy(tmp_path / "store")
    res = invoke("train", "stages", "quickstart-sft", "--json", env={"MASHBILL_STORE": str(store)})
    assert res.exit_code == 0 and json.loads(res.stdout) == [], res.output  # no stage has run in this store
    text = invoke("train", "stages", "quickstart-sft", "--store", store)
    assert text.exit_code == 0 and "no stage has run for quickstart-sft" in text.stdout


def test_check_without_the_snapshot_is_one_line(cli_store, tmp_path):
    store = cli_store.copy(tmp_path / "store")
    res = invoke("train", "check", "quickstart-sft", "--json", env={"MASHBILL_STORE": str(store)})
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and "quickstart-plan" in res.stderr, res.output
    assert res.stdout == ""
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmethod: sft\nsnapshot: cli\nbogus: 1\n", encoding="utf-8")
    res = invoke("train", "sft", bad, "--store", store)
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and str(bad) in res.stderr, res.output


def test_dpo_without_a_preference_snapshot_refuses_in_one_line(cli_store, tmp_path, monkeypatch):
    """What `train dpo quickstart-dpo` says in a store where the quick start froze no preference snapshot (its
    plan step accepted nothing): exit 2, one line naming the snapshot, before any model load, no run folder."""
    store = cli_store.copy(tmp_path / "store")
    monkeypatch.chdir(tmp_path)
    res = invoke("train", "dpo", "quickstart-dpo", "--stage", "steps:2", "--store", store)
    assert res.exit_code == 2 and len(error_lines(res)) == 1, res.output
    assert "no snapshot quickstart-preference" in res.stderr and not (tmp_path / "mashbill-runs").exists()
