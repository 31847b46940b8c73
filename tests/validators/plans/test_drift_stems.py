"""DRIFT001 before and after moe-routing@4: the 5-letter prefix of @2-3 let a drifted task through on a shared
prefix ("relation" meets "Relativitätstheorie" in "relat"); @4 compares whole words less a suffix, and a long root
still meets the compound it begins ("relativ" in "Relativitätstheorie")."""

from __future__ import annotations

import pytest

from mashbill.specs.loader import LIBRARY
from mashbill.validators.plans.drift import root, unrelated
from mashbill.validators.plans.plans import Shown
from mashbill.validators.plans.routing import check_plan
from mashbill.validators.plans.ruleset import load_ruleset

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


def test_shared_roots_by_lookup_is_the_pairwise_meet():
    """Issue 29: shared_roots finds a query root that meets a task root by sorted and prefix lookups, not by comparing
    every pair; on random words (prefixes of each other, numbers, short roots) it finds what the pairwise _meet
    finds."""
    import random

    from mashbill.validators.plans.drift import _meet, shared_roots

    rng = random.Random(29)
    stems = ["relativ", "relation", "calcul", "rechnung", "möwe", "container", "2024", "123456", "abcdef"]
    for _ in range(3000):
        def word():
            w = rng.choice(stems)
            return w[:rng.randint(2, len(w))] + "".join(rng.choice("aeinrstäö") for _ in range(rng.randint(0, 4)))
        task = frozenset(word() for _ in range(rng.randint(0, 6)))
        query = frozenset(word() for _ in range(rng.randint(0, 8)))
        want = {r for r in task if r in query or any(_meet(r, q) for q in query)}
        assert shared_roots(task, query) == want, (task, query)


def test_roots_and_words_are_computed_once_per_text():
    """Issue 29: a word's root, a text's roots and content words, and a text's words for the cut-off rule are
    memoised (the query's serve every task of its plan)."""
    from mashbill.validators.plans import drift, truncation

    text = "Erkläre die Relativitätstheorie und ihre Relationen (issue 29)"
    for fn in (drift.roots, drift.content, drift.root, truncation._words):
        arg = "relationen" if fn is drift.root else text
        first = fn(arg)
        before = fn.cache_info()
        assert fn(arg) == first
        after = fn.cache_info()
        assert (after.hits, after.misses) == (before.hits + 1, before.misses), fn.__name__
