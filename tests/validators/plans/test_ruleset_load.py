"""A user's rule set is refused at load with one line naming the file, line and field: an unknown rule id, a bad
threshold, a broken regular expression."""

from __future__ import annotations

import pytest

from mashbill.errors import SpecError
from mashbill.validators.plans.ruleset import DEFAULT_RULES, load_ruleset


def _variant(tmp_path, old: str, new: str):
    text = DEFAULT_RULES.read_text(encoding="utf-8")
    assert old in text
    text = text.replace(old, new, 1)
    p = tmp_path / "my-rules.yaml"
    p.write_text(text, encoding="utf-8")
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if new.splitlines()[0].strip() in ln)
    return p, line


@pytest.mark.parametrize("old,new,field,says", [
    ("  - id: precision-first\n", "  - id: precision-frist\n", "rules.12.id", "unknown rule id 'precision-frist' "
                                                                             "(did you mean 'precision-first'?)"),
    ("  parrot_share: 0.6\n", "  parrot_share: 1.6\n", "drift.parrot_share", "less than or equal to 1"),
    ("  threshold: 0.7\n", "  threshold: -0.7\n", "checks.leakage.threshold", "greater than 0"),
    ("  calc_cue:\n", "  calc_cue:\n    - '(?<!\\w)(unclosed'\n", "contexts.calc_cue.0", "invalid regular expression"),
    ("        - '(?<!\\w)(?:write|compose", "        - '[unclosed'\n        - '(?<!\\w)(?:write|compose",
     "creative_request.triggers.0.any.0", "invalid regular expression"),
    ("    - '(?=\\w*", "    - '(?P<x'\n    - '(?=\\w*", "search_query.identifier.0", "invalid regular expression"),
    ("        - '(?<!\\w)(?:translate|", "        - '(?:x'\n        - '(?<!\\w)(?:translate|",
     "translation_request.triggers.0.any.0", "invalid regular expression"),
    ("          - '(?<!\\w)(?:side[- ]effects", "          - '(?:x'\n          - '(?<!\\w)(?:side[- ]effects",
     "category_request.medical_consult.triggers.0.any.0", "invalid regular expression"),
    ("  cues: moe-complexity@1.yaml\n", "  cues: moe-complexity@9.yaml\n", "recall_request.cues", "names no file"),
    # tool-unfounded's option arguments (@7): an argument name, under its own key
    ("  option_args: [operation, operations,", "  option_args: [Operation-Name, operations,", "fidelity.option_args",
     "not an argument name"),
    ("  option_args: [operation, operations,", "  option_arg: [operation, operations,", "fidelity.option_arg",
     "unknown key"),
])
def test_bad_rule_set_is_one_line_with_file_line_and_field(tmp_path, old, new, field, says):
    p, line = _variant(tmp_path, old, new)
    with pytest.raises(SpecError) as err:
        load_ruleset(p)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{p}:") and f"field '{field}'" in msg and says in msg
    assert err.value.line is not None and abs(err.value.line - line) <= 1


def test_the_cli_refuses_an_unknown_rule_id(tmp_path):
    from click.testing import CliRunner

    from mashbill.cli import main

    p, _ = _variant(tmp_path, "  - id: no-drift\n", "  - id: no-drfit\n")
    f = tmp_path / "rows.jsonl"
    f.write_text('{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "[]"}]}\n')
    res = CliRunner().invoke(main, ["validate", str(f), "--format", "messages", "--rules", str(p), "--no-spans"])
    assert res.exit_code == 2 and "unknown rule id 'no-drfit'" in res.output and str(p) in res.output
