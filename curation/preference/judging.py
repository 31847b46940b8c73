"""The judge's calibration figures and its scores in snapshots (pairs: `preference.judge_pairs`).

Calibration: where reviewers decided (accept/reject) on records the judge scored, Cohen's kappa between
"score >= threshold" and "accepted"; and how often the judge passes a record that fails a hard rule.
"""

from __future__ import annotations

from mashbill.curation.preference.rules import failing_codes
from mashbill.factory.records import Record
from mashbill.specs import ResolvedSpec
from mashbill.validators.checker import RecordChecker


def cohen_kappa(a: list[bool], b: list[bool]) -> float | None:
    """Cohen's kappa of two binary raters; None without data or when chance agreement is total."""
    n = len(a)
    if n == 0:
        return None
    po = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return None if pe == 1 else (po - pe) / (1 - pe)


def calibration(rs: ResolvedSpec, records: list[Record], scores: dict[str, dict],
                human: dict[str, str]) -> dict:
    """Judge vs humans (kappa over records with both) and judge errors on hard rules (plan specs)."""
    threshold = rs.spec.judge.threshold if rs.spec.judge else None
    passes = {rid: s["score"] >= threshold for rid, s in scores.items()
              if threshold is not None and isinstance(s.get("score"), (int, float))}
    both = [rid for rid in passes if human.get(rid) in ("accept", "reject")]
    kappa = cohen_kappa([passes[r] for r in both], [human[r] == "accept" for r in both])
    errors = []
    if rs.spec.kind in ("plan", "preference") and "rules" in rs.file_paths:
        checker = RecordChecker.for_spec(rs)
        for rec in records:
            if passes.get(rec.id) and rec.output is not None:
                codes = failing_codes(checker.check(rec.input, rec.output, rec.meta))
                if codes:
                    errors.append({"record_id": rec.id, "query": rec.input.get("query"), "codes": codes,
                                   "score": scores[rec.id]["score"]})
    return {"scored": len(scores), "threshold": threshold, "with_human_decision": len(both),
            "kappa": None if kappa is None else round(kappa, 4), "judge_errors": len(errors),
            "judge_error_examples": errors[:10]}


def judge_export(store, rs: ResolvedSpec, record_ids: list[str]) -> dict | None:
    """The judge scores of a snapshot's records: rows for `judge.parquet` and a manifest summary."""
    from mashbill.factory.generate.judge import judge_ref, judge_scores

    if rs.spec.judge is None:
        return None
    scores = judge_scores(store, rs)
    wanted = sorted(set(record_ids) & set(scores))
    if not wanted:
        return None
    rows = [{"record_id": rid, "score": float(scores[rid]["score"]), "rationale": scores[rid]["rationale"],
             "judge_model": scores[rid]["model"], "prompt_hash": scores[rid]["prompt_hash"],
             "judgment_id": scores[rid]["judge_record"]} for rid in wanted]
    summary = {"spec": rs.ref, "judge_hash": judge_ref(rs, "score").hash, "model": rs.spec.judge.teacher.model,
               "scored": len(rows), "threshold": rs.spec.judge.threshold,
               "mean_score": round(sum(r["score"] for r in rows) / len(rows), 4)}
    return {"rows": rows, "summary": summary}
