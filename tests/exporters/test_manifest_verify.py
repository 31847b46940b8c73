"""One chain of hashes (issue 26): `predict`, `release check` and `release tag` verify an export against its
export.json before they use it; a changed artifact is one line naming the file, exit 2, and nothing is written."""

from __future__ import annotations

import shutil

import pytest

from mashbill.exporters.manifest import verified_artifact
from mashbill.exporters.runs import ExportError
from tests.conftest import one_line_error, run_cli

GUARDS = ("heldout: [{text: 'Was ist 7 hoch 5?', expect: math}]\n"
          "guards: [{id: g1, text: 'Hallo', expect: general}]\n")


@pytest.fixture()
def altered(tmp_path, onnx_export):
    """A copy of a real ONNX export whose INT8 graph had 4 KB of weights zeroed after export (same size)."""
    path, _ = onnx_export
    export = tmp_path / "router"
    shutil.copytree(path, export)
    target = export / "model.int8.onnx"
    with open(target, "r+b") as f:  # inside the weights: onnxruntime still loads it and answers
        f.seek(target.stat().st_size // 2)
        f.write(b"\0" * 4096)
    return export


def test_the_helper_names_the_changed_file_and_passes_an_intact_export(tmp_path, onnx_export, altered):
    path, m = onnx_export
    art, got = verified_artifact(path)
    assert art == path / "model.int8.onnx" and got["artifacts"] == m["artifacts"]
    with pytest.raises(ExportError, match="changed after export") as exc:
        verified_artifact(altered / "model.int8.onnx")
    assert str(altered / "model.int8.onnx") in str(exc.value)
    with pytest.raises(ExportError, match="model.int8.onnx"):  # the fp32 graph is fine, its export is not
        verified_artifact(altered / "model.onnx")
    stray = tmp_path / "stray"
    shutil.copytree(path, stray)
    shutil.copy(stray / "model.onnx", stray / "model.evil.onnx")
    with pytest.raises(ExportError, match="does not list it"):
        verified_artifact(stray / "model.evil.onnx")


def test_predict_refuses_an_altered_export(altered):
    one_line_error(run_cli("predict", altered / "model.int8.onnx", "Was ist 7 hoch 5?"),
              str(altered / "model.int8.onnx"), "changed after export")
    one_line_error(run_cli("predict", altered, "Was ist 7 hoch 5?"), str(altered / "model.int8.onnx"))


def test_release_check_and_tag_refuse_an_altered_candidate_and_write_nothing(tmp_path, onnx_export, altered):
    path, _ = onnx_export
    guards = tmp_path / "guards.yaml"
    guards.write_text(GUARDS, encoding="utf-8")
    rel = tmp_path / "rel"
    one_line_error(run_cli("release", "check", altered, "--incumbent", path, "--guards", guards, "--dir", rel),
              str(altered / "model.int8.onnx"), "changed after export")
    one_line_error(run_cli("release", "check", path, "--incumbent", altered, "--guards", guards, "--dir", rel),
              str(altered / "model.int8.onnx"))
    one_line_error(run_cli("release", "tag", "router-prod", altered, "--dir", rel), str(altered / "model.int8.onnx"))
    assert not rel.exists()
