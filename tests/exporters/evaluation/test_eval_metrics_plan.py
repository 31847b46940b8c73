"""`eval_metrics.plan_verdict` on hand-built plans against real rows of the plan yardstick: a right plan passes, and
each wrong-by-one-fact variant of it fails with the one reason that names that fact."""

from __future__ import annotations

import copy

import pytest

from mashbill.exporters.evaluation.eval_metrics import plan_verdict, plan_yardstick
from mashbill.exporters.evaluation.plan_yardstick import gold_facts, load_rows, renames


@pytest.fixture(scope="module")
def gold():
    return {r["query"]: gold_facts(r) for r in load_rows("all")}


VAT = "Wie viel sind 19 % Mehrwertsteuer auf 1.249 Euro netto?"
LEGAL = "Was regelt § 823 Abs. 2 BGB, und wann haftet man danach?"
TETRIS = "Write a Tetris game in Python with pygame, with a preview of the next piece."
POEM = "Write a short poem about autumn in Hamburg."
RECALL = "What did I say earlier about the port of the staging server?"
MPH = "Convert 65 miles per hour to kilometres per hour."
DATE = ("Jane scheduled 3 apointments with 5 poeple for tomorrow (Tue, 7/9/1972). What is the date 10 days ago in "
        "MM/DD/YYYY?\nOptions:\n(A) 07/03/1972\n(B) 10/28/1971\n(C) 06/28/1972\n(D) 06/14/1972\n(E) 09/28/1972\n"
        "(F) 06/23/1972")

RIGHT = {
    VAT: [{"task": "19 % von 1249 Euro.", "category": "precision_tools", "mcp_tool": "calculate",
           "mcp_args": {"expression": "1249 * 0.19"}}],
    LEGAL: [{"id": "t1", "task": "§ 823 BGB abrufen.", "category": "precision_tools",
             "mcp_tool": "legal_get_paragraph", "mcp_args": {"law": "BGB", "paragraph": "823"}},
            {"id": "t2", "task": "Erkläre § 823 Abs. 2 BGB: {result_of:t1}", "category": "legal_advisor",
             "depends_on": "t1"}],
    TETRIS: [{"id": "t1", "task": "Tetris rules.", "category": "research", "search_query": "tetris rules"},
             {"id": "t2", "task": "Write Tetris in pygame.", "category": "code_reviewer", "depends_on": "t1"}],
    POEM: [{"task": "Write a short poem about autumn in Hamburg.", "category": "creative_writer"}],
    MPH: [{"task": "65 mph in km/h.", "category": "precision_tools", "mcp_tool": "unit_convert",
           "mcp_args": {"value": 65, "from_unit": "mile/hour", "to_unit": "km/h"}}],
    DATE: [{"task": "10 days before 1972-07-08.", "category": "precision_tools", "mcp_tool": "date_add",
            "mcp_args": {"base_date": "1972-07-08", "days": -10}}],
}


@pytest.mark.parametrize("query", list(RIGHT))
def test_a_right_plan_is_right(gold, query):
    assert plan_verdict(RIGHT[query], gold[query], renames()) == []


def _with(query, i, **change):
    plan = copy.deepcopy(RIGHT[query])
    for k, v in change.items():
        if v is None:
            plan[i].pop(k, None)
        else:
            plan[i][k] = v
    return plan


WRONG = [  # (query, plan, the reason; a changed category also brings the category it put in its place)
    (VAT, _with(VAT, 0, mcp_args={"expression": "1.249 * 0.19"}), "operand 1249 not in the tool arguments"),
    (VAT, _with(VAT, 0, mcp_args={"expression": "1249 * 0.2"}), "operand '19%' not in the tool arguments"),
    (VAT, _with(VAT, 0, category="general", mcp_tool=None, mcp_args=None),  # the tool call goes with the category
     ["missing category precision_tools", "unexpected category general", "no calculate call (calls: none)",
      "operand '19%' not in the tool arguments", "operand 1249 not in the tool arguments"]),
    (VAT, _with(VAT, 0, mcp_tool="statistics_calc"), "no calculate call (calls: statistics_calc)"),
    (LEGAL, _with(LEGAL, 0, mcp_args={"law": "BGB", "paragraph": "242"}), "operand '823' not in the tool arguments"),
    (LEGAL, _with(LEGAL, 1, category="general"), ["missing category legal_advisor", "unexpected category general"]),
    (LEGAL, RIGHT[LEGAL] + [{"task": "Search.", "category": "research", "search_query": "823"}],
     "unexpected category research"),
    (TETRIS, RIGHT[TETRIS][1:], "missing category research"),
    (POEM, _with(POEM, 0, category="general"), ["missing category creative_writer", "unexpected category general"]),
    (RECALL, [{"task": "Find the staging port.", "category": "research", "search_query": "staging port"}],
     ["missing category memory_recall|general", "unexpected category research"]),
    (MPH, _with(MPH, 0, mcp_args={"value": 56, "from_unit": "mile/hour", "to_unit": "km/h"}),
     "operand 65 not in the tool arguments"),
    (MPH, _with(MPH, 0, mcp_args={"value": 65, "from_unit": "m/s", "to_unit": "km/h"}),
     "operand ['mph', 'mile', 'mi/h'] not in the tool arguments"),
    (DATE, _with(DATE, 0, mcp_args={"base_date": "1972-07-05", "days": -10}),
     "operand ['1972-07-08', '1972-07-09'] not in the tool arguments"),
]


@pytest.mark.parametrize("query,plan,reason", WRONG)
def test_a_plan_wrong_by_one_fact_says_which(gold, query, plan, reason):
    assert plan_verdict(plan, gold[query], renames()) == (reason if isinstance(reason, list) else [reason])


def test_renamed_categories_count_as_their_canonical_name(gold):
    shown = _with(POEM, 0, category="creative_writing")
    assert plan_verdict(shown, gold[POEM], renames()) == []
    assert plan_verdict(shown, gold[POEM]) == ["missing category creative_writer",
                                               "unexpected category creative_writing"]


def test_alternatives_and_what_is_no_plan(gold):
    general = [{"task": "Recall the port.", "category": "general"}]
    assert plan_verdict(general, gold[RECALL]) == []  # memory_recall when listed, else general
    assert plan_verdict(None, gold[POEM]) == ["no plan: no task with a category"]
    assert plan_verdict({"tasks": RIGHT[POEM]}, gold[POEM]) == []  # the wrapped shape parse_plan accepts
    # 17.5% is carried as 17.5 or as 0.175
    g = {"categories": ["precision_tools"], "tool": "calculate", "operands": ["17.5%", 4360]}
    for expr in ("4360 * 0.175", "4360 * 17.5 / 100"):
        assert plan_verdict([{"task": "x", "category": "precision_tools", "mcp_tool": "calculate",
                              "mcp_args": {"expression": expr}}], g) == []


def test_the_yardstick_share_and_reason_kinds(gold):
    outputs = [RIGHT[VAT], WRONG[0][1], WRONG[2][1], None]
    res = plan_yardstick(outputs, [gold[VAT]] * 4, renames())
    assert res["n"] == 4 and res["right"] == 1 and res["right_share"] == 0.25
    assert res["wrong_by"] == {"missing category": 1, "no plan": 1, "operand": 2, "tool": 1,  # per plan, once a kind
                               "unexpected category": 1}
