"""`mashbill judge`: a spec without a judge is refused in one line before anything is opened or asked.
(The judge loop itself, with a scripted judge server: tests/factory/generate/test_judge.py.)"""

from __future__ import annotations

from tests.cli.conftest import error_lines, invoke


def test_a_spec_without_a_judge_is_refused(cli_store, tmp_path):
    store = cli_store.copy(tmp_path / "store")
    res = invoke("judge", cli_store.spec, "--store", store, "--json")
    assert res.exit_code == 2 and len(error_lines(res)) == 1 and "no `judge:` section" in res.stderr, res.output
    assert res.stdout == ""


def test_the_help_examples_name_specs_that_have_a_judge():
    """Every library spec an example names has the `judge:` section the command needs (placeholders in capitals)."""
    from mashbill.cli.make.judge import command
    from mashbill.specs import find_spec, load_spec

    named = [line.split()[2] for line in command.help.splitlines() if line.strip().startswith("mashbill judge ")]
    library = [n for n in named if not n.isupper()]
    assert library, named
    for name in library:
        assert load_spec(find_spec(name)).spec.judge is not None, name


def test_base_url_is_refused_for_an_embedded_judge(tmp_path):
    """Issue 26: --base-url was ignored without a word when the spec's judge is embedded (generate refuses it).
    Refused before the store is opened or the judge loaded."""
    from mashbill.specs import find_spec, load_spec

    rs = load_spec(find_spec("quickstart-plan-grown"))
    assert rs.spec.judge.teacher.backend == "llama_cpp"
    res = invoke("judge", "quickstart-plan-grown", "--store", tmp_path / "store", "--base-url",
                 "http://127.0.0.1:9/v1")
    assert res.exit_code == 2 and len(error_lines(res)) == 1, res.output
    assert "--base-url is for judges with backend 'openai'" in res.stderr and "'llama_cpp'" in res.stderr
    assert not (tmp_path / "store").exists()
