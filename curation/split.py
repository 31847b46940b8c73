"""Group-aware, stratified train/eval/test splits.

Records that are near duplicates of each other (MinHash clusters over the query), that share a
paraphrase group (`curation.group_by` input fields) or that share a source (the pairs built from one
plan) form one group, and a group lands on exactly one side. Within each label cell, groups are taken in
the order of a hash of their id and each goes to the split furthest below its share (in the cell and
overall), so the split is deterministic, close to the ratios even for small cells, and stable when
unrelated records are added. The checks after the split are `validators.leakage.across_splits`.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence


SPLITS = ("train", "eval", "test")


@dataclass
class SplitResult:
    assignment: dict[str, str]  # key -> split
    groups: dict[str, str]  # key -> group id
    stats: dict


def _components(keys: Sequence[str], links: Iterable[tuple[str, str]]) -> list[str]:
    """The root key of each row: connected components of the links over the keys, each named by its smallest key
    (what `validators.dedup.UnionFind` gives), computed over integer ids (Arrow and scipy, no per-key Python)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    enc = pa.array(keys, pa.string()).dictionary_encode()
    uniq = enc.dictionary
    row_id = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    n = len(uniq)
    # rank of each distinct key in key order (Arrow sorts strings by UTF-8 bytes: code point order, as Python does)
    by_key = pc.sort_indices(uniq).to_numpy()
    rank = np.empty(n, dtype=np.int64)
    rank[by_key] = np.arange(n)
    pairs = list(links)
    if pairs:
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        ends = [pc.index_in(pa.array([p[e] for p in pairs], pa.string()), value_set=uniq).to_numpy(
            zero_copy_only=False) for e in (0, 1)]
        if any(np.isnan(x.astype(float)).any() for x in ends):
            raise KeyError("a link names a key that is not split")
        a, b = (x.astype(np.int64) for x in ends)
        graph = coo_matrix((np.ones(len(a), dtype=np.int8), (a, b)), shape=(n, n))
        _, label = connected_components(graph, directed=False)
        smallest = np.full(label.max() + 1, n, dtype=np.int64)
        np.minimum.at(smallest, label, rank)
        root = by_key[smallest[label]]  # the distinct key of the smallest rank in each one's component
    else:
        root = np.arange(n)
    return uniq.take(pa.array(root[row_id])).to_pylist()


def assign_splits(keys: Sequence[str], cells: Sequence[str], links: Iterable[tuple[str, str]],
                  ratios: dict[str, float]) -> SplitResult:
    roots = _components(keys, links)
    members: dict[str, list[int]] = defaultdict(list)
    for i, root in enumerate(roots):
        members[root].append(i)
    by_cell: dict[str, list[str]] = defaultdict(list)
    for gid, idx in members.items():
        by_cell[cells[idx[0] if len(idx) == 1 else min(idx, key=lambda i: keys[i])]].append(gid)
    inf = float("-inf")
    r0, r1, r2 = (ratios.get(s, 0.0) for s in SPLITS)
    t0 = t1 = t2 = 0
    side_of: dict[str, str] = {}
    n_total = 0
    # the split furthest below its share (in the cell and overall) wins, the earlier one on a tie
    for cell in sorted(by_cell):
        c0 = c1 = c2 = 0
        n_cell = 0
        for gid in sorted(by_cell[cell], key=lambda g: hashlib.sha256(g.encode()).hexdigest()):
            size = len(members[gid])
            nc, nt = n_cell + size, n_total + size
            d0 = inf if r0 <= 0 else (r0 * nc - c0) + (r0 * nt - t0)
            d1 = inf if r1 <= 0 else (r1 * nc - c1) + (r1 * nt - t1)
            d2 = inf if r2 <= 0 else (r2 * nc - c2) + (r2 * nt - t2)
            if d1 > d0 and d1 >= d2:
                side_of[gid] = SPLITS[1]
                c1 += size
                t1 += size
            elif d2 > d0 and d2 > d1:
                side_of[gid] = SPLITS[2]
                c2 += size
                t2 += size
            else:
                side_of[gid] = SPLITS[0]
                c0 += size
                t0 += size
            n_cell, n_total = nc, nt
    assignment = {k: side_of[r] for k, r in zip(keys, roots)}
    groups = dict(zip(keys, roots))
    multi = sum(1 for idx in members.values() if len(idx) > 1)
    return SplitResult(assignment, groups, {"groups": len(members), "multi_record_groups": multi,
                                            "largest_group": max((len(v) for v in members.values()), default=0)})
