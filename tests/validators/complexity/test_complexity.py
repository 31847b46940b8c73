"""One fixture file per complexity rule (tests/validators/fixtures/complexity/<rule-id>.yaml), with hits and
non-hits in English and German; every case states whether the rule's code must fire on its label."""

from __future__ import annotations

import pytest
import yaml

from mashbill.specs.loader import LIBRARY
from mashbill.validators.complexity.complexity import RULES, analyze, check_complexity, heuristic
from mashbill.validators.complexity.complexity_rules import load_complexity_rules

from vhelpers import FIXTURES

RULES_FILE = LIBRARY / "shared" / "rules" / "moe-complexity@1.yaml"
RULES_FILES = {v: LIBRARY / "shared" / "rules" / f"moe-complexity@{v}.yaml" for v in (1, 2, 3)}
CASES = FIXTURES / "complexity"


@pytest.fixture(scope="module")
def crules():
    return load_complexity_rules(RULES_FILE)


@pytest.fixture(scope="module", params=sorted(RULES_FILES), ids=lambda v: f"moe-complexity@{v}")
def every_rules(request):
    return load_complexity_rules(RULES_FILES[request.param])


def _cases():
    for f in sorted(CASES.glob("*.yaml")):
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        for i, case in enumerate(data["cases"]):
            yield pytest.param(data["rule"], data["code"], case, id=f"{data['rule']}:{i}:{case['name']}")


def test_every_rule_has_a_fixture_file_with_both_languages_and_both_outcomes():
    latest = load_complexity_rules(RULES_FILES[max(RULES_FILES)])
    assert set(RULES) == {r.id for r in latest.rules}
    for entry in latest.rules:
        f = CASES / f"{entry.id}.yaml"
        assert f.is_file(), f"rule {entry.id} has no fixture file"
        data = yaml.safe_load(f.read_text(encoding="utf-8"))
        assert data["rule"] == entry.id and data["code"] == entry.code
        seen = {(c["lang"], c["expect"]) for c in data["cases"]}
        for lang in ("en", "de"):
            for expect in (True, False):
                assert (lang, expect) in seen, f"{f.name} lacks a {lang} case with expect={expect}"


@pytest.mark.parametrize("rule_id,code,case", list(_cases()))
def test_fixture_case(rule_id, code, case, every_rules):
    """A case with `since: N` is a gap of the rule sets before version N: there the code must not fire."""
    crules = every_rules
    verdicts = check_complexity(crules, case["query"], {"complexity": case["label"]}, case.get("history", 0))
    fired = [v for v in verdicts if v.code == code]
    if case["expect"] and crules.version >= case.get("since", 1):
        assert fired, f"{code} did not fire; verdicts: {verdicts}"
        entry = crules.by_id[rule_id]
        assert all(v.severity == entry.severity and v.stage == "validate" for v in fired)
    else:
        assert not fired, f"{code} fired unexpectedly: {fired}"


@pytest.mark.parametrize("query,label", [
    ("Weißt du noch, welche IP-Adresse ich dir vorhin genannt habe?", "memory_recall"),
    ("Please write a 5-10 word title for the following conversation: what did I say about the port?", "trivial"),
    ("Compare PostgreSQL and MongoDB for a logistics system.", "complex"),
    ("What is the capital of Canada?", "trivial"),
    ("Hi there!", "trivial"),
    ("My Docker container exits immediately with code 137. What should I check?", "moderate"),
    (" ".join(["word"] * 80), "complex"),
])
def test_the_heuristic_follows_the_reference_decision_order(crules, query, label):
    assert heuristic(crules, analyze(crules, query))[0] == label


def test_a_utility_request_quoting_a_recall_question_is_trivial_not_recall(crules):
    q = "Please write a 5-10 word title for the following conversation: Do you remember my server's IP?"
    codes = {v.code for v in check_complexity(crules, q, {"complexity": "trivial"})}
    assert codes == set()
    codes = {v.code for v in check_complexity(crules, q, {"complexity": "memory_recall"})}
    assert "CPLX002" in codes and "CPLX001" not in codes


def test_a_disabled_rule_does_not_run_and_no_label_gives_no_verdict(crules):
    off = crules.model_copy(update={"rules": [r.model_copy(update={"enabled": r.id != "recall-cue"})
                                              for r in crules.rules]})
    q = "What did I say earlier about the port?"
    assert "CPLX001" in {v.code for v in check_complexity(crules, q, {"complexity": "complex"})}
    assert "CPLX001" not in {v.code for v in check_complexity(off, q, {"complexity": "complex"})}
    assert check_complexity(crules, q, {"other": 1}) == [] and check_complexity(crules, q, None) == []
