"""Group-aware, stratified train/eval/test splits.

Records that are near duplicates of each other (MinHash clusters over the query), that share a
paraphrase group (`curation.group_by` input fields) or that share a source (the pairs built from one
plan) form one group, and a group lands on exactly one side. Within each label cell, groups are taken in
the order of a hash of their id and each goes to the split furthest below its share (in the cell and
overall), so the split is deterministic, close to the ratios even for small cells, and stable when
unrelated records are added. The checks after the split are `validators.data.leakage.across_splits`.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from typing import Iterable, Sequence


SPLITS = ("train", "eval", "test")


class SplitResult:
    """Where each key landed. Held as columns (each row's side as an index into SPLITS, each row's group as an index
    into `names`); the Python views (`assignment`, `groups`, `sides`, `roots`) are built when first asked for, since
    at a million rows each costs a second and tens of MB (issue 29)."""

    def __init__(self, keys: Sequence[str], side_index, root_index, names, stats: dict):
        self.keys = keys
        self.side_index = side_index  # numpy int8 per row given: 0 train, 1 eval, 2 test
        self.root_index = root_index  # numpy int64 per row given: its group's id in `names`
        self.names = names  # Arrow strings: the group ids (a group is named by its smallest key)
        self.stats = stats

    @cached_property
    def sides(self) -> list[str]:
        """The split of each key given (in their order, repeats included)."""
        return [SPLITS[j] for j in self.side_index.tolist()]

    @cached_property
    def roots(self) -> list[str]:
        """The group id of each key given."""
        return self.names.take(self.root_index).to_pylist() if len(self.root_index) else []

    @cached_property
    def assignment(self) -> dict[str, str]:
        """key -> split."""
        return dict(zip(self._key_list(), self.sides))

    @cached_property
    def groups(self) -> dict[str, str]:
        """key -> group id."""
        return dict(zip(self._key_list(), self.roots))

    def _key_list(self) -> Sequence[str]:
        return self.keys.to_pylist() if hasattr(self.keys, "to_pylist") else self.keys


def _components(keys: Sequence[str], links: Iterable[tuple[str, str]], joins=None):
    """(distinct keys as an Arrow array, each row's distinct-key index, each row's root index, each distinct key's
    rank in key order): connected components of the links (pairs of keys) and `joins` (pairs of row positions: two
    numpy arrays) over the keys, each named by its smallest key (a union-find's answer), computed over integer ids
    (Arrow and numpy, no per-key Python)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from mashbill.validators.data.dedup import connected

    enc = (keys if isinstance(keys, pa.Array) else pa.array(keys, pa.string())).dictionary_encode()
    uniq = enc.dictionary
    row_id = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    n = len(uniq)
    # rank of each distinct key in key order (Arrow sorts strings by UTF-8 bytes: code point order, as Python does)
    by_key = pc.sort_indices(uniq).to_numpy()
    rank = np.empty(n, dtype=np.int64)
    rank[by_key] = np.arange(n)
    a_parts, b_parts = [], []
    pairs = list(links)
    if pairs:
        ends = [pc.index_in(pa.array([p[e] for p in pairs], pa.string()), value_set=uniq) for e in (0, 1)]
        if any(x.null_count for x in ends):
            raise KeyError("a link names a key that is not split")
        a_parts.append(ends[0].to_numpy(zero_copy_only=False).astype(np.int64))
        b_parts.append(ends[1].to_numpy(zero_copy_only=False).astype(np.int64))
    if joins is not None and len(joins[0]):
        a_parts.append(row_id[np.asarray(joins[0], dtype=np.int64)])
        b_parts.append(row_id[np.asarray(joins[1], dtype=np.int64)])
    if a_parts:
        label = connected(n, np.concatenate(a_parts), np.concatenate(b_parts))
        smallest = np.full(n, n, dtype=np.int64)
        np.minimum.at(smallest, label, rank)
        root = by_key[smallest[label]]  # the distinct key of the smallest rank in each one's component
    else:
        root = np.arange(n)
    return uniq, row_id, root[row_id], rank


def assign_splits(keys: Sequence[str], cells: Sequence[str], links: Iterable[tuple[str, str]],
                  ratios: dict[str, float], joins=None) -> SplitResult:
    """`links` join keys (pairs of keys), `joins` rows (two numpy arrays of positions in `keys`, for callers that
    hold groups as row numbers); `keys` may be an Arrow string array."""
    import numpy as np

    uniq, row_id, row_root, rank = _components(keys, links, joins)
    n_rows = len(row_id)
    size_of = np.bincount(row_root, minlength=len(uniq)) if n_rows else np.zeros(0, dtype=np.int64)
    # a group's cell is its smallest key's (the first such row); groups in order of first appearance
    order = np.lexsort((np.arange(n_rows), rank[row_id], row_root)) if n_rows else np.zeros(0, dtype=np.int64)
    first_of_root = order[np.concatenate(([True], row_root[order][1:] != row_root[order][:-1]))] if n_rows else order
    gids_idx = row_root[first_of_root]
    names = uniq.take(gids_idx).to_pylist() if n_rows else []
    gid_cells = [cells[i] for i in first_of_root.tolist()]
    sizes = size_of[gids_idx].tolist()
    gid_ids = gids_idx.tolist()
    # cell by cell (ranks of the sorted distinct cells), then by the hash of the group id (digest bytes sort as
    # their hex does)
    cell_rank = {c: r for r, c in enumerate(sorted(set(gid_cells)))}
    digests = np.array([hashlib.sha256(g.encode()).digest() for g in names], dtype="S32")
    by_order = np.lexsort((digests, np.array([cell_rank[c] for c in gid_cells], dtype=np.int64))).tolist()
    inf = float("-inf")
    r0, r1, r2 = (ratios.get(s, 0.0) for s in SPLITS)
    t0 = t1 = t2 = 0
    side = np.zeros(len(uniq), dtype=np.int8)
    n_total = 0
    cell = None
    c0 = c1 = c2 = n_cell = 0
    # cell by cell, groups in the order of a hash of their id: the split furthest below its share (in the cell and
    # overall) wins, the earlier one on a tie
    for g in by_order:
        if gid_cells[g] != cell:
            cell = gid_cells[g]
            c0 = c1 = c2 = n_cell = 0
        size = sizes[g]
        nc, nt = n_cell + size, n_total + size
        d0 = inf if r0 <= 0 else (r0 * nc - c0) + (r0 * nt - t0)
        d1 = inf if r1 <= 0 else (r1 * nc - c1) + (r1 * nt - t1)
        d2 = inf if r2 <= 0 else (r2 * nc - c2) + (r2 * nt - t2)
        if d1 > d0 and d1 >= d2:
            side[gid_ids[g]] = 1
            c1 += size
            t1 += size
        elif d2 > d0 and d2 > d1:
            side[gid_ids[g]] = 2
            c2 += size
            t2 += size
        else:
            c0 += size
            t0 += size
        n_cell, n_total = nc, nt
    stats = {"groups": len(names), "multi_record_groups": sum(1 for n in sizes if n > 1),
             "largest_group": max(sizes, default=0)}
    return SplitResult(keys, side[row_root], row_root, uniq, stats)
