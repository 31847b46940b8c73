"""Classifier and planner metrics for `mashbill eval`, from plain lists (no model, no I/O).

Single-label: accuracy, per-class precision/recall/F1 and support, macro-F1 (over the classes that occur in the
gold labels or the predictions), the confusion matrix (rows gold, columns predicted, in `classes` order) and the
expected calibration error (ECE: |accuracy - mean confidence| per equal-width confidence bin, weighted by the
bin's share; 10 bins, the top probability as confidence). Multi-label: exact-match accuracy, per-label
precision/recall/F1 from the label sets, macro-F1, a per-label (tp, fp, fn, tn) table, and ECE over every
(row, label) sigmoid probability.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Sequence


def _prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def ece(confidences: Sequence[float], correct: Sequence[bool], bins: int = 10) -> float:
    """Expected calibration error with `bins` equal-width bins over (0, 1]; a confidence of 0 goes to bin 0."""
    n = len(confidences)
    if not n:
        return 0.0
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        idx = [i for i, c in enumerate(confidences) if (lo < c <= hi) or (b == 0 and c <= lo)]
        if idx:
            acc = sum(bool(correct[i]) for i in idx) / len(idx)
            conf = sum(confidences[i] for i in idx) / len(idx)
            total += len(idx) / n * abs(acc - conf)
    return total


def single_label(gold: Sequence[str], pred: Sequence[str], classes: Sequence[str],
                 probs: Sequence[Sequence[float]] | None = None) -> dict:
    """Metrics of single-label predictions; `probs` (one row per example, in `classes` order) gives the ECE."""
    n = len(gold)
    idx = {c: i for i, c in enumerate(classes)}
    matrix = [[0] * len(classes) for _ in classes]
    for g, p in zip(gold, pred):
        matrix[idx[g]][idx[p]] += 1
    per_class, f1s = {}, []
    present = {c for c in gold} | {c for c in pred}
    for c in classes:
        i = idx[c]
        tp = matrix[i][i]
        fp = sum(matrix[j][i] for j in range(len(classes))) - tp
        fn = sum(matrix[i]) - tp
        p, r, f = _prf(tp, fp, fn)
        per_class[c] = {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4), "support": sum(matrix[i])}
        if c in present:
            f1s.append(f)
    out = {"n": n, "accuracy": round(sum(g == p for g, p in zip(gold, pred)) / n, 4) if n else 0.0,
           "macro_f1": round(sum(f1s) / len(f1s), 4) if f1s else 0.0, "per_class": per_class,
           "confusion": {"classes": list(classes), "matrix": matrix}}
    if probs is not None:
        conf = [max(row) for row in probs]
        out["ece"] = round(ece(conf, [g == p for g, p in zip(gold, pred)]), 4)
    return out


def multi_label(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]], classes: Sequence[str],
                probs: Sequence[Sequence[float]] | None = None) -> dict:
    n = len(gold)
    per_class, table, f1s = {}, {}, []
    for j, c in enumerate(classes):
        tp = sum(c in g and c in p for g, p in zip(gold, pred))
        fp = sum(c not in g and c in p for g, p in zip(gold, pred))
        fn = sum(c in g and c not in p for g, p in zip(gold, pred))
        tn = n - tp - fp - fn
        pr, r, f = _prf(tp, fp, fn)
        per_class[c] = {"precision": round(pr, 4), "recall": round(r, 4), "f1": round(f, 4), "support": tp + fn}
        table[c] = {"tp": tp, "fp": fp, "fn": fn, "tn": tn}
        if tp + fp + fn:
            f1s.append(f)
    out = {"n": n, "accuracy": round(sum(sorted(g) == sorted(p) for g, p in zip(gold, pred)) / n, 4) if n else 0.0,
           "macro_f1": round(sum(f1s) / len(f1s), 4) if f1s else 0.0, "per_class": per_class,
           "confusion": {"classes": list(classes), "per_label": table}}
    if probs is not None:
        conf, correct = [], []
        for row, g in zip(probs, gold):
            for j, c in enumerate(classes):
                q = row[j]
                conf.append(max(q, 1 - q))
                correct.append((q > 0.5) == (c in g))
        out["ece"] = round(ece(conf, correct), 4)
    return out


def softmax(row: Sequence[float]) -> list[float]:
    m = max(row)
    e = [math.exp(x - m) for x in row]
    s = sum(e)
    return [x / s for x in e]


def sigmoid(row: Sequence[float]) -> list[float]:
    return [1 / (1 + math.exp(-x)) for x in row]


def majority(labels: Sequence) -> object:
    """The most frequent label (a tuple for label sets); ties go to the first seen."""
    counts = Counter(tuple(sorted(x)) if isinstance(x, (list, tuple)) else x for x in labels)
    best = max(counts.values())
    for x in labels:
        key = tuple(sorted(x)) if isinstance(x, (list, tuple)) else x
        if counts[key] == best:
            return list(key) if isinstance(key, tuple) else key
    raise ValueError("no labels")


def plan_facts(output) -> dict:
    """The facts of a plan that gold plan facts name: its categories (a sorted set), its precision tools and their
    arguments (the first tool task's)."""
    tasks = output if isinstance(output, list) else (output or {}).get("tasks") if isinstance(output, dict) else None
    tasks = [t for t in (tasks or []) if isinstance(t, dict)]
    cats = sorted({t.get("category") for t in tasks if isinstance(t.get("category"), str)})
    tools = [t for t in tasks if t.get("mcp_tool")]
    return {"categories": cats, "tool": tools[0].get("mcp_tool") if tools else None,
            "operands": tools[0].get("mcp_args") if tools else None}


def _norm(v):
    if isinstance(v, dict):
        return {str(k): _norm(x) for k, x in v.items()}
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        return v.strip().lower()
    return v


def planner(outputs: Sequence, gold: Sequence[dict | None], schema_ok: Sequence[bool], rules_ok: Sequence[bool]) -> dict:
    """Planner metrics: schema-valid and rule-pass rates, and, over the rows with gold facts, the share whose
    categories (as a set), tool and operands (numbers compared as floats, strings case-folded) are right."""
    n = len(outputs)
    out = {"n": n, "schema_valid_rate": round(sum(schema_ok) / n, 4) if n else 0.0,
           "rule_pass_rate": round(sum(rules_ok) / n, 4) if n else 0.0}
    for key in ("categories", "tool", "operands"):
        rows = [(plan_facts(o), g) for o, g in zip(outputs, gold) if g and key in g]
        if rows:
            want = (lambda g: sorted(g)) if key == "categories" else _norm
            right = sum((f[key] if key == "categories" else _norm(f[key])) == want(g[key]) for f, g in rows)
            out[f"{key}_right"] = round(right / len(rows), 4)
            out[f"{key}_n"] = len(rows)
    return out


# ---------------------------------------------------------------- the plan yardstick (tests/fixtures/plan_labels)


def plan_verdict(output, gold: dict, renames: dict[str, str] | None = None) -> list[str]:
    """Why the plan `output` is not right against a gold row of the plan yardstick; [] when it is right.

    `gold` has `categories` (each entry a category name, or a list of names any one of which will do: every entry
    must be met), optionally `also_ok` (categories a plan may add without being wrong: any other category is),
    `tool` (a precision tool's name, a list of names any one of which will do, or null: no tool required) and
    `operands` (each a number, a percentage string "17.5%" (17.5 or 0.175), a string, or a list of alternatives;
    each must be carried by the arguments of the plan's tool calls: numbers compared by absolute value, strings
    case-folded as a substring, or equal when two characters or shorter). `renames` maps a shown category name to
    its canonical one (creative_writing -> creative_writer); the categories come from `plan_facts`."""
    facts = plan_facts(output)
    if not facts["categories"]:
        return ["no plan: no task with a category"]
    renames = renames or {}
    have = {renames.get(c, c) for c in facts["categories"]}
    why = []
    wanted = [c if isinstance(c, list) else [c] for c in gold.get("categories") or []]
    for alts in wanted:
        if not have & set(alts):
            why.append(f"missing category {'|'.join(alts)}")
    allowed = {c for alts in wanted for c in alts} | set(gold.get("also_ok") or [])
    for c in sorted(have - allowed):
        why.append(f"unexpected category {c}")
    calls = _tool_calls(output)
    tool = gold.get("tool")
    if tool:
        tools = tool if isinstance(tool, list) else [tool]
        if not any(name in tools for name, _ in calls):
            why.append(f"no {'|'.join(tools)} call (calls: {', '.join(n for n, _ in calls) or 'none'})")
    if gold.get("operands"):
        numbers, strings = _arg_values([args for _, args in calls])
        for op in gold["operands"]:
            if not any(_carried(alt, numbers, strings) for alt in (op if isinstance(op, list) else [op])):
                why.append(f"operand {op!r} not in the tool arguments")
    return why


def _tool_calls(output) -> list[tuple[str, object]]:
    tasks = output if isinstance(output, list) else (output or {}).get("tasks") if isinstance(output, dict) else None
    return [(t["mcp_tool"], t.get("mcp_args")) for t in (tasks or [])
            if isinstance(t, dict) and isinstance(t.get("mcp_tool"), str)]


_NUM = re.compile(r"\d+(?:\.\d+)?")
WRONG_KINDS = ("no plan", "missing category", "unexpected category", "operand")


def _arg_values(args) -> tuple[list[float], list[str]]:
    """Every number (also those inside strings: "2840 * 0.17") and every string in the arguments."""
    numbers, strings = [], []

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, bool) or v is None:
            return
        elif isinstance(v, (int, float)):
            numbers.append(abs(float(v)))
            strings.append(str(v).lower())
        elif isinstance(v, str):
            strings.append(" ".join(v.lower().split()))
            numbers.extend(float(m) for m in _NUM.findall(v))

    walk(args)
    return numbers, strings


def _carried(op, numbers: list[float], strings: list[str]) -> bool:
    def near(x: float) -> bool:
        return any(abs(n - x) <= 1e-9 * max(1.0, abs(x)) for n in numbers)

    if isinstance(op, (int, float)) and not isinstance(op, bool):
        return near(abs(float(op)))
    text = " ".join(str(op).lower().split())
    if text.endswith("%"):
        try:
            x = abs(float(text[:-1].strip()))
        except ValueError:
            return False
        return near(x) or near(x / 100)
    if len(text) <= 2:
        return text in strings
    return any(text in s for s in strings)


def plan_yardstick(outputs: Sequence, gold: Sequence[dict], renames: dict[str, str] | None = None) -> dict:
    """Right plans against the yardstick's gold rows: the share, and how often each kind of reason made one wrong."""
    n, right, reasons = len(outputs), 0, Counter()
    for o, g in zip(outputs, gold):
        why = plan_verdict(o, g, renames)
        right += not why
        reasons.update({next((k for k in WRONG_KINDS if w.startswith(k)), "tool") for w in why})
    return {"n": n, "right": right, "right_share": round(right / n, 4) if n else 0.0,
            "wrong_by": dict(sorted(reasons.items()))}
