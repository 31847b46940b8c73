"""`mashbill report`: one HTML file for a snapshot or a store, and its summary (text or JSON)."""

from __future__ import annotations

import json

from tests.cli.conftest import error_lines, invoke


def test_report_of_a_snapshot_and_of_the_store(cli_store, tmp_path):
    res = invoke("report", "cli@1", "--store", cli_store.store, "--out", tmp_path / "r.html", "--json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["report"] == str(tmp_path / "r.html") and "cli@1" in got["title"]
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert html.startswith("<!") and "cli@1" in html
    text = invoke("report", cli_store.store, "--out", tmp_path / "s.html")
    assert text.exit_code == 0 and f"report: {tmp_path / 's.html'}" in text.stdout and (tmp_path / "s.html").is_file()


def test_report_of_nothing_is_bad_input(tmp_path):
    res = invoke("report", tmp_path / "nothing-here", "--out", tmp_path / "r.html")
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and not (tmp_path / "r.html").exists(), res.output
