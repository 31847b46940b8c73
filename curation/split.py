"""Group-aware, stratified train/eval/test splits.

Records that are near duplicates of each other (MinHash clusters over the query), that share a
paraphrase group (`curation.group_by` input fields) or that share a source (the pairs built from one
plan) form one group, and a group lands on exactly one side. Within each label cell, groups are taken in
the order of a hash of their id and each goes to the split furthest below its share (in the cell and
overall), so the split is deterministic, close to the ratios even for small cells, and stable when
unrelated records are added. The checks after the split are `validators.leakage.across_splits`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

from mashbill.hashing import sha256_text
from mashbill.validators.dedup import UnionFind

SPLITS = ("train", "eval", "test")


@dataclass
class SplitResult:
    assignment: dict[str, str]  # key -> split
    groups: dict[str, str]  # key -> group id
    stats: dict


def assign_splits(keys: Sequence[str], cells: Sequence[str], links: Iterable[tuple[str, str]],
                  ratios: dict[str, float]) -> SplitResult:
    uf = UnionFind(keys)
    for a, b in links:
        uf.union(a, b)
    members: dict[str, list[int]] = defaultdict(list)
    roots = [uf.find(k) for k in keys]
    for i, root in enumerate(roots):
        members[root].append(i)
    by_cell: dict[str, list[str]] = defaultdict(list)
    for gid, idx in members.items():
        by_cell[cells[idx[0] if len(idx) == 1 else min(idx, key=lambda i: keys[i])]].append(gid)
    total = {s: 0 for s in SPLITS}
    assignment: dict[str, str] = {}
    n_total = 0
    # (split, its ratio, minus its position): the split furthest below its share wins, the earlier one on a tie
    order = [(s, ratios.get(s, 0.0), -j) for j, s in enumerate(SPLITS)]
    for cell in sorted(by_cell):
        in_cell = {s: 0 for s in SPLITS}
        n_cell = 0
        for gid in sorted(by_cell[cell], key=lambda g: sha256_text(g)):
            idx = members[gid]
            size = len(idx)
            split, best = None, None
            for s, r, neg in order:
                d = float("-inf") if r <= 0 else (r * (n_cell + size) - in_cell[s]) + (r * (n_total + size) - total[s])
                if best is None or (d, neg) > best:
                    split, best = s, (d, neg)
            for i in idx:
                assignment[keys[i]] = split
            in_cell[split] += size
            total[split] += size
            n_cell += size
            n_total += size
    groups = dict(zip(keys, roots))
    multi = sum(1 for idx in members.values() if len(idx) > 1)
    return SplitResult(assignment, groups, {"groups": len(members), "multi_record_groups": multi,
                                            "largest_group": max((len(v) for v in members.values()), default=0)})
