"""Connected components in numpy (near-duplicate clusters, the split's groups) as the UnionFind gives them."""

from __future__ import annotations

import random

import numpy as np

from mashbill.validators.data.dedup import connected
from tests.curation.selection.union_find import UnionFind


def test_connected_labels_each_node_with_the_smallest_of_its_component():
    rng = random.Random(5)
    for trial in range(60):
        n = rng.randint(1, 60)
        edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, n + 5))]
        if trial % 5 == 0:  # a long chain: many hooking passes
            edges = [(i, i + 1) for i in range(n - 1)][::-1]
        uf = UnionFind(range(n))
        for a, b in edges:
            uf.union(a, b)
        a = np.array([e[0] for e in edges], dtype=np.int64)
        b = np.array([e[1] for e in edges], dtype=np.int64)
        assert connected(n, a, b).tolist() == [uf.find(i) for i in range(n)], (trial, edges)
