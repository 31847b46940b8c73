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
