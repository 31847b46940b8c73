"""The arithmetic parser of the argument-fidelity rules: its one-pass whitelist answers as the ast.walk whitelist
did on every class of expression, a tree too deep to compute is an ExprError whatever the caller's stack, and a
plan carrying one is a finding (ARG004), not a crash."""

from __future__ import annotations

import ast
import random
import sys

import pytest

from mashbill.validators.plans import expr
from mashbill.validators.plans.expr import ExprError, evaluate, parse


def _walk_whitelist(text: str) -> str:
    """The whitelist as it was, node by node in ast.walk's order: the reference for answers and messages."""
    try:
        tree = ast.parse(expr.normalise(text).strip(), mode="eval")
    except (SyntaxError, ValueError) as exc:
        return f"not an arithmetic expression ({getattr(exc, 'msg', exc)})"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in expr._FUNCS or node.keywords:
                return f"unknown function {ast.unparse(node.func)!r}"
        elif isinstance(node, ast.Name):
            if node.id not in expr._FUNCS and node.id not in expr._NAMES and not node.id.startswith("__r_"):
                return f"unknown name {node.id!r}"
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)) or isinstance(node.value, bool):
                return f"constant {node.value!r} is not a number"
        elif not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Load, ast.USub, ast.UAdd,
                                   *expr._BIN)):
            return f"{type(node).__name__} is not arithmetic"
    return "ok " + ast.dump(tree)


_ATOMS = ["7", "2.5", "1,847", "2,5", "17%", "0x1F", "1e3", "1j", "True", "None", "'7'", "pi", "e", "x", "sqrt",
          "__r_t1", "{result_of: t1}", "...", "[1]", "a.b", "a[0]"]
_UNARY = ["-", "+", "not ", "~", "−"]
_BINARY = ["+", "-", "*", "/", "//", "%", "**", "^", "×", "÷", "·", "@", "|", "&", "<<", " < ", " == ", " and "]
_CALLS = ["sqrt", "log", "max", "round", "foo", "__import__", "print"]


def _expression(rng: random.Random, depth: int = 0) -> str:
    kind = rng.randrange(8 if depth < 5 else 1)
    if kind == 0:
        return rng.choice(_ATOMS)
    if kind == 1:
        return rng.choice(_UNARY) + _expression(rng, depth + 1)
    if kind in (2, 3, 4):
        return _expression(rng, depth + 1) + rng.choice(_BINARY) + _expression(rng, depth + 1)
    if kind == 5:
        return "(" + _expression(rng, depth + 1) + ")"
    if kind == 6:
        args = [_expression(rng, depth + 1) for _ in range(rng.randrange(3))]
        if rng.random() < 0.15:
            args.append(rng.choice(["x=1", "*a", "**k"]))
        return rng.choice(_CALLS) + "(" + ", ".join(args) + ")"
    return rng.choice(["1 if 2 else 3", "lambda: 1", "[i for i in x]", "(a := 1)", "f'{x}'", "{1: 2}"])


def _answer(text: str) -> str:
    try:
        return "ok " + ast.dump(parse(text))
    except ExprError as exc:
        return str(exc)


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # "0x1Fand": the parser warns, then answers
def test_the_one_pass_whitelist_answers_as_the_walk_did():
    rng = random.Random(29)
    seen = set()
    for _ in range(6000):
        text = _expression(rng)
        assert _answer(text) == _walk_whitelist(text), text
        seen.add(_answer(text).split(" ")[0])
    assert {"ok", "unknown", "constant", "not"} <= seen  # every class of answer came up


@pytest.mark.parametrize("terms", [401, 1500, 5000])
def test_a_tree_too_deep_to_compute_is_an_expr_error(terms):
    with pytest.raises(ExprError, match="nested more than 400 levels deep"):
        parse("+".join(["1"] * terms))
    with pytest.raises(ExprError, match="nested more than 400 levels deep"):
        parse("-" * terms + "1")


def test_400_levels_compute_whatever_the_callers_stack():
    text = "+".join(["1"] * 400)

    def deep(n: int) -> float:  # a caller already ~450 frames deep, as inside a test runner and a worker
        return deep(n - 1) if n else evaluate(parse(text))

    assert deep(sys.getrecursionlimit() - 450 - len(__import__("inspect").stack())) == 400.0


def test_kept_trees_are_shared_and_left_as_they_were():
    a = parse("1847 * 23 + {result_of: t1}")
    assert parse("1847 * 23 + {result_of: t1}") is a
    assert evaluate(a, {"__r_t1": 1.0}) == evaluate(a, {"__r_t1": 1.0}) == 42482.0
    assert expr.constants(a) == [1847.0, 23.0] and expr.placeholders(a) == ["__r_t1"]


def test_a_plan_with_a_runaway_expression_is_arg004(ruleset, catalog):
    from mashbill.validators.plans.plans import Shown
    from mashbill.validators.plans.routing import check_plan

    for e in ["+".join(["1"] * 1500), "-" * 3000 + "1", "+".join(["1"] * 600)]:
        plan = [{"task": "Add the ones.", "category": "precision_tools", "mcp_tool": "calculate",
                 "mcp_args": {"expression": e}}]
        verdicts = check_plan(ruleset, "What is 1+1+1?", plan, Shown(frozenset(["precision_tools", "general"]), {}),
                              catalog)
        assert [v.detail for v in verdicts if v.code == "ARG004"] == [
            f"arg-expression: task 1: expression {e!r} cannot be parsed: nested more than 400 levels deep"]
