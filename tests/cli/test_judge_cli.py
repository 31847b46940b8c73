"""`mashbill judge`: a spec without a judge is refused in one line before anything is opened or asked.
(The judge loop itself, with a scripted judge server: tests/factory/test_judge.py.)"""

from __future__ import annotations

from tests.cli.conftest import error_lines, invoke


def test_a_spec_without_a_judge_is_refused(cli_store, tmp_path):
    store = cli_store.copy(tmp_path / "store")
    res = invoke("judge", cli_store.spec, "--store", store, "--json")
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and "no `judge:` section" in res.stderr, res.output
    assert res.stdout == ""
