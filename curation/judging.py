"""Judge-ranked preference pairs (source `judge`) and the judge's calibration figures.

Pairs: every two accepted samples of one query were judged twice, once in each order (`factory.judge`,
mode pairs). For samples x and y, order 1 shows x first and gives (s_x1, s_y1); order 2 shows y first and
gives (s_y2, s_x2). The pair is kept when both orders prefer the same sample (position bias controlled;
otherwise PREF006, counted as `judge_inconsistent`), the mean difference ((s_x1 - s_y1) + (s_x2 - s_y2)) / 2
reaches `min_judge_margin` (otherwise PREF007), and the preferred sample does not fail a hard (reject
severity) rule the other passes: that is a judge error (PREF008, counted as `judge_errors`).

Calibration: where reviewers decided (accept/reject) on records the judge scored, Cohen's kappa between
"score >= threshold" and "accepted"; and how often the judge passes a record that fails a hard rule.
"""

from __future__ import annotations

from mashbill.curation.rules import PlanChecker, failing_codes
from mashbill.factory.records import Record
from mashbill.specs import ResolvedSpec


def judge_pairs(rs: ResolvedSpec, samples: list[Record], judgments: list[dict], out, seen: set[str]) -> None:
    """Add the judge's pairs to `out` (a preference.PairBuild); count what was dropped and why."""
    from mashbill.curation.preference import (PREF_JUDGE_ERROR, PREF_JUDGE_INCONSISTENT, PREF_JUDGE_MARGIN, _make)

    cfg = rs.spec.curation.preference
    by_id = {r.id: r for r in samples if r.status == "accepted" and r.output is not None}
    checker = PlanChecker(rs)
    hard = {rid: failing_codes(checker.check(r.input, r.output, r.meta)) for rid, r in by_id.items()}
    orders: dict[tuple[str, str], dict[str, float]] = {}
    for j in judgments:
        if j["a"] not in by_id or j["b"] not in by_id:
            continue
        if not isinstance(j["score_a"], (int, float)) or not isinstance(j["score_b"], (int, float)):
            continue
        key = tuple(sorted((j["a"], j["b"])))
        x = key[0]
        # the difference in favour of x, as seen in this order
        diff = (j["score_a"] - j["score_b"]) if j["a"] == x else (j["score_b"] - j["score_a"])
        orders.setdefault(key, {})["x_first" if j["a"] == x else "y_first"] = diff
    notes = {"judge_pairs_judged": 0, "judge_inconsistent": 0, "judge_below_margin": 0, "judge_errors": 0,
             "judge_single_order": 0}
    for (x, y), d in sorted(orders.items()):
        if len(d) < 2:
            notes["judge_single_order"] += 1  # the other order is not judged (yet)
            continue
        notes["judge_pairs_judged"] += 1
        d1, d2 = d["x_first"], d["y_first"]
        win, lose = (x, y) if d1 + d2 > 0 else (y, x)
        rw, rl = by_id[win], by_id[lose]
        inputs = {k: v for k, v in rw.input.items() if k != "sample"}
        pair = _make("judge", f"margin {abs(d1 + d2) / 2:g}", rw.id, inputs, rw.meta, rw.messages, rw.output,
                     rl.output, hard[lose])
        if (d1 > 0) != (d2 > 0) or d1 == 0 or d2 == 0:
            notes["judge_inconsistent"] += 1
            out.reject(pair, PREF_JUDGE_INCONSISTENT, f"the two orders disagree ({d1:+g} vs {d2:+g})")
        elif abs(d1 + d2) / 2 < cfg.min_judge_margin:
            notes["judge_below_margin"] += 1
            out.reject(pair, PREF_JUDGE_MARGIN, f"margin {abs(d1 + d2) / 2:g} < {cfg.min_judge_margin:g}")
        elif hard[win] and not hard[lose]:
            notes["judge_errors"] += 1
            out.reject(pair, PREF_JUDGE_ERROR, f"the judge preferred a plan failing {hard[win]} over one that passes")
        else:
            out.add(pair, seen)
    for k, v in notes.items():
        out.notes[k] = out.notes.get(k, 0) + v


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
        checker = PlanChecker(rs)
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
    from mashbill.factory.judge import judge_ref, judge_scores

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
