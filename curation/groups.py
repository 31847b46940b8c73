"""Near-duplicate clusters of queries, for group-aware splits.

An adapter over the validators' dedup (`mashbill.validators.dedup`): the same normalisation, the same
character-shingle MinHash signatures and LSH banding that produce DUP001/DUP002 at validation, with the
clusters (connected components of pairs at or above the threshold) returned instead of verdicts, so a
snapshot's split groups are the clusters validation saw. Exact duplicates after normalisation always
share a cluster.
"""

from __future__ import annotations

from typing import Sequence

from mashbill.validators.dedup import UnionFind


def normalized(texts: Sequence[str]) -> list[str]:
    """`validators.dedup.normalize` of each text, each distinct text normalised once."""
    from mashbill.validators.dedup import normalize

    seen: dict[str, str] = {}
    return [seen[t] if t in seen else seen.setdefault(t, normalize(t)) for t in (t or "" for t in texts)]


def near_duplicate_clusters(texts: Sequence[str], threshold: float = 0.8, *, shingle: int = 5, num_perm: int = 128,
                            bands: int = 16, norms: Sequence[str] | None = None) -> list[int]:
    """A cluster number per text; texts with Jaccard >= threshold (LSH candidates confirmed on the exact shingle
    sets, as in dedup) share one (transitively). `norms`: the texts already normalised (`normalized(texts)`),
    when the caller needs them too."""
    from mashbill.validators.dedup import near_pairs

    norms = list(norms) if norms is not None else normalized(texts)
    keys = [str(i) for i in range(len(texts))]
    uf = UnionFind(keys)
    first: dict[str, int] = {}
    for i, n in enumerate(norms):
        j = first.setdefault(n, i)
        if j != i:
            uf.union(keys[j], keys[i])
    uniq = sorted(first.values())
    if len(uniq) >= 2:
        pairs, _ = near_pairs([norms[i] for i in uniq], threshold, shingle=shingle, num_perm=num_perm, bands=bands)
        for a, b in pairs.tolist():
            uf.union(keys[uniq[a]], keys[uniq[b]])
    roots: dict[str, int] = {}
    return [roots.setdefault(uf.find(k), len(roots)) for k in keys]


def near_duplicate_pairs(keys: Sequence[str], texts: Sequence[str], threshold: float,
                         norms: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """Pairs of keys whose texts are near duplicates (the validators' MinHash clusters where available)."""
    clusters = near_duplicate_clusters(texts, threshold, norms=norms)
    first: dict[int, str] = {}
    pairs = []
    for key, c in zip(keys, clusters):
        if c in first:
            pairs.append((first[c], key))
        else:
            first[c] = key
    return pairs
