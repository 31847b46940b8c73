"""`mashbill eval`'s metrics against a hand computation on a six-row fixture (exporters/evaluation/eval_metrics.py)."""

from __future__ import annotations

import pytest

from mashbill.exporters.evaluation import eval_metrics as M

# gold a a a b b c, predicted a a b b c c, with these top probabilities (the confidence for the ECE)
GOLD = ["a", "a", "a", "b", "b", "c"]
PRED = ["a", "a", "b", "b", "c", "c"]
TOP = [0.9, 0.7, 0.6, 0.8, 0.55, 0.95]


def _probs():
    # the top probability on the predicted class, the rest split evenly: only the top one enters the ECE
    idx = {"a": 0, "b": 1, "c": 2}
    return [[t if j == idx[p] else (1 - t) / 2 for j in range(3)] for p, t in zip(PRED, TOP)]


def test_single_label_metrics_match_the_hand_computation():
    m = M.single_label(GOLD, PRED, ["a", "b", "c"], _probs())
    assert m["n"] == 6 and m["accuracy"] == pytest.approx(4 / 6, abs=1e-4)
    # confusion rows gold, columns predicted
    assert m["confusion"]["matrix"] == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]
    # a: tp 2 fp 0 fn 1 -> P 1, R 2/3, F1 0.8; b: tp 1 fp 1 fn 1 -> 0.5/0.5/0.5; c: tp 1 fp 1 fn 0 -> 0.5/1/2/3
    pc = m["per_class"]
    assert (pc["a"]["precision"], pc["a"]["recall"], pc["a"]["f1"]) == (1.0, pytest.approx(0.6667), 0.8)
    assert (pc["b"]["precision"], pc["b"]["recall"], pc["b"]["f1"]) == (0.5, 0.5, 0.5)
    assert (pc["c"]["precision"], pc["c"]["recall"], pc["c"]["f1"]) == (0.5, 1.0, pytest.approx(0.6667))
    assert m["macro_f1"] == pytest.approx((0.8 + 0.5 + 2 / 3) / 3, abs=1e-4)
    # ECE, 10 bins: (0.5,0.6] holds 0.6 and 0.55, both wrong: 2/6 * 0.575; then 0.7, 0.8, 0.9, 0.95 right, one a bin:
    # (0.3 + 0.2 + 0.1 + 0.05) / 6; in all 0.3
    assert m["ece"] == pytest.approx(0.3, abs=1e-4)


def test_a_class_absent_from_gold_and_predictions_stays_out_of_macro_f1():
    m = M.single_label(["a", "b"], ["a", "a"], ["a", "b", "z"])
    # a: P 1/2 R 1 F1 2/3; b: F1 0; z never occurs
    assert m["macro_f1"] == pytest.approx((2 / 3 + 0) / 2, abs=1e-4)
    assert m["per_class"]["z"]["support"] == 0 and "ece" not in m


def test_multi_label_metrics():
    gold = [["x"], ["x", "y"], ["y"]]
    pred = [["x"], ["x"], ["x", "y"]]
    m = M.multi_label(gold, pred, ["x", "y"])
    assert m["accuracy"] == pytest.approx(1 / 3, abs=1e-4)  # exact match on row 1 only
    assert m["confusion"]["per_label"]["x"] == {"tp": 2, "fp": 1, "fn": 0, "tn": 0}
    assert m["confusion"]["per_label"]["y"] == {"tp": 1, "fp": 0, "fn": 1, "tn": 1}
    # x: P 2/3 R 1 F1 0.8; y: P 1 R 1/2 F1 2/3
    assert m["macro_f1"] == pytest.approx((0.8 + 2 / 3) / 2, abs=1e-4)


def test_ece_of_a_perfectly_calibrated_set_is_zero_and_an_overconfident_one_is_not():
    assert M.ece([0.75] * 4, [True, True, True, False]) == pytest.approx(0.0)
    assert M.ece([1.0] * 4, [True, False, False, False]) == pytest.approx(0.75)


def test_majority_and_planner_facts():
    assert M.majority(["b", "a", "b"]) == "b" and M.majority(["a", "b"]) == "a"
    plans = [[{"task": "t", "category": "precision_tools", "mcp_tool": "calculate", "mcp_args": {"expression": "2*3"}}],
             [{"task": "t", "category": "general"}, {"task": "u", "category": "research"}], None]
    gold = [{"categories": ["precision_tools"], "tool": "calculate", "operands": {"expression": "2*3"}},
            {"categories": ["general"], "tool": None}, {"categories": ["general"]}]
    m = M.planner(plans, gold, [True, True, False], [True, False, False])
    assert m["schema_valid_rate"] == pytest.approx(2 / 3, abs=1e-4) and m["rule_pass_rate"] == pytest.approx(1 / 3, abs=1e-4)
    assert m["categories_right"] == pytest.approx(1 / 3, abs=1e-4) and m["categories_n"] == 3
    assert m["tool_right"] == 1.0 and m["tool_n"] == 2 and m["operands_right"] == 1.0 and m["operands_n"] == 1
