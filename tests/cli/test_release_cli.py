"""`mashbill release tag|verify` on a real file: the tag records its sha256; a changed byte is a finding (exit 1).
(The release gate with real students: tests/exporters/test_release.py.)"""

from __future__ import annotations

import hashlib
import json

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
