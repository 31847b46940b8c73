"""Verify GGUF files on the snapshot's eval split: load each in llama-cpp-python, decode every eval prompt
greedily under the spec's output schema, and score the answers the way the dataset was checked.

Per file: schema-valid rate, rule-pass rate (the validators' own rules, through the one record checker),
exact match with the snapshot's target, tokens per second. Between files: how many answers differ and how
many flip from right to wrong (or back), because two quantizations with the same accuracy can still
disagree on which requests they get right.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

from mashbill.exporters.runs import Snapshot


# A tiny snapshot (the quick start's plans: 3 records, all in train) has no held-out rows; verifying on the
# next split that has rows beats refusing the export, and the report says which split it was.
SPLIT_ORDER = ("eval", "test", "train")


def eval_rows(snapshot: Snapshot, limit: int | None = None, split: str = "eval") -> list[dict]:
    """Supervised rows of a split (prompt messages + target), one per record, in a stable order."""
    seen, rows = set(), []
    for r in sorted(snapshot.rows(split), key=lambda r: r["example_id"]):
        if r["row_kind"] != "sft" or r["record_id"] in seen or not r["prompt"]:
            continue
        seen.add(r["record_id"])
        rows.append(r)
    return rows[:limit] if limit else rows


def _checker(snapshot: Snapshot):
    from mashbill.specs import load_spec
    from mashbill.validators.checker import RecordChecker

    return RecordChecker.for_spec(load_spec(snapshot.spec_path()))


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)


def score_file(path: Path, rows: list[dict], checker, *, threads: int = 2, max_tokens: int = 256) -> dict:
    from mashbill.curation.rules import failing_codes
    from mashbill.exporters.predict import GgufPredictor

    pred = GgufPredictor(path, threads=threads, max_tokens=max_tokens)
    try:
        results = pred.generate([tuple(r["prompt"]) for r in rows])
    finally:
        pred.close()
    answers, n_json, n_schema, n_rules, n_exact, codes = [], 0, 0, 0, 0, {}
    tokens = seconds = 0.0
    for row, res in zip(rows, results):
        tokens += res["completion_tokens"] or 0
        seconds += res["latency_s"] or 0
        try:
            out = json.loads(res["text"]) if res["text"] is not None else None
            ok_json = res["text"] is not None
        except json.JSONDecodeError:
            out, ok_json = None, False
        verdicts = checker.check({"query": row["query"]}, out, {}) if ok_json else []
        failing = failing_codes(verdicts) if ok_json else ["SCHEMA002"]
        schema_ok = ok_json and not any(c.startswith("SCHEMA") for c in failing)
        exact = ok_json and _canonical(out) == _canonical(json.loads(row["completion"]))
        n_json += ok_json
        n_schema += schema_ok
        n_rules += ok_json and not failing
        n_exact += exact
        for c in failing:
            codes[c] = codes.get(c, 0) + 1
        answers.append({"example_id": row["example_id"], "output": res["text"], "exact": exact,
                        "codes": failing, "finish_reason": res["finish_reason"]})
    n = len(rows)
    return {"file": path.name, "n": n, "json_rate": round(n_json / n, 4), "schema_valid_rate": round(n_schema / n, 4),
            "rule_pass_rate": round(n_rules / n, 4), "exact_match": round(n_exact / n, 4),
            "codes": dict(sorted(codes.items())), "tokens_per_s": round(tokens / seconds, 1) if seconds else None,
            "answers": answers}


def flips(a: dict, b: dict) -> dict:
    """How two files' answers differ on the same rows."""
    pairs = list(zip(a["answers"], b["answers"]))
    differ = sum(x["output"] != y["output"] for x, y in pairs)
    r2w = sum(x["exact"] and not y["exact"] for x, y in pairs)
    w2r = sum(y["exact"] and not x["exact"] for x, y in pairs)
    return {"n": len(pairs), "answers_differ": differ, "flip_rate": round(differ / len(pairs), 4) if pairs else 0.0,
            "right_to_wrong": r2w, "wrong_to_right": w2r}


def verify_files(files: dict[str, Path], snapshot: Snapshot, *, limit: int | None = None, threads: int = 2,
                 max_tokens: int = 256) -> dict:
    """Score each file (name -> path) on the eval split (else test, else train: see SPLIT_ORDER); compare every
    pair."""
    split, rows = next(((s, r) for s in SPLIT_ORDER if (r := eval_rows(snapshot, limit, s))), ("eval", []))
    if not rows:
        from mashbill.exporters.runs import ExportError

        raise ExportError(f"snapshot {snapshot.manifest['ref']}: no split holds supervised rows to verify on")
    checker = _checker(snapshot)
    scores = {name: score_file(p, rows, checker, threads=threads, max_tokens=max_tokens) for name, p in files.items()}
    return {"split": split, "held_out": split != "train", "rows": len(rows), "decoding": {"temperature": 0, "constrained": "output schema",
                                                             "max_tokens": max_tokens},
            "rules_engine": checker.engine, "files": scores,
            "flips": {f"{a}_vs_{b}": flips(scores[a], scores[b]) for a, b in combinations(files, 2)}}
