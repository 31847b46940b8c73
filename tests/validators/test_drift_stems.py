"""DRIFT001 before and after moe-routing@4: the 5-letter prefix of @2-3 let a drifted task through on a shared
prefix ("relation" meets "Relativitätstheorie" in "relat"); @4 compares whole words less a suffix, and a long root
still meets the compound it begins ("relativ" in "Relativitätstheorie")."""

from __future__ import annotations

import pytest

from mashbill.specs.loader import LIBRARY
from mashbill.validators.drift import root, unrelated
from mashbill.validators.plans import Shown
from mashbill.validators.routing import check_plan
from mashbill.validators.ruleset import load_ruleset

RULES = LIBRARY / "shared" / "rules"
ALL = Shown(None)

# (query, task, drifted?) read by eye
CASES = [
    ("Wer hat die Relativitätstheorie entwickelt?", "Explain the relation between supply and demand", True),
    ("Explain general relativity in simple words.", "List the relatives of the user", True),
    ("Was kostet eine Relation Hamburg-Berlin?", "Erkläre die Relativitätstheorie", True),
    ("Wer hat die Relativitätstheorie entwickelt?", "Find who developed the theory of relativity", False),
    ("Which containers use the most memory?", "Rank the container memory use", False),
    ("Schreib ein Gedicht über Möwen.", "Schreibe ein Gedicht über eine Möwe", False),
    ("How do I calculate compound interest?", "Explain the calculation of compound interest", False),
]


def _drift(rules: str, query: str, task: str) -> bool:
    rs = load_ruleset(RULES / rules)
    verdicts = check_plan(rs, query, [{"task": task, "category": "general"}], ALL)
    return any(v.code == "DRIFT001" for v in verdicts)


@pytest.mark.parametrize("query,task,drifted", CASES)
def test_whole_stems_under_moe_routing_4(query, task, drifted):
    assert _drift("moe-routing@4.yaml", query, task) is drifted


def test_the_5_letter_prefix_of_moe_routing_3_passed_the_drifted_tasks():
    # the same cases under @3: every drifted one passes (the defect), every right one passes too
    assert [_drift("moe-routing@3.yaml", q, t) for q, t, _ in CASES] == [False] * len(CASES)


def test_roots():
    assert root("relativity") == "relativ" and root("relation") == "relat"
    assert root("gedichte") == "gedicht" and root("möwe") == "möwe" and root("1.000") == "1000"
    assert unrelated("Wer hat die Relativitätstheorie entwickelt?", {"task": "relation of prices"}, 1, match="stem")
    assert not unrelated("Wer hat die Relativitätstheorie entwickelt?", {"task": "relation of prices"}, 1)
