"""Pull reviewers' responses from Argilla into the store's `review_decisions` table.

Every response becomes one row per (record, reviewer): its status (submitted, discarded, draft),
the decision, the correction with its re-validation, every answered value as given, and when it
was given. A re-pull replaces each reviewer's earlier row for a record, in one transaction, so
pulling twice changes nothing and a pull that fails writes nothing. Responses to records the store
no longer holds are reported and skipped; they stay in Argilla. Disagreement (reviewers of one
record who decided differently, or gave different valid corrections) is reported.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone

from mashbill.curation.review import layout
from mashbill.curation.review.client import ArgillaReview
from mashbill.curation.review.corrections import CorrectionValidator
from mashbill.curation.review.errors import ReviewError
from mashbill.factory.records import Record
from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec

log = logging.getLogger(__name__)


@dataclass
class PullSummary:
    dataset: str
    dataset_id: str
    url: str
    records_in_dataset: int = 0
    unanswered: int = 0
    responses: int = 0
    stored: int = 0
    replaced: int = 0
    by_status: Counter = field(default_factory=Counter)
    decisions: Counter = field(default_factory=Counter)
    corrections_valid: int = 0
    corrections_invalid: list[dict] = field(default_factory=list)  # record_id, reviewer, codes
    orphans: list[dict] = field(default_factory=list)  # record_id, reviewer
    disagreements: list[dict] = field(default_factory=list)  # record_id, decisions {reviewer: decision}

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["by_status"] = dict(self.by_status)
        d["decisions"] = dict(self.decisions)
        return d


def _utc(ts: str | None) -> datetime | None:
    if not ts:
        return None
    parsed = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    return parsed


def _value(values: dict, name: str):
    entry = values.get(name)
    return entry.get("value") if isinstance(entry, dict) else None


def records_by_id(store: Store, ids: list[str]) -> dict[str, Record]:
    return {r.id: r for r in store.records(ids=ids)}


def fetch(client: ArgillaReview, rs: ResolvedSpec) -> tuple[dict, list[dict], dict[str, str]]:
    """The dataset, its records with responses, and user names; raises when the dataset is gone."""
    name = layout.dataset_name(rs)
    dataset = client.find_dataset(name)
    if dataset is None:
        raise ReviewError(f"review dataset {name!r} is not in workspace {client.conn.workspace!r} on {client.conn}: "
                          "it was deleted or never pushed. Decisions pulled earlier stay in the store; "
                          f"`mashbill review push {rs.spec.ref}` starts a new review")
    records = list(client.iter_records(dataset["id"]))
    return dataset, records, client.usernames()


def pull(rs: ResolvedSpec, store: Store, client: ArgillaReview) -> PullSummary:
    dataset, argilla_records, users = fetch(client, rs)
    summary = PullSummary(dataset["name"], dataset["id"], client.conn.url, records_in_dataset=len(argilla_records))
    known = records_by_id(store, [r["external_id"] for r in argilla_records if r.get("external_id")])
    validator = CorrectionValidator(rs)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    rows: dict[tuple[str, str], dict] = {}
    for arec in argilla_records:
        responses = arec.get("responses") or []
        if not responses:
            summary.unanswered += 1
            continue
        rid = arec.get("external_id")
        record = known.get(rid)
        for resp in responses:
            summary.responses += 1
            reviewer = users.get(resp["user_id"], resp["user_id"])
            if record is None:
                summary.orphans.append({"record_id": rid or arec["id"], "reviewer": reviewer})
                continue
            values = resp.get("values") or {}
            status = resp.get("status") or "submitted"
            decision = _value(values, layout.DECISION)
            decision = decision if decision in ("accept", "reject") else None
            check = validator.check(record, _value(values, layout.CORRECTION))
            summary.by_status[status] += 1
            if status == "submitted":
                summary.decisions[decision or "none"] += 1
                if check.given and check.valid:
                    summary.corrections_valid += 1
                elif check.given:
                    summary.corrections_invalid.append({"record_id": rid, "reviewer": reviewer,
                                                        "codes": sorted({i["code"] for i in check.issues})})
            rows[(rid, reviewer)] = {
                "record_id": rid, "reviewer": reviewer, "status": status, "decision": decision,
                "corrected_output": json.dumps(check.value, ensure_ascii=False)
                if check.given and check.value is not None else None,
                "correction_valid": check.valid,
                "correction_issues": json.dumps(list(check.issues), ensure_ascii=False) if check.issues else None,
                "response_values": json.dumps(values, ensure_ascii=False, sort_keys=True),
                "responded_at": _utc(resp.get("updated_at") or resp.get("inserted_at")),
                "pulled_at": now, "dataset": dataset["name"],
            }
    summary.stored, summary.replaced = write_decisions(store, list(rows.values()))
    summary.disagreements = disagreements(store, sorted({k[0] for k in rows}))
    return summary


def write_decisions(store: Store, rows: list[dict]) -> tuple[int, int]:
    """Insert the rows, replacing each (record, reviewer)'s earlier row; one transaction. (stored, replaced)"""
    return store.write_review_decisions(rows)


def disagreements(store: Store, record_ids: list[str]) -> list[dict]:
    """Records whose reviewers' submitted decisions differ, or whose valid corrections differ."""
    if not record_ids:
        return []
    rows = store.review_rows(record_ids=record_ids, submitted=True)
    per: dict[str, list] = defaultdict(list)
    for rid, reviewer, decision, corrected, valid in ((r["record_id"], r["reviewer"], r["decision"],
                                                       r["corrected_output"], r["correction_valid"]) for r in rows):
        per[rid].append((reviewer, decision, json.loads(corrected) if corrected and valid else None))
    out = []
    for rid, entries in per.items():
        if len(entries) < 2:
            continue
        decisions = {d for _, d, _ in entries if d}
        corrections = {json.dumps(c, sort_keys=True) for _, _, c in entries if c is not None}
        if len(decisions) > 1 or len(corrections) > 1:
            out.append({"record_id": rid, "decisions": {r: d for r, d, _ in entries},
                        "corrections_differ": len(corrections) > 1})
    return out
