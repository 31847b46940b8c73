"""`mashbill release tag|verify` on a real file: the tag records its sha256; a changed byte is a finding (exit 1).
(The release gate with real students: tests/exporters/test_release.py.)"""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.cli.conftest import error_lines, invoke


def test_tag_and_verify(tmp_path):
    artifact = tmp_path / "model.onnx"
    artifact.write_bytes(b"not really a model, but bytes with a hash")
    rel = tmp_path / "releases"
    res = invoke("release", "tag", "prod", artifact, "--dir", rel, "--json")
    assert res.exit_code == 0, res.output
    tag = json.loads(res.stdout)
    assert tag["sha256"] == hashlib.sha256(artifact.read_bytes()).hexdigest()
    ok = invoke("release", "verify", "prod", "--dir", rel, "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["verified"] is True, ok.output
    artifact.write_bytes(b"not really a model, but bytes with a hash!")
    bad = invoke("release", "verify", "prod", "--dir", rel, "--json")
    assert bad.exit_code == 1 and json.loads(bad.stdout)["verified"] is False, bad.output
    bad = invoke("release", "verify", "prod", "--dir", rel)
    assert bad.exit_code == 1 and "model.onnx" in bad.stderr
    again = invoke("release", "tag", "prod", artifact, "--dir", rel)
    assert again.exit_code == 2 and len(error_lines(again)) == 1, again.output  # a tag moves only with --force
    missing = invoke("release", "verify", "nope", "--dir", rel)
    assert missing.exit_code == 2 and len(error_lines(missing)) == 1


def test_check_with_a_gguf_that_does_not_load_is_one_line_and_writes_no_record(tmp_path):
    """Issue 13's bad input "a GGUF that does not load" at the release gate: exit 2, one line naming the file,
    nothing under the release folder."""
    pytest.importorskip("llama_cpp")
    bad = tmp_path / "planner.q4_k_m.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 4096)  # the magic, then nothing a loader can use
    guards = tmp_path / "guards.yaml"
    guards.write_text("heldout: [{text: 'Was ist 7 hoch 5?', expect: math}]\n"
                      "guards: [{id: g1, text: 'Hallo', expect: general}]\n", encoding="utf-8")
    rel = tmp_path / "releases"
    res = invoke("release", "check", bad, "--incumbent", bad, "--guards", guards, "--dir", rel)
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and str(bad) in res.stderr, res.output
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not rel.exists()
