"""One fixture file per routing rule (tests/validators/fixtures/<rule-id>.yaml), each with positive and negative
cases in English and German; every case states whether the rule's code must fire."""

from __future__ import annotations

import pytest
import yaml

from mashbill.specs.loader import LIBRARY
from mashbill.validators.plans.drift import instruction_lines, worked_examples
from mashbill.validators.plans.plans import Shown
from mashbill.validators.plans.routing import RULES, check_plan, unknown_rule_ids

from vhelpers import FIXTURES

FULL_TAXONOMY = ["general", "technical_support", "code_reviewer", "math", "data_analyst", "science",
                 "creative_writer", "medical_consult", "legal_advisor", "translation", "reasoning", "vision",
                 "agentic_coder", "research", "precision_tools", "dynamic"]


# the worked examples of every block of the planner prompt (the no-parroting rule compares tasks with them)
EXAMPLES = worked_examples((LIBRARY / "shared" / "prompts" / "planner@1.yaml").read_text(encoding="utf-8")
                           .replace("\n    ", "\n"))
# the instruction lines of the quick start's planner prompt (framings and blocks; the no-prompt-echo rule compares tasks
# with them)
_PLANNER = yaml.safe_load((LIBRARY / "shared" / "prompts" / "planner@2.yaml").read_text(encoding="utf-8"))
INSTRUCTIONS = instruction_lines(*_PLANNER["framings"].values(), *_PLANNER["blocks"].values())


def _cases():
    for f in sorted(FIXTURES.glob("*.yaml")):
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        for i, case in enumerate(data["cases"]):
            yield pytest.param(data["rule"], data["code"], case, id=f"{data['rule']}:{i}:{case['name']}")


def test_every_rule_has_a_fixture_file_with_both_languages_and_both_outcomes(ruleset):
    assert not unknown_rule_ids(ruleset)
    for entry in ruleset.rules:
        f = FIXTURES / f"{entry.id}.yaml"
        assert f.is_file(), f"rule {entry.id} has no fixture file"
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        assert data["rule"] == entry.id and data["code"] == entry.code
        seen = {(c["lang"], c["expect"]) for c in data["cases"]}
        for lang in ("en", "de"):
            for expect in (True, False):
                assert (lang, expect) in seen, f"{f.name} lacks a {lang} case with expect={expect}"
    assert set(RULES) == {r.id for r in ruleset.rules}


@pytest.mark.parametrize("rule_id,code,case", list(_cases()))
def test_fixture_case(rule_id, code, case, ruleset, catalog):
    shown = Shown(frozenset(case.get("shown", FULL_TAXONOMY)), dict(case.get("renamed", {})))
    verdicts = check_plan(ruleset, case["query"], case["plan"], shown, catalog, examples=EXAMPLES,
                          instructions=INSTRUCTIONS)
    fired = [v for v in verdicts if v.code == code]
    if case["expect"]:
        assert fired, f"{code} did not fire; verdicts: {verdicts}"
        assert all(v.detail.startswith(rule_id) for v in fired)
        entry = ruleset.by_id[rule_id]
        assert all(v.severity == entry.severity and v.stage == "validate" for v in fired)
    else:
        assert not fired, f"{code} fired unexpectedly: {fired}"


def test_the_planner_prompt_has_worked_examples():
    assert len(EXAMPLES) >= 10 and any("Snake" in e.request for e in EXAMPLES)
