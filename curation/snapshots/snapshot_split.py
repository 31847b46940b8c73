"""Balance a snapshot's examples to their cell quotas, group them (paraphrases, shared sources, near
duplicates) and split the groups into train/eval/test without leakage. Works on the examples table
(`snapshot_columns.EXAMPLES`) by row index."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from mashbill.curation.selection.balance import Balance, apply_quotas, oversample
from mashbill.curation.selection.groups import cluster_joins, near_duplicate_clusters, normalized_classes
from mashbill.curation.selection.split import SplitResult, assign_splits
from mashbill.curation.snapshots.snapshot_examples import Built
from mashbill.curation.snapshots.snapshot_format import SnapshotError
from mashbill.hashing import canonical_json
from mashbill.specs import ResolvedSpec


@dataclass
class Split:
    rows: list[int]  # the examples table's rows in the snapshot (after the balance cut)
    cut: list[int]  # rows cut by the balance (BAL001)
    keys: list[str]  # every row's key (the whole table)
    cells: list[str]  # every row's cell
    balance: Balance
    res: SplitResult
    copies: dict[str, int]  # key -> extra oversampled copies
    leak: dict


def leakage(keys: list[str], sides, roots, queries: list) -> dict:
    """`validators.data.leakage.across_splits` over the split's rows as columns (numpy, sorted by group): groups that
    straddle splits, and queries identical after normalisation found on more than one side (a key's last row's
    query, as the check's key -> text dicts hold). `sides` and `roots`: each row's split and group as numbers (numpy
    arrays: `SplitResult.side_index`, `.root_index`)."""
    import numpy as np

    def straddling(by, side) -> int:  # groups of `by` whose rows are not all on one side
        if not len(by):
            return 0
        order = np.lexsort((side, by))
        by, side = by[order], side[order]
        starts = np.flatnonzero(np.concatenate(([True], by[1:] != by[:-1])))
        return int((np.minimum.reduceat(side, starts) != np.maximum.reduceat(side, starts)).sum())

    last = list({k: i for i, k in enumerate(keys)}.values())
    asked = np.array([i for i in last if queries[i]], dtype=np.int64)
    return {"groups_across_splits": straddling(roots, sides),
            "identical_queries_across_splits": straddling(normalized_classes([queries[i] for i in asked.tolist()]),
                                                          sides[asked])}


def near_joins(built: Built, rows: list[int] | None, queries: list, threshold: float):
    """Joins (two arrays of positions in `rows`; None: every row of the examples table, in order) that join each
    near-duplicate cluster of the rows: validation's clusters of the rows' records where it kept one for each
    (`Built.near_groups`), else the clusters of the rows' queries found here."""
    groups, built.near_groups = built.near_groups, None  # (read once: its memory back before the write)
    if groups is not None and groups.num_rows:
        record_ids = built.examples.column("record_id")
        if rows is not None:
            record_ids = record_ids.take(pa.array(rows, pa.int64()))
        at = pc.index_in(record_ids, value_set=groups.column("record_id"))
        if at.null_count == 0:
            return cluster_joins(groups.column("near_group").take(at).combine_chunks().dictionary_encode().indices)
    return cluster_joins(near_duplicate_clusters(queries, threshold))


def _repeats(values: pa.ChunkedArray) -> bool:
    """Whether a value occurs twice; compared with its neighbour where the column is sorted (the SFT examples are
    in record id order: counting distinct ids took 0.4 s at 439,521 rows)."""
    a = values.combine_chunks()
    if len(a) < 2:
        return False
    head, tail = a.slice(0, len(a) - 1), a.slice(1)
    if pc.all(pc.less_equal(head, tail)).as_py():
        return bool(pc.any(pc.equal(head, tail)).as_py())
    return pc.count_distinct(a).as_py() < len(a)


def split_and_balance(built: Built, rs: ResolvedSpec) -> Split:
    spec = rs.spec
    cur = spec.curation
    t = built.examples
    keys, cells = t.column("key").to_pylist(), t.column("cell").to_pylist()
    correction = pc.equal(t.column("row_kind"), "correction").to_pylist()
    base = [i for i, c in enumerate(correction) if not c]
    derived = [i for i, c in enumerate(correction) if c]
    if not base:
        codes = Counter(c for x in built.excluded for c in x.codes)
        why = ", ".join(f"{c}: {n}" for c, n in codes.most_common(8)) or "no records"
        raise SnapshotError(f"nothing to freeze for {rs.ref}: the selection is empty ({built.records_seen} record(s) "
                            f"seen; left out by code: {why}). Nothing was written.")
    balance = apply_quotas([keys[i] for i in base], [cells[i] for i in base], built.dims, cur.quotas, rs.ref)
    kept = set(balance.kept)
    cut = [i for i in base if keys[i] not in kept]
    base = [i for i in base if keys[i] in kept]
    # (the per-row Python lists below are built only when some row needs them: at a million rows each costs
    # 50-120 MB of peak memory)
    linked = pc.sum(pc.list_value_length(t.column("links"))).as_py() or 0
    links_col = t.column("links").to_pylist() if linked else None
    derived = [i for i in derived if all(k in kept for k in links_col[i])] if linked else derived
    rows = base + derived
    ekeys = keys if len(rows) == t.num_rows and rows == list(range(t.num_rows)) else [keys[i] for i in rows]
    links = [(keys[i], other) for i in rows for other in links_col[i]] if linked else []
    # paraphrase groups and shared sources
    if cur.group_by:
        inputs = t.column("inputs").to_pylist()
        decoded = {i: json.loads(inputs[i]) for i in rows}
        for fieldname in cur.group_by:
            first: dict[str, str] = {}
            for i in rows:
                value = decoded[i].get(fieldname)
                if value is None:
                    continue
                value = canonical_json(value)
                if value in first:
                    links.append((first[value], keys[i]))
                else:
                    first[value] = keys[i]
    if _repeats(t.column("record_id")):  # rows built from one record: one group
        record_ids = t.column("record_id").to_pylist()
        by_record: dict[str, str] = {}
        for i in rows:
            if record_ids[i] in by_record:
                links.append((by_record[record_ids[i]], keys[i]))
            else:
                by_record[record_ids[i]] = keys[i]
        del record_ids
    queries = t.column("query").to_pylist()
    if ekeys is not keys:
        queries = [queries[i] for i in rows]
    joins = near_joins(built, None if ekeys is keys else rows, queries, cur.near_duplicate_threshold)
    ratios = {"train": cur.splits.train, "eval": cur.splits.eval, "test": cur.splits.test}
    res = assign_splits(t.column("key").combine_chunks() if ekeys is keys else ekeys,
                        cells if ekeys is keys else [cells[i] for i in rows], links, ratios, joins)
    train_by_cell: dict[str, list[str]] = defaultdict(list)
    if cur.quotas.oversample:  # (only oversampling reads them) base rows come first in `rows`
        for i, side in zip(base, res.side_index[:len(base)].tolist()):
            if side == 0:
                train_by_cell[cells[i]].append(keys[i])
    copies = oversample(balance, train_by_cell, cur.quotas, rs.ref)
    leak = leakage(ekeys, res.side_index, res.root_index, queries)
    if leak["groups_across_splits"] or leak["identical_queries_across_splits"]:
        raise SnapshotError(f"{rs.ref}: the split leaks across train/eval/test ({leak}); this is a bug")
    return Split(rows, cut, keys, cells, balance, res, copies, leak)
