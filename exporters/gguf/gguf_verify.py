"""Verify GGUF files on the snapshot's eval split: load each in llama-cpp-python, decode every eval prompt
greedily under the spec's output schema, and score the answers the way the dataset was checked.

Per file: schema-valid rate, rule-pass rate (the validators' own rules, through the one record checker, with each
row's record metadata rebuilt as generation stored it: the same verdicts `mashbill validate` gives),
exact match with the snapshot's target, tokens per second. Between files: how many answers differ and how
many flip from right to wrong (or back), because two quantizations with the same accuracy can still
disagree on which requests they get right.
"""

from __future__ import annotations

import json
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Callable

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

    rs = load_spec(snapshot.spec_path())
    return rs, RecordChecker.for_spec(rs)


def _prompt_text(row: dict) -> str:
    return "\n".join(m.get("content") or "" for m in row.get("prompt") or [])


def row_meta(rs, checker, row: dict) -> tuple[dict, str]:
    """The record metadata `mashbill validate` checks a row's record with (the taxonomy shown, its renames), and
    where it came from. A snapshot row keeps the prompt but not the record's metadata, so it is rebuilt the way
    generation built it (``specs.prompting.record_meta``: the record's own RNG) and kept unless the row's prompt
    lists other categories (samples of one input share their first sample's draw; data made elsewhere): then the
    prompt's list is used, with the spec's renames."""
    from mashbill.specs.prompting import record_choices, record_meta
    from mashbill.validators.checker import taxonomy_from_prompt

    if rs.taxonomy is None:
        return {}, "none"
    text = _prompt_text(row)
    shown = record_choices(rs, row["record_id"])[1]
    names = taxonomy_from_prompt(text)
    if names is None or (shown is not None and shown.block in text):
        return record_meta(rs, row["record_id"]), "rebuilt"
    return {"taxonomy_shown": sorted(names),
            "taxonomy_renamed": {n: c for n, c in checker.renames.items() if n in names}}, "prompt"


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)


def score_file(path: Path, rows: list[dict], checker, *, metas: list[dict] | None = None, threads: int = 2,
               max_tokens: int = 256, on_row: Callable[[int, int], None] | None = None) -> dict:
    """Decode every row with one GGUF file and score the answers; `metas` are the rows' record metadata
    (`row_meta`), `on_row(done, total)` is called after each answer."""
    from mashbill.curation.preference.rules import failing_codes
    from mashbill.exporters.predict import GgufPredictor

    metas = metas if metas is not None else [{} for _ in rows]
    pred = GgufPredictor(path, threads=threads, max_tokens=max_tokens)
    results = []
    if on_row is not None:
        on_row(0, len(rows))  # verification starts (a slow first row still shows progress)
    try:
        for res in pred.iter_generate([tuple(r["prompt"]) for r in rows]):
            results.append(res)
            if on_row is not None:
                on_row(len(results), len(rows))
    finally:
        pred.close()
    answers, n_json, n_schema, n_rules, n_exact, codes = [], 0, 0, 0, 0, {}
    tokens = seconds = 0.0
    for row, meta, res in zip(rows, metas, results):
        tokens += res["completion_tokens"] or 0
        seconds += res["latency_s"] or 0
        try:
            out = json.loads(res["text"]) if res["text"] is not None else None
            ok_json = res["text"] is not None
        except json.JSONDecodeError:
            out, ok_json = None, False
        verdicts = checker.check({"query": row["query"]}, out, meta) if ok_json else []
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
                 max_tokens: int = 256, on_row: Callable[[str, int, int], None] | None = None) -> dict:
    """Score each file (name -> path) on the eval split (else test, else train: see SPLIT_ORDER); compare every
    pair. `limit` bounds the rows (`--verify-rows`); `on_row(file, done, total)` reports each answer."""
    split, rows = next(((s, r) for s in SPLIT_ORDER if (r := eval_rows(snapshot, limit, s))), ("eval", []))
    if not rows:
        from mashbill.exporters.runs import ExportError

        raise ExportError(f"snapshot {snapshot.manifest['ref']}: no split holds supervised rows to verify on")
    rs, checker = _checker(snapshot)
    built = [row_meta(rs, checker, r) for r in rows]
    metas = [m for m, _ in built]
    scores = {}
    for name, p in files.items():
        report = (lambda done, total, name=name: on_row(name, done, total)) if on_row is not None else None
        scores[name] = score_file(p, rows, checker, metas=metas, threads=threads, max_tokens=max_tokens,
                                  on_row=report)
    return {"split": split, "held_out": split != "train", "rows": len(rows),
            "decoding": {"temperature": 0, "constrained": "output schema", "max_tokens": max_tokens},
            "rules_engine": checker.engine, "taxonomy_from": dict(sorted(Counter(src for _, src in built).items())),
            "files": scores, "flips": {f"{a}_vs_{b}": flips(scores[a], scores[b]) for a, b in combinations(files, 2)}}
