"""Group-aware, stratified train/eval/test splits.

Records that are near duplicates of each other (MinHash clusters over the query), that share a
paraphrase group (`curation.group_by` input fields) or that share a source (the pairs built from one
plan) form one group, and a group lands on exactly one side. Within each label cell, groups are taken in
the order of a hash of their id and each goes to the split furthest below its share (in the cell and
overall), so the split is deterministic, close to the ratios even for small cells, and stable when
unrelated records are added.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

SPLITS = ("train", "eval", "test")


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[^\w\s]", " ", text)
    return " ".join(text.split())


class UnionFind:
    def __init__(self, keys: Iterable[str]):
        self.parent = {k: k for k in keys}

    def find(self, k: str) -> str:
        root = k
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[k] != root:
            self.parent[k], k = root, self.parent[k]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # the smaller id becomes the root, so group ids do not depend on the order of unions
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra


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
    for i, k in enumerate(keys):
        members[uf.find(k)].append(i)
    by_cell: dict[str, list[str]] = defaultdict(list)
    for gid, idx in members.items():
        by_cell[cells[min(idx, key=lambda i: keys[i])]].append(gid)
    total = {s: 0 for s in SPLITS}
    assignment: dict[str, str] = {}
    n_total = 0
    for cell in sorted(by_cell):
        in_cell = {s: 0 for s in SPLITS}
        n_cell = 0
        for gid in sorted(by_cell[cell], key=lambda g: hashlib.sha256(g.encode()).hexdigest()):
            size = len(members[gid])

            def deficit(s: str) -> float:
                r = ratios.get(s, 0.0)
                if r <= 0:
                    return float("-inf")
                return (r * (n_cell + size) - in_cell[s]) + (r * (n_total + size) - total[s])

            split = max(SPLITS, key=lambda s: (deficit(s), -SPLITS.index(s)))
            for i in members[gid]:
                assignment[keys[i]] = split
            in_cell[split] += size
            total[split] += size
            n_cell += size
            n_total += size
    groups = {k: uf.find(k) for k in keys}
    multi = sum(1 for idx in members.values() if len(idx) > 1)
    return SplitResult(assignment, groups, {"groups": len(members), "multi_record_groups": multi,
                                            "largest_group": max((len(v) for v in members.values()), default=0)})


def leakage(assignment: dict[str, str], texts: dict[str, str], groups: dict[str, str]) -> dict:
    """Cross-split checks after the split: groups straddling splits and identical normalised queries."""
    side_of_group: dict[str, set] = defaultdict(set)
    side_of_text: dict[str, set] = defaultdict(set)
    for k, s in assignment.items():
        side_of_group[groups[k]].add(s)
        if texts.get(k):
            side_of_text[normalise(texts[k])].add(s)
    return {"groups_across_splits": sum(1 for v in side_of_group.values() if len(v) > 1),
            "identical_queries_across_splits": sum(1 for v in side_of_text.values() if len(v) > 1)}
