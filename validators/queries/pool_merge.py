"""After `mashbill merge` of sharded synthesis runs: drop the queries that duplicate one another shard kept.

Each shard screened its queries only against its own pool, so the same (or a near) query can come back from two
shards. The merged pool is screened again in its stable order (record id, then position) with the spec's own
duplicate checks (`QueryScreen.novelty`: identical after normalisation, or character 5-gram Jaccard at or above
synthesis.filters.near_duplicate_threshold); the later copy gets a `SYN020` flag verdict (stage `merge`), which
`factory.generate.synth.pool_items` leaves out, so every reader of the pool (from_spec seeds, the report, a resume) sees
it without the duplicate. Records are not changed; merging again adds no verdict for a query already dropped.
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import datetime, timezone

from mashbill.factory.generate.synth import plan_cells, pool_items
from mashbill.factory.generate.synth_shards import CROSS_SHARD_DUP, MERGE_STAGE, merge_detail
from mashbill.factory.records import Verdict
from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec
from mashbill.validators.queries.queries import QueryScreen


def drop_cross_shard_duplicates(store: Store, rs: ResolvedSpec) -> dict:
    """Flag every later copy of a pooled query of `rs`; the figures for the merge summary and the report."""
    screen = QueryScreen([], [], rs.spec.synthesis.filters)  # no seeds, no holdout: each shard checked those
    rows = []
    kept: list[dict] = []
    for item in pool_items(store, rs):
        found = screen.novelty(item["query"])
        if found is None:
            screen.add(item["query"])
            kept.append(item)
            continue
        lineage = item["lineage"]
        rows.append((lineage["record_id"], Verdict(CROSS_SHARD_DUP, "flag", merge_detail(
            lineage["position"], item["query"], f"{found[1]} kept by another shard"), stage=MERGE_STAGE)))
    if rows:
        run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + "-merge" + uuid.uuid4().hex[:8]
        store.add_verdicts(run_id, rows)
    return pool_figures(store, rs, dropped_now=len(rows), pool=kept)


def pool_figures(store: Store, rs: ResolvedSpec, *, dropped_now: int = 0, pool: list[dict] | None = None) -> dict:
    """The pool against its quotas: kept per cell, the cells short of their quota, cross-shard duplicates dropped."""
    pool = pool_items(store, rs) if pool is None else pool
    kept = Counter(i.get("cell") for i in pool)
    quotas = {c.name: c.quota for c in plan_cells(rs)}
    dropped = len(store.stage_verdicts(rs.hash, MERGE_STAGE, CROSS_SHARD_DUP))
    return {"spec": rs.ref, "queries": len(pool), "target": rs.spec.synthesis.target,
            "cross_shard_dropped": dropped, "dropped_now": dropped_now,
            "cells_short": {c: f"{kept.get(c, 0)}/{q}" for c, q in sorted(quotas.items()) if kept.get(c, 0) < q},
            "cells_over": {c: f"{kept.get(c, 0)}/{q}" for c, q in sorted(quotas.items()) if kept.get(c, 0) > q}}
