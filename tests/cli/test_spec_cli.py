"""`mashbill spec ls|show|check|lock` on a private spec folder: an unlocked spec is a finding until it is locked."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.cli.conftest import error_lines, invoke


def _spec(tiny_specs: Path) -> Path:
    return tiny_specs / "tiny" / "tiny-plan@1.yaml"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


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
    assert check.exit_code == 1 and "FAIL spec spec-cli@1" in check.stdout, check.output  # not locked yet
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


def test_cli_prints_one_line_without_traceback(tiny_specs):
    p = _spec(tiny_specs)
    _edit(p, "max_tokens: 48", "max_tokens: lots")
    proc = invoke("spec", "show", p)
    assert proc.exit_code == 2
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1
    assert re.search(rf"{re.escape(str(p.resolve()))}:\d+: field 'teacher.sampling.max_tokens'", lines[0])


def test_spec_check_fails_when_a_prompt_changes_without_a_version_bump(tiny_specs):
    assert invoke("spec", "lock", tiny_specs).exit_code == 0
    ok = invoke("spec", "check", tiny_specs)
    assert ok.exit_code == 0, ok.stdout
    _edit(tiny_specs / "shared" / "tiny-prompt@1.yaml", "You plan how", "You decide how")
    bad = invoke("spec", "check", tiny_specs)
    assert bad.exit_code == 1
    failing = [line for line in bad.stdout.splitlines() if line.startswith("FAIL")]
    # tiny-plan and tiny-complexity both reference the edited prompt file
    assert any("tiny-plan@1" in line and "bump" in line for line in failing)
    assert any("tiny-complexity@1" in line for line in failing)
    # lock refuses to paper over it; a version bump is the way
    assert invoke("spec", "lock", tiny_specs).exit_code == 1
    p = _spec(tiny_specs)
    p.rename(p.with_name("tiny-plan@2.yaml"))
    _edit(p.with_name("tiny-plan@2.yaml"), "version: 1", "version: 2")
    c = tiny_specs / "tiny" / "tiny-complexity@1.yaml"
    c.rename(c.with_name("tiny-complexity@2.yaml"))
    _edit(c.with_name("tiny-complexity@2.yaml"), "version: 1", "version: 2")
    assert invoke("spec", "lock", tiny_specs).exit_code == 0
    assert invoke("spec", "check", tiny_specs).exit_code == 0
