"""Which stored records may go into a snapshot, and why each of the others may not.

A record is a candidate when it was accepted at generation, a validation run covered it and passed it,
and no reviewer rejected it. Review decisions (table `review_decisions`) are honoured:
- a reviewer's correction that re-validated (`correction_valid`, and here again: the output schema and, for
  plans, every reject-severity rule) replaces the teacher output, even for a record that generation or
  validation rejected (the correction is what gets trained); an invalid one is ignored and counted;
- a record only rejected by reviewers is excluded (REVIEW001); reviewers who disagree (one accepts, another
  rejects, nobody corrects) exclude it too (REVIEW003);
- when the spec requires review, a record without a submitted decision is excluded (REVIEW002).
Every excluded record keeps its codes, so the snapshot's rejects file says why it is not there.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from mashbill.errors import MashbillError
from mashbill.factory.records import Record
from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec

# codes this stage adds (the store's own verdict codes are kept as they are)
REVIEW_REJECTED = "REVIEW001"
REVIEW_MISSING = "REVIEW002"
REVIEW_DISAGREE = "REVIEW003"
REVIEW_BAD_CORRECTION = "REVIEW004"
NOT_ACCEPTED = "GEN000"


@dataclass(frozen=True)
class Candidate:
    record: Record
    output: Any  # what is trained: the teacher output, or the reviewer's correction
    origin: str  # "teacher" | "review-correction"
    review: str | None = None  # accepted | corrected | None (not reviewed)


@dataclass(frozen=True)
class Excluded:
    record_id: str
    spec: str
    stage: str  # generate | validate | judge | review | balance | preference
    codes: tuple[str, ...]
    detail: str
    query: str | None
    output: str | None  # canonical JSON or raw text of what was not taken


@dataclass
class Selection:
    rs: ResolvedSpec
    candidates: list[Candidate]
    excluded: list[Excluded]
    verdict_counts: dict[str, int]  # every verdict on the spec's records, by code
    review: dict
    run_ids: list[str]
    validation_ids: list[str]
    corrections: list[tuple[Record, Any]] = field(default_factory=list)  # (record, corrected output)


def _q(record: Record) -> str | None:
    q = record.input.get("query")
    return q if isinstance(q, str) else None


def _text(output: Any, raw: str | None) -> str | None:
    from mashbill.specs import canonical_json

    return canonical_json(output) if output is not None else raw


@dataclass
class Decision:
    state: str  # accepted | rejected | corrected | disagreement | none
    correction: Any = None
    invalid_correction: bool = False
    reviewers: int = 0


def resolve_decisions(rows: list[dict], original: Any, validator, recheck=None) -> Decision:
    """One verdict per record from the submitted responses of its reviewers (latest per reviewer)."""
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
        ok = (r["correction_valid"] is True and not any(True for _ in validator.iter_errors(value))
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


def _rules_recheck(checker, rec: Record):
    """A correction must pass the same rules (reject severity) as the record it corrects."""

    def ok(value) -> bool:
        return not any(v.severity == "reject" for v in checker.check(rec.input, value, rec.meta))

    return ok


def select_records(store: Store, rs: ResolvedSpec, *, require_review: bool | None = None) -> Selection:
    spec = rs.spec
    require_review = spec.curation.require_review if require_review is None else require_review
    records = store.records(spec_hash=rs.hash)
    if not records:
        others = sorted({h for h, _, _ in store.spec_status_counts(spec.name, spec.version)})
        hint = (f"; the store has records of {spec.ref} under another spec hash ({', '.join(h[:12] for h in others)}),"
                " so the spec changed since they were generated") if others else "; run `mashbill generate` first"
        raise MashbillError(f"store {store.root} has no records of {spec.ref} (spec hash {rs.hash[:12]}){hint}")
    marks = store.latest_marks(rs.hash)
    unvalidated = [r.id for r in records if r.status == "accepted" and r.id not in marks]
    if unvalidated:
        raise MashbillError(
            f"store {store.root}: {len(unvalidated)} accepted record(s) of {spec.ref} were never covered by a "
            f"validation run (first: {unvalidated[0][:16]}); run `mashbill validate {spec.ref} --store {store.root}` "
            "first. Nothing was written.")
    verdicts: dict[str, list[tuple[str, str, str, str]]] = {}
    counts: Counter = Counter()
    for rid, stage, code, severity, detail in store.verdict_rows(rs.hash):
        verdicts.setdefault(rid, []).append((stage, code, severity, detail or ""))
        counts[code] += 1
    decisions: dict[str, list[dict]] = {}
    for row in store.review_rows(spec_hashes=[rs.hash]):
        decisions.setdefault(row["record_id"], []).append(row)

    validator = jsonschema.validators.validator_for(rs.output_schema)(rs.output_schema)
    checker = None
    if spec.kind == "plan" and "rules" in rs.file_paths and decisions:
        from mashbill.validators.checker import RecordChecker

        checker = RecordChecker.for_spec(rs)
    candidates: list[Candidate] = []
    excluded: list[Excluded] = []
    corrections: list[tuple[Record, Any]] = []
    stats = Counter()
    for rec in records:
        recheck = _rules_recheck(checker, rec) if checker is not None else None
        d = resolve_decisions(decisions.get(rec.id, []), rec.output, validator, recheck)
        if decisions.get(rec.id):
            stats["with_decisions"] += 1
        if d.state != "none":
            stats["reviewed"] += 1
            stats[d.state] += 1
        if d.invalid_correction:
            stats["invalid_corrections"] += 1
        vs = verdicts.get(rec.id, [])

        def exclude(stage: str, codes, detail: str, output=rec.output):
            excluded.append(Excluded(rec.id, spec.ref, stage, tuple(codes), detail, _q(rec), _text(output, rec.raw)))

        if d.state == "corrected":
            candidates.append(Candidate(rec, d.correction, "review-correction", "corrected"))
            if rec.output is not None:
                corrections.append((rec, d.correction))
            continue
        if rec.status != "accepted":
            codes = [c for s, c, sev, _ in vs if sev == "reject" and s != "validate"] or [NOT_ACCEPTED]
            exclude("generate", codes, f"status {rec.status}")
            continue
        passed, _ = marks[rec.id]
        if not passed:
            codes = [c for s, c, sev, _ in vs if sev == "reject" and s == "validate"] or ["VALIDATE"]
            exclude("validate", codes, "; ".join(det for s, _, sev, det in vs if sev == "reject")[:300])
            if d.state == "accepted":
                stats["accepted_but_invalid"] += 1
            continue
        judged = [c for s, c, sev, _ in vs if s == "judge" and sev == "reject"]
        if judged and d.state != "accepted":  # a reviewer's accept outranks the judge
            exclude("judge", judged, "; ".join(det for s, _, sev, det in vs if s == "judge")[:300])
            continue
        if d.state == "rejected":
            exclude("review", [REVIEW_REJECTED], "rejected by a reviewer")
        elif d.state == "disagreement":
            exclude("review", [REVIEW_DISAGREE], f"{d.reviewers} reviewers disagree (accept vs reject)")
        elif d.state == "none" and require_review:
            exclude("review", [REVIEW_MISSING], "the spec requires review and no reviewer decided")
        else:
            candidates.append(Candidate(rec, rec.output, "teacher", "accepted" if d.state == "accepted" else None))
    for code, n in ((REVIEW_REJECTED, stats["rejected"]), (REVIEW_DISAGREE, stats["disagreement"]),
                    (REVIEW_BAD_CORRECTION, stats["invalid_corrections"])):
        if n:
            counts[code] += n
    review = {"require_review": require_review, "records": len(records),
              "reviewed": stats["reviewed"], "accepted": stats["accepted"], "corrected": stats["corrected"],
              "rejected": stats["rejected"], "disagreements": stats["disagreement"],
              "invalid_corrections": stats["invalid_corrections"],
              "accepted_but_failed_validation": stats["accepted_but_invalid"],
              "unreviewed": len(records) - stats["reviewed"]}
    runs = store.record_runs([c.record.id for c in candidates])
    run_ids = sorted(set(runs.values()))
    validation_ids = sorted({marks[c.record.id][1] for c in candidates if c.record.id in marks})
    return Selection(rs, candidates, excluded, dict(sorted(counts.items())), review, run_ids, validation_ids,
                     corrections)

