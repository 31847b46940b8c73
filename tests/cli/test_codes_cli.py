"""`mashbill codes`: the code registry as a table, a prefix filter, JSON and the docs/codes.md table."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mashbill.cli import main
from mashbill.factory.codes import CODES, TABLE_END, TABLE_START, markdown_table


def test_codes_command(tmp_path):
    res = CliRunner().invoke(main, ["codes", "--json"])
    assert res.exit_code == 0
    listed = json.loads(res.output)
    assert {c["code"] for c in listed} == set(CODES) and all(c["meaning"] for c in listed)
    res = CliRunner().invoke(main, ["codes", "arg"])
    assert res.exit_code == 0 and res.output.count("\n") == 4 and "ARG002" in res.output and "HR001" not in res.output
    assert CliRunner().invoke(main, ["codes", "NOPE"]).exit_code == 2
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{TABLE_START}\nold\n{TABLE_END}\n", encoding="utf-8")
    assert CliRunner().invoke(main, ["codes", "--update-doc", str(readme)]).exit_code == 0
    assert markdown_table() in readme.read_text(encoding="utf-8")
