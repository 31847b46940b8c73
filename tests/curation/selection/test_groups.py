"""Near-duplicate clusters as connected components over integer ids give what the UnionFind walk gave."""

from __future__ import annotations

import random

from mashbill.curation.selection.groups import near_duplicate_clusters, normalized
from mashbill.validators.data.dedup import near_pairs
from tests.curation.selection.union_find import UnionFind


def _union_find_clusters(texts, threshold=0.8):
    """The clusters as computed before issue 29 (a UnionFind over string keys)."""
    norms = normalized(texts)
    keys = [str(i) for i in range(len(texts))]
    uf = UnionFind(keys)
    first: dict[str, int] = {}
    for i, n in enumerate(norms):
        j = first.setdefault(n, i)
        if j != i:
            uf.union(keys[j], keys[i])
    uniq = sorted(first.values())
    if len(uniq) >= 2:
        pairs, _ = near_pairs([norms[i] for i in uniq], threshold)
        for a, b in pairs.tolist():
            uf.union(keys[uniq[a]], keys[uniq[b]])
    roots: dict[str, int] = {}
    return [roots.setdefault(uf.find(k), len(roots)) for k in keys]


def test_clusters_match_the_union_find_walk():
    rng = random.Random(3)
    base = ["Write a Tetris game in Python with pygame.", "What is the capital of Canada?", "Wie spät ist es?",
            "Explain the difference between weather and climate.", "", None, "What is 7-3?"]
    for trial in range(15):
        texts = []
        for _ in range(rng.randint(1, 40)):
            t = rng.choice(base)
            if t and rng.random() < 0.4:
                t = rng.choice(["Please ", "So, ", ""]) + t + rng.choice(["", " Thanks!", " now"])
            texts.append(t)
        got = near_duplicate_clusters(texts)
        assert got == _union_find_clusters(texts), (trial, texts)
    assert near_duplicate_clusters([]) == []
    pair = near_duplicate_clusters(["Write a Tetris game in Python with pygame.",
                                    "Please write a Tetris game in Python with pygame.", "Hello"])
    assert pair[0] == pair[1] != pair[2]
