"""moe-routing@7 (issue 27): two wrong plans @6 accepted. A tool call on a task that is not precision_tools (PLAN012,
the quick start's poem with calculate("autumn")) and a precision_tools task on a query that asks for no computation
whose arguments owe nothing to the query (HR009, metformin with calculate("100")). Each is accepted under @6 and
rejected under @7; right tool plans stay accepted under @7. The fixtures tool-fields.yaml and tool-unfounded.yaml
hold the EN/DE cases of each rule; these tests compare the two versions."""

from __future__ import annotations

import pytest

from mashbill.specs.loader import LIBRARY
from mashbill.validators.plans.plans import Shown
from mashbill.validators.plans.routing import check_plan
from mashbill.validators.plans.ruleset import load_ruleset
from mashbill.validators.plans.triggers import triggers_for

RULES = LIBRARY / "shared" / "rules"
FULL = Shown(frozenset(["general", "technical_support", "code_reviewer", "math", "data_analyst", "science",
                        "creative_writer", "medical_consult", "legal_advisor", "translation", "reasoning", "vision",
                        "agentic_coder", "research", "precision_tools", "dynamic"]))
# a varied taxonomy without medical_consult, as the quick start may show (FIT004 then has nothing to ask for)
NO_MEDICAL = Shown(frozenset(["general", "math", "creative_writer", "research", "precision_tools", "dynamic"]))

POEM = "Write a short poem about autumn in Hamburg."
POEM_STRAY = [{"task": "Write a short poem about autumn in Hamburg", "category": "creative_writer",
               "mcp_tool": "calculate", "mcp_args": {"expression": "autumn"}}]
METFORMIN = "What are common side effects of metformin?"
METFORMIN_CALC = [{"task": "What are common side effects of metformin?", "category": "precision_tools",
                   "mcp_tool": "calculate", "mcp_args": {"expression": "100"}}]


@pytest.fixture(scope="module")
def v6():
    return load_ruleset(RULES / "moe-routing@6.yaml")


@pytest.fixture(scope="module")
def v7():
    return load_ruleset(RULES / "moe-routing@7.yaml")


def _rejects(rs, query, plan, shown, catalog):
    return [v for v in check_plan(rs, query, plan, shown, catalog) if v.severity == "reject"]


def test_the_stray_tool_call_passes_at_6_and_is_plan012_at_7(v6, v7, catalog):
    assert _rejects(v6, POEM, POEM_STRAY, FULL, catalog) == []
    got = _rejects(v7, POEM, POEM_STRAY, FULL, catalog)
    assert [v.code for v in got] == ["PLAN012"]
    assert "task 1 (creative_writer)" in got[0].detail and "'calculate'" in got[0].detail


def test_why_6_let_metformin_through_and_7_does_not(v6, v7, catalog):
    """ARG001 allows the rule set's constants in any plan (100 among them), no precision intent fires on the query
    (HR001/HR002 have nothing to check), and with medical_consult not shown FIT004 asks for nothing."""
    assert 100 in v6.fidelity.constants
    assert _rejects(v6, METFORMIN, METFORMIN_CALC, NO_MEDICAL, catalog) == []
    got = _rejects(v7, METFORMIN, METFORMIN_CALC, NO_MEDICAL, catalog)
    assert [v.code for v in got] == ["HR009"]
    assert "task 1: calculate" in got[0].detail and '"100"' in got[0].detail


@pytest.mark.parametrize("query,plan", [
    ("What is 17 * 23?", [{"task": "Compute 17 * 23", "category": "precision_tools", "mcp_tool": "calculate",
                           "mcp_args": {"expression": "17 * 23"}}]),
    ("Convert 72 kg to pounds.", [{"task": "Convert 72 kg to pounds", "category": "precision_tools",
                                   "mcp_tool": "unit_convert", "mcp_args": {"value": 72, "from_unit": "kg",
                                                                            "to_unit": "lb"}}]),
    ("Wie viele Tage liegen zwischen dem 1. März 2024 und dem 15. April 2024?",
     [{"task": "Tage zwischen dem 1. März 2024 und dem 15. April 2024 zählen", "category": "precision_tools",
       "mcp_tool": "date_diff", "mcp_args": {"date1": "2024-03-01", "date2": "2024-04-15"}}]),
    (POEM, [{"task": "Write a short poem about autumn in Hamburg", "category": "creative_writer"}]),
], ids=["calculate", "unit_convert", "date_diff-de", "poem-without-tool"])
def test_right_plans_stay_accepted_at_7(v7, catalog, query, plan):
    assert _rejects(v7, query, plan, FULL, catalog) == []


def _precision(tool, args, task):
    return [{"task": task, "category": "precision_tools", "mcp_tool": tool, "mcp_args": args}]


@pytest.mark.parametrize("query,plan", [
    ("What is the capital of Australia?",
     _precision("calculate", {"expression": "1000 / 10"}, "The capital of Australia")),
    ("Is a tomato a fruit or a vegetable?", _precision("calculate", {"expression": "1 + 1"}, "Is a tomato a fruit")),
    ("Welche Nebenwirkungen hat Ibuprofen?",
     _precision("calculate", {"expression": "2 * 100"}, "Nebenwirkungen von Ibuprofen")),
    ("How long should I take amoxicillin for a sinus infection?",
     _precision("calculate", {"expression": "10"}, "How long to take amoxicillin for a sinus infection")),
    ("Write a limerick about a cat named Tom.",
     _precision("unit_convert", {"value": 1, "from_unit": "kg", "to_unit": "lb"}, "A limerick about a cat named Tom")),
    ("Schreibe ein Gedicht über den Herbst.",
     _precision("unit_convert", {"value": 1, "from_unit": "km", "to_unit": "m"}, "Gedicht über den Herbst")),
    ("Tell me about the history of the Roman Empire.",
     _precision("roman_numeral", {"value": "MMXXIV"}, "The history of the Roman Empire")),
], ids=["capital", "tomato", "ibuprofen-de", "amoxicillin", "limerick-unit", "gedicht-unit-de", "roman-empire"])
def test_the_class_a_tool_call_on_a_query_that_asks_for_none(v6, v7, catalog, query, plan):
    assert not triggers_for(v7).analyze(query).intents
    got7 = {v.code for v in _rejects(v7, query, plan, NO_MEDICAL, catalog)}
    assert "HR009" in got7
    assert "HR009" not in {v.code for v in _rejects(v6, query, plan, NO_MEDICAL, catalog)}


def test_spelled_numbers_and_a_percent_ground_a_call_the_triggers_miss(v7, catalog):
    """A call on numbers the query states in words is grounded even where no intent fires; only a call of constants
    and made-up values is not."""
    q = "Roughly what is a third of seventy-two metres?"
    ok = _precision("calculate", {"expression": "72 / 3"}, "A third of seventy-two metres")
    assert not triggers_for(v7).analyze(q).intents  # the rule is the one that decides here
    assert "HR009" not in {v.code for v in _rejects(v7, q, ok, FULL, catalog)}


@pytest.mark.parametrize("query,expression", [
    ("The price tripled since last spring and was 40 euros before; is that normal?", "40 * 3"),
    ("Meine Miete von 700 Euro hat sich verdoppelt, was heißt das für mich?", "700 * 2"),
    ("If the population doubles, what happens to the demand?", "2 * 1"),
])
def test_a_factor_stated_as_a_verb_grounds_the_call(v7, catalog, query, expression):
    """A multiplication said as a verb (doubles, tripled, verdoppelt) states its factor: the call is about the query
    even though no precision intent fires (the GSM8K row "the number of students doubles" in bench/triggers.py)."""
    assert not triggers_for(v7).analyze(query).intents
    plan = _precision("calculate", {"expression": expression}, "Work out the change")
    assert "HR009" not in {v.code for v in _rejects(v7, query, plan, FULL, catalog)}
    made_up = _precision("calculate", {"expression": "10 * 10"}, "Work out the change")
    assert "HR009" in {v.code for v in _rejects(v7, query, made_up, FULL, catalog)}
