"""Is this record usable? The one answer, from its generation status, its latest validation mark, the judge's
verdicts and the reviewers' decisions. Selection (and through it snapshot freeze and preference pairing) and
the review progress counts of reports and snapshots all ask here.

The rules, in order:
- a reviewer's correction that re-validated replaces the teacher output and makes the record usable, even one
  that generation or validation rejected (the correction is what gets trained); an invalid one is ignored;
- otherwise a record not accepted at generation is left out (its generate codes, else GEN000);
- one whose latest validation pass failed is left out (its validate codes); superseded marks do not count;
- one the judge rejected is left out, unless a reviewer accepted it;
- one a reviewer rejected is left out (REVIEW001), as is one whose reviewers disagree (REVIEW003);
- when review is required, one without a submitted decision is left out (REVIEW002).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

REVIEW_REJECTED = "REVIEW001"
REVIEW_MISSING = "REVIEW002"
REVIEW_DISAGREE = "REVIEW003"
REVIEW_BAD_CORRECTION = "REVIEW004"
NOT_ACCEPTED = "GEN000"


@dataclass
class Decision:
    state: str  # accepted | rejected | corrected | disagreement | none
    correction: Any = None
    invalid_correction: bool = False
    reviewers: int = 0


def resolve_decisions(rows: Sequence[dict], original: Any, validator=None,
                      recheck: Callable[[Any], bool] | None = None) -> Decision:
    """One verdict per record from the submitted responses of its reviewers (latest per reviewer).

    A correction counts when the pull re-validated it (`correction_valid`) and, when given, the output
    schema (`validator`) and the record's rules (`recheck`) pass it again now."""
    latest: dict[str, dict] = {}
    for r in rows:
        if r["status"] != "submitted":
            continue
        key = r["reviewer"]
        when = (r["responded_at"] or r["pulled_at"])
        if key not in latest or when >= (latest[key]["responded_at"] or latest[key]["pulled_at"]):
            latest[key] = r
    if not latest:
        return Decision("none")
    decisions = sorted(latest.values(), key=lambda r: (r["responded_at"] or r["pulled_at"], r["reviewer"]))
    invalid = False
    correction = None
    for r in decisions:
        if r["corrected_output"] is None:
            continue
        value = json.loads(r["corrected_output"]) if isinstance(r["corrected_output"], str) else r["corrected_output"]
        ok = (r["correction_valid"] is True
              and (validator is None or not any(True for _ in validator.iter_errors(value)))
              and (recheck is None or recheck(value)))
        if not ok:
            invalid = True
            continue
        if value != original:
            correction = value  # the latest valid correction wins
    if correction is not None:
        return Decision("corrected", correction, invalid, len(latest))
    votes = {r["decision"] for r in decisions if r["decision"] in ("accept", "reject")}
    if votes == {"accept", "reject"}:
        return Decision("disagreement", None, invalid, len(latest))
    if votes == {"reject"}:
        return Decision("rejected", None, invalid, len(latest))
    if votes == {"accept"}:
        return Decision("accepted", None, invalid, len(latest))
    return Decision("none", None, invalid, len(latest))


@dataclass(frozen=True)
class Usability:
    """The answer for one record: usable, or left out at `stage` with `codes` and a `detail`."""
    usable: bool
    stage: str | None = None  # generate | validate | judge | review, when not usable
    codes: tuple[str, ...] = ()
    detail: str = ""
    corrected: bool = False  # usable through a reviewer's correction (train `decision.correction`)


def usability(status: str, passed: bool | None, verdicts: Sequence[tuple[str, str, str, str]], decision: Decision,
              *, require_review: bool = False) -> Usability:
    """The rules above for one record. `passed`: its latest validation mark (None: never validated);
    `verdicts`: (stage, code, severity, detail) of every verdict on it."""
    if decision.state == "corrected":
        return Usability(True, corrected=True)
    if status != "accepted":
        codes = [c for s, c, sev, _ in verdicts if sev == "reject" and s != "validate"] or [NOT_ACCEPTED]
        return Usability(False, "generate", tuple(codes), f"status {status}")
    if not passed:
        codes = [c for s, c, sev, _ in verdicts if sev == "reject" and s == "validate"] or ["VALIDATE"]
        detail = "; ".join(det for s, _, sev, det in verdicts if sev == "reject")[:300]
        return Usability(False, "validate", tuple(codes), detail if passed is not None else "never validated")
    judged = [c for s, c, sev, _ in verdicts if s == "judge" and sev == "reject"]
    if judged and decision.state != "accepted":  # a reviewer's accept outranks the judge
        return Usability(False, "judge", tuple(judged), "; ".join(det for s, _, sev, det in verdicts if s == "judge")[:300])
    if decision.state == "rejected":
        return Usability(False, "review", (REVIEW_REJECTED,), "rejected by a reviewer")
    if decision.state == "disagreement":
        return Usability(False, "review", (REVIEW_DISAGREE,),
                         f"{decision.reviewers} reviewers disagree (accept vs reject)")
    if decision.state == "none" and require_review:
        return Usability(False, "review", (REVIEW_MISSING,), "the spec requires review and no reviewer decided")
    return Usability(True)


@dataclass(frozen=True)
class RecordState:
    """One stored record with everything its usability was decided from."""
    record: Any  # factory.records.Record
    usability: Usability
    decision: Decision
    verdicts: tuple[tuple[str, str, str, str], ...]  # (stage, code, severity, detail)
    mark: tuple[bool, str] | None  # the latest validation mark: (passed, validation id)
    reviewed: bool  # has review rows (any status)


def record_states(store, spec_hash: str, *, require_review: bool = False, validator=None,
                  recheck_for: Callable[[Any], Callable[[Any], bool] | None] | None = None,
                  ids: Sequence[str] | None = None, messages: bool = True) -> list[RecordState]:
    """Every record of a spec hash (by id; only those of `ids` when given) with its usability (without `messages`,
    records whose prompts were not read: `Store.records`);
    `recheck_for(record)` gives the rule check a reviewer's correction of that record must pass (asked only for
    records with review rows). `Store.plain_usable` answers the common case below for many records at once."""
    if ids is not None and not ids:
        return []
    records = store.records(spec_hash=spec_hash, ids=ids, messages=messages)
    marks = store.latest_marks(spec_hash, ids)
    verdicts: dict[str, list[tuple[str, str, str, str]]] = {}
    for rid, stage, code, severity, detail in store.verdict_rows(spec_hash, ids):
        verdicts.setdefault(rid, []).append((stage, code, severity, detail or ""))
    decisions: dict[str, list[dict]] = {}
    for row in (store.review_rows(spec_hashes=[spec_hash]) if ids is None else
                store.review_rows(spec_hashes=[spec_hash], record_ids=ids)):
        decisions.setdefault(row["record_id"], []).append(row)
    out = []
    plain = Usability(True)
    for rec in records:
        rows = decisions.get(rec.id, [])
        mark = marks.get(rec.id)
        if (not rows and not require_review and mark is not None and mark[0] and rec.status == "accepted"
                and rec.id not in verdicts):
            # the common case, decided without the rules' walk (usability() gives the same answer)
            out.append(RecordState(rec, plain, Decision("none"), (), mark, False))
            continue
        recheck = recheck_for(rec) if rows and recheck_for is not None else None
        d = resolve_decisions(rows, rec.output, validator, recheck) if rows else Decision("none")
        vs = tuple(verdicts.get(rec.id, ()))
        u = usability(rec.status, None if mark is None else mark[0], vs, d, require_review=require_review)
        out.append(RecordState(rec, u, d, vs, mark, bool(rows)))
    return out
