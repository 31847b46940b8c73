"""Which stored records go to review.

    all               every record of the spec that has teacher output (accepted or rejected)
    flagged           records with any finding: a reject, penalty or flag verdict
    label-issues      records cleanlab finds suspect (an LBL001 flag from `mashbill cleanlab`)
    low-confidence    records whose confidence is below 0.85 (or `low-confidence:T`), lowest first
    random:N          a fixed pseudo-random sample of N records that could be trained (the same N for the same
                      spec; a larger N extends the smaller sample, so re-pushing never reshuffles what reviewers
                      have); a spot check of the training data, so it draws only from records that the one
                      usability answer (`factory.usable`) does not leave out: not rejected at generation, by
                      their latest validation pass, by the judge or by a reviewer (a record not validated yet
                      can still be drawn)

Confidence is the teacher's own score when the record carries one (`meta.confidence`, 0..1);
otherwise it comes from the findings: 1.0, minus 0.5 for any reject, 0.2 per penalty and 0.1 per
flag, floored at 0.
"""

from __future__ import annotations

import re

from mashbill.curation.review.errors import ReviewError
from mashbill.curation.review.layout import ReviewItem
from mashbill.factory.records import Verdict
from mashbill.factory.store import Store
from mashbill.hashing import sha256_text
from mashbill.specs import ResolvedSpec

LOW_CONFIDENCE = 0.85
SELECT_HELP = "flagged | label-issues | low-confidence[:T] | random:N | all"


def parse_selection(text: str) -> tuple[str, float | int | None]:
    m = re.fullmatch(r"(all|flagged|label-issues)|low-confidence(?::(0?\.\d+|1(?:\.0*)?|0))?|random:(\d+)", text.strip())
    if not m:
        raise ReviewError(f"--select: expected {SELECT_HELP}, found {text!r}")
    if m.group(1):
        return m.group(1), None
    if m.group(3):
        n = int(m.group(3))
        if n < 1:
            raise ReviewError("--select random:N needs N >= 1")
        return "random", n
    return "low-confidence", float(m.group(2)) if m.group(2) else LOW_CONFIDENCE


def confidence(meta: dict, verdicts: list[Verdict]) -> float:
    own = meta.get("confidence")
    if isinstance(own, (int, float)) and not isinstance(own, bool) and 0 <= own <= 1:
        return float(own)
    score = 1.0
    if any(v.severity == "reject" for v in verdicts):
        score -= 0.5
    score -= 0.2 * sum(v.severity == "penalty" for v in verdicts)
    score -= 0.1 * sum(v.severity == "flag" for v in verdicts)
    return round(max(0.0, score), 4)


def sampleable(state) -> bool:
    """May random:N draw this record (a `factory.usable.RecordState`)? Usable, or left out only because no
    validation pass has covered it yet (review may come before validation)."""
    u = state.usability
    return u.usable or (u.stage == "validate" and state.mark is None)


def review_items(store: Store, rs: ResolvedSpec) -> list[ReviewItem]:
    """Every record of this spec (by hash) that has teacher output, with its verdicts, teacher and whether
    random sampling may draw it."""
    states = [st for st in store.usable(rs.hash) if st.record.status != "failed"]
    if not states:
        other = sum(n for h, _, n in store.spec_status_counts(rs.spec.name, rs.spec.version) if h != rs.hash)
        if other:
            raise ReviewError(f"the store {store.root} holds {other} record(s) of {rs.ref} made with a different "
                              f"spec content (hash) than {rs.path} now has; nothing of this version to review")
        return []
    teachers = store.record_models(rs.hash)
    items = []
    for st in states:
        vs = [Verdict(code, severity, detail, stage) for stage, code, severity, detail in st.verdicts]
        items.append(ReviewItem(st.record, tuple(vs), confidence(st.record.meta, vs),
                                teachers.get(st.record.id, "unknown"), sampleable(st)))
    return items


def select(items: list[ReviewItem], mode: str, arg=None, seed: int = 0) -> list[ReviewItem]:
    if mode == "all":
        return list(items)
    if mode == "flagged":
        return [i for i in items if i.verdicts]
    if mode == "label-issues":
        from mashbill.curation.label_issues import CODE

        return [i for i in items if any(v.code == CODE for v in i.verdicts)]
    if mode == "low-confidence":
        threshold = LOW_CONFIDENCE if arg is None else float(arg)
        return sorted((i for i in items if i.confidence < threshold), key=lambda i: (i.confidence, i.record.id))
    if mode == "random":
        def key(i: ReviewItem) -> str:
            return sha256_text(f"{seed}:{i.record.id}")

        return sorted((i for i in items if i.sampleable), key=key)[: int(arg)]
    raise ReviewError(f"unknown selection {mode!r}; expected {SELECT_HELP}")
