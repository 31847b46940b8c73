"""`mashbill export`: a folder that is not a training run is refused in one line and nothing is written.
(Real ONNX and GGUF exports: tests/exporters/.)"""

from __future__ import annotations

from tests.cli.conftest import error_lines, invoke


def test_export_of_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "not-a-run").mkdir()
    for kind in ("onnx", "gguf"):
        res = invoke("export", kind, tmp_path / "not-a-run", "--out", tmp_path / f"out-{kind}", "--json")
        assert res.exit_code == 2 and len(error_lines(res)) == 1 and "not-a-run" in res.stderr, res.output
        assert res.stdout == "" and not (tmp_path / f"out-{kind}").exists()
