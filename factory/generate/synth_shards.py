"""Sharded query synthesis: each shard's share of a cell's quota and of its calls, and the queries a merge dropped.

Shard i of n fills `shard_quota(quota, k, (i, n))` of the k-th cell: the quota split so the shares add up to it
exactly, the remainder going to the shards after k (so small cells do not all land on shard 0). Its calls are
the first ones of the cell whose record id falls in slice i (`shard_of`), as many as its share needs, so shards
never send the same call and each keeps its own call budget. A shard deduplicates only against its own pool;
`mashbill merge` then screens the merged pool and stores a `SYN020` flag verdict (stage `merge`) on each later
copy of a query another shard kept (`validators.queries.pool_merge`); `pool_items` leaves those out. Records stay
as they were written: the drop is a verdict, so the merge can be audited and repeated.
"""

from __future__ import annotations

import re
from typing import Callable

from mashbill.factory.shards import shard_of
from mashbill.factory.store import Store

CROSS_SHARD_DUP = "SYN020"
MERGE_STAGE = "merge"
_POSITION = re.compile(r"^query (\d+) ")


def shard_quota(quota: int, index: int, shard: tuple[int, int] | None) -> int:
    """Shard i's part of the quota of the cell at `index`; the parts over i = 0..n-1 add up to `quota`."""
    if shard is None:
        return quota
    i, n = shard
    base, extra = divmod(quota, n)
    return base + ((i - index) % n < extra)


def shard_calls(call_id: Callable[[int], str], needed: int, shard: tuple[int, int] | None) -> list[int]:
    """The first `needed` call numbers of a cell whose record id falls in the shard (all of 0..needed-1 unsharded)."""
    if shard is None:
        return list(range(needed))
    i, n = shard
    calls, call = [], 0
    while len(calls) < needed and call < 64 * n * (needed + 1):  # ids are uniform: this bound is never reached
        if shard_of(call_id(call), n) == i:
            calls.append(call)
        call += 1
    return calls


def merge_detail(position: int, text: str, detail: str) -> str:
    """The verdict detail of a dropped query; `position` is its place in the call's output (lineage)."""
    return f"query {position + 1} {text[:80]!r}: {detail}"


def dropped_positions(store: Store, spec_hash: str) -> dict[str, set[int]]:
    """record id -> positions of its queries a merge dropped as cross-shard duplicates."""
    out: dict[str, set[int]] = {}
    for rid, detail in store.stage_verdicts(spec_hash, MERGE_STAGE, CROSS_SHARD_DUP):
        m = _POSITION.match(detail or "")
        if m:
            out.setdefault(rid, set()).add(int(m.group(1)) - 1)
    return out
