"""Dataset-level expectations: a Great Expectations suite per kind, run on the records table.

The records are summarised into a pandas frame (one row per record: lengths, language, token totals, labels),
and the kind's suite checks null rates, length bounds, allowed values and label distribution bounds (a label's
share is the mean of its 0/1 indicator column). great_expectations is imported here only (it takes seconds).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass

log = logging.getLogger(__name__)

LABELS = {"complexity": ["trivial", "moderate", "complex", "memory_recall"]}


@dataclass(frozen=True)
class Expect:
    type: str  # GE expectation class name
    kwargs: dict
    why: str


def suite_for(kind: str, columns: set[str], *, max_seq_len: int | None = None) -> list[Expect]:
    """The expectations for a kind, limited to the columns the frame has."""
    out = [Expect("ExpectTableRowCountToBeBetween", {"min_value": 1}, "the dataset is not empty")]
    if "query" in columns:
        out += [Expect("ExpectColumnValuesToNotBeNull", {"column": "query"}, "every record has a query"),
                Expect("ExpectColumnValueLengthsToBeBetween", {"column": "query", "min_value": 3, "max_value": 8000,
                                                              "mostly": 0.999},
                       "queries are 3-8000 characters")]
    if "target_chars" in columns:
        out.append(Expect("ExpectColumnValuesToBeBetween", {"column": "target_chars", "min_value": 1},
                          "every record has a non-empty target"))
    if "lang" in columns:
        out.append(Expect("ExpectColumnValuesToBeInSet", {"column": "lang", "value_set": ["en", "de"],
                                                          "mostly": 0.99}, "languages are en/de"))
        out.append(Expect("ExpectColumnMeanToBeBetween", {"column": "is_de", "min_value": 0.1, "max_value": 0.9},
                          "both languages are represented (German share 10-90%)"))
    if max_seq_len and "total_tokens" in columns:
        out.append(Expect("ExpectColumnValuesToBeBetween", {"column": "total_tokens", "max_value": max_seq_len},
                          f"every example fits max_seq_len {max_seq_len}"))
    if kind == "plan":
        out += [Expect("ExpectColumnValuesToBeBetween", {"column": "n_tasks", "min_value": 1, "max_value": 4},
                       "plans have 1-4 tasks"),
                Expect("ExpectColumnMeanToBeBetween", {"column": "has_precision", "min_value": 0.05, "max_value": 0.8},
                       "5-80% of plans use a precision tool"),
                Expect("ExpectColumnMeanToBeBetween", {"column": "has_research", "min_value": 0.02, "max_value": 0.8},
                       "2-80% of plans research"),
                Expect("ExpectColumnMeanToBeBetween", {"column": "single_task", "min_value": 0.1, "max_value": 0.95},
                       "a mix of single- and multi-task plans")]
    if kind in ("complexity", "routing") and "label" in columns:
        out.append(Expect("ExpectColumnValuesToBeInSet", {"column": "label", "value_set": LABELS["complexity"]},
                          "complexity labels are the four classes"))
        for lab in LABELS["complexity"]:
            if f"is_{lab}" in columns:
                out.append(Expect("ExpectColumnMeanToBeBetween", {"column": f"is_{lab}", "max_value": 0.9},
                                  f"'{lab}' is at most 90% of the labels"))
    if kind == "routing" and "n_experts" in columns:
        out.append(Expect("ExpectColumnValuesToBeBetween", {"column": "n_experts", "min_value": 1, "max_value": 4},
                          "1-4 experts per request"))
    if kind == "messages" and "n_messages" in columns:
        out.append(Expect("ExpectColumnValuesToBeBetween", {"column": "n_messages", "min_value": 2},
                          "conversations have a prompt and a reply"))
    return [e for e in out if e.kwargs.get("column") is None or e.kwargs["column"] in columns]


def run_expectations(rows: list[dict], kind: str, *, max_seq_len: int | None = None) -> dict:
    """Run the kind's suite on the rows; returns a JSON-ready result (success, one entry per expectation)."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    import great_expectations as gx
    import pandas as pd
    from great_expectations.data_context.types.base import ProgressBarsConfig

    df = pd.DataFrame(rows)
    if "lang" in df:
        df["is_de"] = (df["lang"] == "de").astype(float)
    if "label" in df:
        for lab in LABELS["complexity"]:
            df[f"is_{lab}"] = (df["label"] == lab).astype(float)
    expects = suite_for(kind, set(df.columns), max_seq_len=max_seq_len)
    ctx = gx.get_context(mode="ephemeral")
    try:
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    except Exception:  # older/newer GE without this knob: only cosmetic
        pass
    batch = (ctx.data_sources.add_pandas("mashbill").add_dataframe_asset(name="records")
             .add_batch_definition_whole_dataframe("all").get_batch(batch_parameters={"dataframe": df}))
    suite = gx.ExpectationSuite(name=f"mashbill-{kind}")
    for e in expects:
        suite.add_expectation(getattr(gx.expectations, e.type)(**e.kwargs))
    res = batch.validate(suite, result_format="SUMMARY")
    out = []
    for e in expects:
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", e.type).lower()
        r = next((r for r in res.results if r.expectation_config.type == snake
                  and all(r.expectation_config.kwargs.get(k) == v for k, v in e.kwargs.items())), None)
        if r is None:
            out.append({"expectation": snake, "column": e.kwargs.get("column"), "why": e.why, "success": False,
                        "error": "no result returned"})
            continue
        result = r.result or {}
        entry = {"expectation": r.expectation_config.type, "column": e.kwargs.get("column"), "why": e.why,
                 "success": bool(r.success)}
        for k in ("observed_value", "unexpected_count", "unexpected_percent"):
            v = result.get(k)
            if v is not None:
                entry[k] = float(v) if hasattr(v, "__float__") and not isinstance(v, (int, bool)) else v
        sample = result.get("partial_unexpected_list")
        if sample:
            entry["unexpected_sample"] = [str(x)[:80] for x in sample[:5]]
        out.append(entry)
    return {"suite": f"mashbill-{kind}", "success": all(x["success"] for x in out), "results": out,
            "evaluated": len(out), "failed": sum(not x["success"] for x in out)}
