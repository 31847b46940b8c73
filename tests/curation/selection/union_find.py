"""A union-find over hashable, ordered keys: the reference the numpy components (split groups, near-duplicate
clusters) are tested against."""


class UnionFind:
    """The reference: disjoint sets over hashable, ordered keys, the smallest key of a set its root (what the
    product's numpy components must give)."""

    def __init__(self, keys):
        self.parent = {k: k for k in keys}

    def find(self, k):
        root = k
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[k] != root:
            self.parent[k], k = root, self.parent[k]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            if rb < ra:
                ra, rb = rb, ra
            self.parent[rb] = ra
