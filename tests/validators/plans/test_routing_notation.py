"""Argument checks that read the query's own notation (moe-routing@6, issue 23): a right plan is not rejected because
the query writes "?=", spells its numbers, asks for a remainder with "durch", or is German while the task is English;
a wrong plan still is."""

from __future__ import annotations

import pytest

from mashbill.specs.loader import LIBRARY
from mashbill.validators.plans.plans import Shown
from mashbill.validators.plans.routing import check_plan
from mashbill.validators.plans.ruleset import load_ruleset

RULES = LIBRARY / "shared" / "rules"


def _rejects(rs, catalog, query, task):
    task = {"task": query, "category": "precision_tools", **task}
    return sorted({v.code for v in check_plan(rs, query, [task], Shown(None), catalog) if v.severity == "reject"})


def _convert(value, a, b):
    return {"mcp_tool": "unit_convert", "mcp_args": {"value": value, "from_unit": a, "to_unit": b}}


def _calc(expression):
    return {"mcp_tool": "calculate", "mcp_args": {"expression": expression}}


@pytest.mark.parametrize("query,task", [
    ("10 lbs ?= kg", _convert(10, "lb", "kg")),
    ("3 ft =? m", _convert(3, "foot", "m")),
    ("42 mi = ? km", _convert(42, "mile", "km")),
    ("Add seven hundred and twelve", _calc("700+12")),
    ("Add seven hundred and twelve", _calc("712")),
    ("Ziehe dreiundvierzig von zweihundert ab", _calc("200-43")),
    ("Seventy-two kilograms converted to pounds", _convert(72, "kg", "lb")),
    ("Welcher Rest bleibt bei 47 durch 6?", _calc("47 % 6")),
    ("233 lbm in kg", _convert(233, "lb", "kg")),
])
def test_a_right_plan_in_the_querys_notation_passes(ruleset, catalog, query, task):
    assert ruleset.version >= 6
    assert _rejects(ruleset, catalog, query, task) == []


@pytest.mark.parametrize("query,task,code", [
    ("10 lbs ?= kg", _convert(10, "lb", "g"), "ARG003"),  # a unit the query does not name
    ("Add seven hundred and twelve", _calc("700+21"), "ARG001"),  # a number it does not state
    ("what is 47 divided by 6", _calc("47 % 6"), "ARG002"),  # no remainder asked for
])
def test_a_wrong_plan_is_still_rejected(ruleset, catalog, query, task, code):
    assert code in _rejects(ruleset, catalog, query, task)


def test_the_earlier_rule_set_keeps_its_verdicts(catalog):
    old = load_ruleset(RULES / "moe-routing@5.yaml")
    assert "ARG003" in _rejects(old, catalog, "10 lbs ?= kg", _convert(10, "lb", "kg"))
    assert "ARG001" in _rejects(old, catalog, "divide three hundred by four", _calc("300/4"))


def _drift(rs, catalog, query, task):
    return [v.code for v in check_plan(rs, query, [task], Shown(None), catalog) if v.code == "DRIFT001"]


def test_a_task_in_the_other_language_that_restates_the_querys_numbers_is_no_drift(ruleset, catalog):
    query = "Ich zahle 0,023 € pro GB und Monat für 850 GB. Berechne die monatlichen Speicherkosten."
    task = {"task": "Compute the monthly storage cost: 850 * 0.023", "category": "precision_tools",
            "mcp_tool": "calculate", "mcp_args": {"expression": "850*0.023"}}
    assert _drift(ruleset, catalog, query, task) == []
    # the same task for another German request is still drift, and so is an English task sharing nothing
    assert _drift(ruleset, catalog, "Wie viele Einwohner hat Hamburg im Jahr 2020?", task) == ["DRIFT001"]
    other = {"task": "Find the best pizza in Rome", "category": "research", "search_query": "best pizza Rome"}
    assert _drift(ruleset, catalog, "Wie viele Kalorien hat ein Apfel?", other) == ["DRIFT001"]
