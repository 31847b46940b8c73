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


def _components(keys: Sequence[str], links: Iterable[tuple[str, str]]):
    """(root key per row, row indices per root): the connected components of the links over the keys, each named
    by its smallest key (what `validators.dedup.UnionFind` gives), computed over integer ids."""
    import numpy as np

    uniq = sorted(set(keys))
    rank = {k: i for i, k in enumerate(uniq)}
    row_rank = np.fromiter((rank[k] for k in keys), dtype=np.int64, count=len(keys))
    edges = np.array([(rank[a], rank[b]) for a, b in links], dtype=np.int64).reshape(-1, 2)
    n = len(uniq)
    if len(edges):
        from scipy.sparse import coo_matrix
        from scipy.sparse.csgraph import connected_components

        graph = coo_matrix((np.ones(len(edges), dtype=np.int8), (edges[:, 0], edges[:, 1])), shape=(n, n))
        _, label = connected_components(graph, directed=False)
        smallest = np.full(label.max() + 1, n, dtype=np.int64)
        np.minimum.at(smallest, label, np.arange(n))  # ranks follow key order: the smallest rank is the smallest key
        root_rank = smallest[label]
    else:
        root_rank = np.arange(n)
    roots = [uniq[r] for r in root_rank[row_rank].tolist()]
    return roots


def assign_splits(keys: Sequence[str], cells: Sequence[str], links: Iterable[tuple[str, str]],
                  ratios: dict[str, float]) -> SplitResult:
    roots = _components(keys, links)
    members: dict[str, list[int]] = defaultdict(list)
    for i, root in enumerate(roots):
        members[root].append(i)
    by_cell: dict[str, list[str]] = defaultdict(list)
    for gid, idx in members.items():
        by_cell[cells[idx[0] if len(idx) == 1 else min(idx, key=lambda i: keys[i])]].append(gid)
    ratio = [ratios.get(s, 0.0) for s in SPLITS]
    total = [0] * len(SPLITS)
    side_of: dict[str, str] = {}
    n_total = 0
    # the split furthest below its share (in the cell and overall) wins, the earlier one on a tie
    for cell in sorted(by_cell):
        in_cell = [0] * len(SPLITS)
        n_cell = 0
        for gid in sorted(by_cell[cell], key=lambda g: hashlib.sha256(g.encode()).hexdigest()):
            size = len(members[gid])
            j, best = 0, None
            for s, r in enumerate(ratio):
                d = float("-inf") if r <= 0 else (r * (n_cell + size) - in_cell[s]) + (r * (n_total + size) - total[s])
                if best is None or d > best:
                    j, best = s, d
            side_of[gid] = SPLITS[j]
            in_cell[j] += size
            total[j] += size
            n_cell += size
            n_total += size
    assignment = {k: side_of[r] for k, r in zip(keys, roots)}
    groups = dict(zip(keys, roots))
    multi = sum(1 for idx in members.values() if len(idx) > 1)
    return SplitResult(assignment, groups, {"groups": len(members), "multi_record_groups": multi,
                                            "largest_group": max((len(v) for v in members.values()), default=0)})
