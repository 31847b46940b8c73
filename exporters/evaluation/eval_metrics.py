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
