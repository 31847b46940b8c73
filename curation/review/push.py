"""Push stored records to Argilla for human review.

Push only reads the store. The dataset is created once per spec version; records are upserted by
their Mashbill id in batches, so a push that dies midway (server gone, Ctrl-C) is completed by
running it again, without duplicates and without touching answers already given. A dataset left
in draft by an interrupted creation (it holds no records yet) is removed and created again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from mashbill.curation.review import layout
from mashbill.curation.review.client import ArgillaReview
from mashbill.curation.review.errors import ReviewError
from mashbill.curation.review.select import review_items, select
from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec

log = logging.getLogger(__name__)

BATCH = 200


@dataclass
class PushSummary:
    dataset: str
    dataset_id: str
    url: str
    selection: str
    candidates: int = 0
    selected: int = 0
    pushed: int = 0
    created: bool = False
    total_in_dataset: int | None = None
    by_status: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def ensure_dataset(client: ArgillaReview, rs: ResolvedSpec, *, min_submitted: int = 1) -> tuple[dict, bool]:
    """The spec's review dataset, created when missing; refuses one whose fields or questions differ."""
    name = layout.dataset_name(rs)
    client.ensure_workspace()
    found = client.find_dataset(name)
    if found is not None and found.get("status") == "draft":
        log.info("removing draft dataset %s left by an interrupted creation", name)
        client.delete_dataset(found["id"])
        found = None
    if found is None:
        return client.create_dataset(name, layout.build_settings(rs, min_submitted=min_submitted)), True
    have = client.dataset_settings(found["id"])
    want_fields, want_questions = set(layout.FIELDS), set(layout.question_names(rs))
    if set(have["fields"]) != want_fields or set(have["questions"]) != want_questions:
        raise ReviewError(f"dataset {name!r} on {client.conn} has fields {sorted(have['fields'])} and questions "
                          f"{sorted(have['questions'])}, not the {sorted(want_fields)} and {sorted(want_questions)} "
                          "this mashbill writes; delete it in Argilla (after pulling its decisions) or bump the spec "
                          "version")
    return found, False


def push(rs: ResolvedSpec, store: Store, client: ArgillaReview, *, selection: str = "flagged", arg=None,
         min_submitted: int = 1, batch_size: int = BATCH,
         on_batch: Callable[[int, int], None] | None = None) -> PushSummary:
    items = review_items(store, rs)
    chosen = select(items, selection, arg, seed=rs.spec.teacher.sampling.seed)
    label = selection + (f":{arg}" if arg is not None else "")
    if not chosen:
        return PushSummary(layout.dataset_name(rs), "", client.conn.url, label, candidates=len(items))
    dataset, created = ensure_dataset(client, rs, min_submitted=min_submitted)
    summary = PushSummary(dataset["name"], dataset["id"], client.conn.url, label, candidates=len(items),
                          selected=len(chosen), created=created)
    for start in range(0, len(chosen), batch_size):
        batch = chosen[start:start + batch_size]
        client.upsert_records(dataset["name"], [layout.to_argilla_record(rs, item) for item in batch])
        summary.pushed += len(batch)
        if on_batch:
            on_batch(summary.pushed, len(chosen))
    for item in chosen:
        summary.by_status[item.record.status] = summary.by_status.get(item.record.status, 0) + 1
    progress = client.progress(dataset["id"])
    summary.total_in_dataset = progress.get("total")
    return summary
