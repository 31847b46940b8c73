"""`mashbill snapshot freeze|ls|verify|diff|pull|sample` on a real store (the freeze itself: tests/cli/conftest.py)."""

from __future__ import annotations

import json
import shutil

from tests.cli.conftest import error_lines, invoke


def test_ls_verify_diff_and_pull(cli_store, tmp_path):
    store = cli_store.store
    items = json.loads(invoke("snapshot", "ls", "--store", store, "--json").stdout)
    assert [it["ref"] for it in items] == ["cli@1"]
    counts = items[0]["counts"]
    assert counts["train"] + counts["eval"] + counts["test"] == 24  # the parse failure and the HR001 reject left out
    res = invoke("snapshot", "verify", "cli@1", "--store", store, "--json")
    assert res.exit_code == 0, res.output
    v = json.loads(res.stdout)
    assert v["verified"] is True and v["ref"] == "cli@1" and v["snapshot_id"] == items[0]["snapshot_id"]
    d = json.loads(invoke("snapshot", "diff", "cli@1", "cli@1", "--store", store, "--json").stdout)
    assert d["identical"] is True and d["added"] == [] and d["removed"] == []
    text = invoke("snapshot", "diff", "cli@1", "cli@1", "--store", store)
    assert text.exit_code == 0 and "identical content" in text.stdout
    text = invoke("snapshot", "ls", "--verify", "--store", store)
    assert text.exit_code == 0 and "cli@1" in text.stdout and "verified" in text.stdout
    res = invoke("snapshot", "pull", "cli@1", "--format", "prompt-completion", "--store", store,
                 "--out", tmp_path / "pc", "--json")
    assert res.exit_code == 0, res.output
    pulled = json.loads(res.stdout)
    assert {s: v["rows"] for s, v in pulled["splits"].items()} == {k: counts[k] for k in ("train", "eval", "test")}
    assert str(tmp_path / "pc" / "train.jsonl") in pulled["written"]
    first = json.loads((tmp_path / "pc" / "train.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert set(first) == {"prompt", "completion"}


def test_an_altered_snapshot_is_a_finding_and_a_second_freeze_is_refused(cli_store, tmp_path):
    store = cli_store.copy(tmp_path / "store")
    again = invoke("snapshot", "freeze", cli_store.spec, "--name", "cli", "--version", "1", "--store", store,
                   "--no-tokens")
    assert again.exit_code == 2 and len(error_lines(again)) == 1 and "already exists" in again.stderr, again.output
    target = store / "snapshots" / "cli@1" / "data" / "train.parquet"
    target.write_bytes(target.read_bytes()[:-1] + b"\x00")
    # verify finds the alteration (a finding, exit 1); pull refuses to load it (bad input, exit 2)
    for args, code in ((("snapshot", "verify", "cli@1"), 1), (("snapshot", "pull", "cli@1"), 2)):
        res = invoke(*args, "--store", store)
        assert res.exit_code == code and "data/train.parquet: sha256 differs" in res.stderr, res.output
    res = invoke("snapshot", "verify", "cli@1", "--store", store, "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["verified"] is False
    listed = invoke("snapshot", "ls", "--verify", "--store", store, "--json")
    assert listed.exit_code == 1 and json.loads(listed.stdout)[0]["verified"] is False
    # a snapshot that cannot be found is bad input, not a finding
    missing = invoke("snapshot", "verify", "nope@1", "--store", store)
    assert missing.exit_code == 2 and len(error_lines(missing)) == 1


def test_freeze_writes_into_dir_and_sample_refuses_a_spec_without_samples(cli_store, tmp_path):
    store = cli_store.copy(tmp_path / "store")
    shutil.rmtree(store / "snapshots")
    res = invoke("snapshot", "freeze", cli_store.spec, "--name", "elsewhere", "--version", "1", "--store", store,
                 "--dir", tmp_path / "snaps", "--no-tokens", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["ref"] == "elsewhere@1" and (tmp_path / "snaps" / "elsewhere@1").is_dir()
    assert not (store / "snapshots" / "elsewhere@1").exists()
    bad = invoke("snapshot", "sample", cli_store.spec, "--store", store)
    assert bad.exit_code == 2 and len(error_lines(bad)) == 1, bad.output
