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


def test_verify_rows_bounds_verification_and_zero_is_refused(tmp_path):
    """Issue 26: one export spent 13 of its 14.5 minutes verifying one row; `--verify-rows N` bounds it (the old
    name `--verify-limit` still works), and 0 rows is bad input, not "all"."""
    (tmp_path / "not-a-run").mkdir()
    for opt in ("--verify-rows", "--verify-limit"):
        res = invoke("export", "gguf", tmp_path / "not-a-run", opt, "0")
        assert res.exit_code == 2 and "0" in res.stderr and opt in res.stderr, res.output
    res = invoke("export", "gguf", "--help")
    assert "--verify-rows" in res.stdout and "--threads" in res.stdout


def test_verification_progress_names_the_file_and_the_rows():
    """On a terminal one line per verified answer; in a log a plain line at a steady interval (PlainProgress,
    tests/cli/test_convention.py) whose label names the file."""
    from mashbill.cli.ship.export import VerifyProgress

    lines = []
    with VerifyProgress() as p:
        assert p.plain is not None  # pytest's stderr is not a terminal
        p.plain.write = lines.append
        assert lines == []  # nothing before verification starts: a refused export stays one line on stderr
        p("q8_0", 1, 2)
        assert p.plain.line().startswith("export gguf, verify q8_0: 1/2 rows")
    assert lines[-1].startswith("export gguf, verify q8_0: 1/2 rows")
    quiet = VerifyProgress(enabled=False)
    with quiet:
        quiet("q8_0", 1, 2)
    assert quiet.plain is None
