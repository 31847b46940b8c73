"""`mashbill review` without a server: where push/pull would go, a clear line when nothing answers, the API key
never printed. (Against a real argilla-server: tests/curation/review/.)"""

from __future__ import annotations

import json

from tests.cli.conftest import error_lines, invoke
from tests.conftest import free_port


def test_status_and_stop_without_a_server(tmp_path):
    res = invoke("review", "status", "--home", tmp_path / "home", "--json", env={"ARGILLA_API_URL": ""})
    assert res.exit_code == 0 and json.loads(res.stdout) == {"api_url": None, "embedded": None}, res.output
    res = invoke("review", "status", "--json", env={"ARGILLA_API_URL": "http://example.invalid:6900",
                                                    "MASHBILL_REVIEW_HOME": str(tmp_path / "home")})
    assert json.loads(res.stdout)["api_url"] == "http://example.invalid:6900"
    res = invoke("review", "stop", "--json", env={"MASHBILL_REVIEW_HOME": str(tmp_path / "home")})
    assert res.exit_code == 0 and json.loads(res.stdout) == {"stopped": None, "home": str(tmp_path / "home")}


def test_push_to_a_server_that_does_not_answer_is_one_line(cli_store, tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    res = invoke("review", "push", cli_store.spec, "--store", cli_store.store,
                 env={"ARGILLA_API_URL": url, "ARGILLA_API_KEY": "secret-key-never-shown"})
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and f"cannot reach the Argilla server at {url}" \
        in res.stderr, res.output
    assert "secret-key-never-shown" not in res.output
    res = invoke("review", "pull", cli_store.spec, "--store", cli_store.store, "--api-url", url,
                 env={"ARGILLA_API_KEY": ""})
    assert res.exit_code == 2 and "ARGILLA_API_KEY is not" in res.stderr, res.output
