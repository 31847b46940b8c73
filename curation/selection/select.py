"""Which stored records may go into a snapshot, and why each of the others may not.

Whether a record is usable is decided in one place, `factory.usable` (through `Store.usable`): generation
status, the latest validation mark, the judge and the reviewers' decisions. Here a reviewer's correction is
re-checked against the output schema and, for plans, every reject-severity rule; a usable record becomes a
candidate (with the correction as its output when corrected), and every other one is excluded with its codes,
so the snapshot's rejects file says why it is not there. The selection also counts review outcomes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import jsonschema

from mashbill.errors import MashbillError
from mashbill.factory.records import Record
from mashbill.factory.store import Store
from mashbill.factory.usable import REVIEW_BAD_CORRECTION, REVIEW_DISAGREE, REVIEW_REJECTED
from mashbill.specs import ResolvedSpec


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
    # with `columnar`: the usable records decided without the rules' walk, as `Store.plain_usable` columns (they
    # are candidates too, with the teacher output, origin "teacher" and no review; not in `candidates`)
    plain: Any = None


def _q(record: Record) -> str | None:
    q = record.input.get("query")
    return q if isinstance(q, str) else None


def _text(output: Any, raw: str | None) -> str | None:
    from mashbill.hashing import canonical_json

    return canonical_json(output) if output is not None else raw


def _rules_recheck(checker, rec: Record):
    """A correction must pass the same rules (reject severity) as the record it corrects."""

    def ok(value) -> bool:
        return not any(v.severity == "reject" for v in checker.check(rec.input, value, rec.meta))

    return ok


def select_records(store: Store, rs: ResolvedSpec, *, require_review: bool | None = None, columnar: bool = False,
                   paths: Sequence[tuple[str, str, str]] = (), key_label: str | None = None,
                   tokens_profile: str | None = None) -> Selection:
    """The selection; with `columnar` (and review not required), the records the common case decides come back as
    one Arrow table (`Selection.plain`, with the JSON `paths`, `key_label` and `tokens_profile` of
    `Store.plain_usable`) instead of Candidates."""
    spec = rs.spec
    require_review = spec.curation.require_review if require_review is None else require_review
    validator = jsonschema.validators.validator_for(rs.output_schema)(rs.output_schema)
    checker = []  # built on first need: only a record with review rows has a correction to re-check

    def recheck_for(rec: Record):
        if spec.kind != "plan" or "rules" not in rs.file_paths:
            return None
        if not checker:
            from mashbill.validators.checker import RecordChecker

            checker.append(RecordChecker.for_spec(rs))
        return _rules_recheck(checker[0], rec)

    plain = None
    left_out: list[tuple] = []  # (record_id, stage, codes, detail, query, output), decided from columns
    if columnar and not require_review:
        plain, others = store.plain_usable(rs.hash, paths, key_label, tokens_profile)
        # most of the others are left out (rejects) without a review that could take them back: decided in columns;
        # of the rest, only those taken are read again with their prompts
        left_out, others = store.plain_left_out(rs.hash, others)
        states = store.usable(rs.hash, validator=validator, recheck_for=recheck_for, ids=others, messages=False)
        taken = [st.record.id for st in states if st.usability.usable or st.usability.corrected]
        prompted = {rec.id: rec for rec in store.records(rs.hash, ids=taken)} if taken else {}
        states = [replace(st, record=prompted[st.record.id]) if st.record.id in prompted else st for st in states]
    else:
        states = store.usable(rs.hash, require_review=require_review, validator=validator, recheck_for=recheck_for)
    n_plain = plain.num_rows if plain is not None else 0
    if not states and not n_plain and not left_out:
        others = sorted({h for h, _, _ in store.spec_status_counts(spec.name, spec.version)})
        hint = (f"; the store has records of {spec.ref} under another spec hash ({', '.join(h[:12] for h in others)}),"
                " so the spec changed since they were generated") if others else "; run `mashbill generate` first"
        raise MashbillError(f"store {store.root} has no records of {spec.ref} (spec hash {rs.hash[:12]}){hint}")
    unvalidated = [st.record.id for st in states if st.record.status == "accepted" and st.mark is None]
    if unvalidated:
        raise MashbillError(
            f"store {store.root}: {len(unvalidated)} accepted record(s) of {spec.ref} were never covered by a "
            f"validation run (first: {unvalidated[0][:16]}); run `mashbill validate {spec.ref} --store {store.root}` "
            "first. Nothing was written.")
    counts: Counter = Counter(store.verdict_counts(rs.hash))  # the plain records' flags and penalties too
    candidates: list[Candidate] = []
    excluded = [Excluded(rid, spec.ref, stage, codes, detail, query, output)
                for rid, stage, codes, detail, query, output in left_out]
    corrections: list[tuple[Record, Any]] = []
    stats = Counter()
    for st in states:
        rec, d, u = st.record, st.decision, st.usability
        if st.reviewed:
            stats["with_decisions"] += 1
        if d.state != "none":
            stats["reviewed"] += 1
            stats[d.state] += 1
        if d.invalid_correction:
            stats["invalid_corrections"] += 1
        if u.corrected:
            candidates.append(Candidate(rec, d.correction, "review-correction", "corrected"))
            if rec.output is not None:
                corrections.append((rec, d.correction))
        elif u.usable:
            candidates.append(Candidate(rec, rec.output, "teacher", "accepted" if d.state == "accepted" else None))
        else:
            if u.stage == "validate" and d.state == "accepted":
                stats["accepted_but_invalid"] += 1
            excluded.append(Excluded(rec.id, spec.ref, u.stage, u.codes, u.detail, _q(rec), _text(rec.output, rec.raw)))
    if left_out:
        excluded.sort(key=lambda x: x.record_id)  # record id order, as when every one was decided below
    for code, n in ((REVIEW_REJECTED, stats["rejected"]), (REVIEW_DISAGREE, stats["disagreement"]),
                    (REVIEW_BAD_CORRECTION, stats["invalid_corrections"])):
        if n:
            counts[code] += n
    seen = len(states) + n_plain + len(left_out)
    review = {"require_review": require_review, "records": seen,
              "reviewed": stats["reviewed"], "accepted": stats["accepted"], "corrected": stats["corrected"],
              "rejected": stats["rejected"], "disagreements": stats["disagreement"],
              "invalid_corrections": stats["invalid_corrections"],
              "accepted_but_failed_validation": stats["accepted_but_invalid"],
              "unreviewed": seen - stats["reviewed"]}
    runs = store.record_runs([c.record.id for c in candidates])
    run_ids = set(runs.values())
    marks = {st.record.id: st.mark for st in states if st.mark is not None}
    validation_ids = {marks[c.record.id][1] for c in candidates if c.record.id in marks}
    if n_plain:
        run_ids.update(plain.column("run_id").unique().to_pylist())
        validation_ids.update(plain.column("validation_id").unique().to_pylist())
    return Selection(rs, candidates, excluded, dict(sorted(counts.items())), review, sorted(run_ids),
                     sorted(validation_ids), corrections, plain)

