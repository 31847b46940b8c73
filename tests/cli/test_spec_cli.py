"""`mashbill spec ls|show|check|lock` on a private spec folder: an unlocked spec is a finding until it is locked."""

from __future__ import annotations

import json

from tests.cli.conftest import error_lines, invoke


def test_ls_show_check_lock(lib, tmp_path):
    spec = lib.write("spec-cli")
    folder = spec.parent
    listed = json.loads(invoke("spec", "ls", folder, "--json").stdout)
    assert [(r["spec"], r["kind"], r["seeds"]) for r in listed] == [("spec-cli@1", "plan", 26)]
    shown = invoke("spec", "show", spec, "--json")
    assert shown.exit_code == 0, shown.output
    s = json.loads(shown.stdout)
    assert s["spec"] == "spec-cli@1" and s["hash"] == listed[0]["hash"] and s["seeds"] == 26
    assert s["files"]["output_schema"]["sha256"] and s["trainer_profile"]["max_seq_len"] == 1024
    check = invoke("spec", "check", folder)
    assert check.exit_code == 1 and "FAIL spec-cli@1" in check.stdout, check.output  # not locked yet
    locked = invoke("spec", "lock", folder, "--json")
    assert locked.exit_code == 0 and json.loads(locked.stdout)["locked"][0]["spec"] == "spec-cli@1"
    check = invoke("spec", "check", folder, "--json")
    assert check.exit_code == 0, check.output
    assert json.loads(check.stdout) == [{"path": str(spec), "spec": "spec-cli@1", "hash": s["hash"], "problems": []}]
    spec.write_text(spec.read_text(encoding="utf-8").replace("max_seq_len: 1024", "max_seq_len: 1000"),
                    encoding="utf-8")
    edited = invoke("spec", "check", folder, "--json")
    assert edited.exit_code == 1 and "content changed" in json.loads(edited.stdout)[0]["problems"][0]


def test_show_of_an_unknown_spec_is_one_line(tmp_path):
    res = invoke("spec", "show", tmp_path / "nope@1.yaml")
    assert res.exit_code == 2 and len(error_lines(res)) == 1, res.output
