"""Near-duplicate clusters of queries, for group-aware splits.

An adapter over the validators' dedup (`mashbill.validators.data.dedup`): the same normalisation, the same
character-shingle MinHash signatures and LSH banding that produce DUP001/DUP002 at validation, with the
clusters (connected components of pairs at or above the threshold) returned instead of verdicts. A freeze
reads the clusters validation kept where it can (`snapshot_split`), so that its split groups are the clusters
validation saw, and finds them here where it cannot. Exact duplicates after normalisation always share a cluster.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Sequence



def normalized(texts: Sequence[str]) -> list[str]:
    """`validators.data.dedup.normalize` of each text, each distinct text normalised once."""
    from mashbill.validators.data.dedup import normalize

    seen: dict[str, str] = {}
    return [seen[t] if t in seen else seen.setdefault(t, normalize(t)) for t in (t or "" for t in texts)]


# the ASCII bytes that are not letters or digits; a run of characters that are not (`\w` is str.isalnum() or "_")
_ASCII_NOT_ALNUM = bytes(c for c in range(128) if not chr(c).isalnum())
_NOT_ALNUM = re.compile(r"[\W_]+")


def _letters_and_digits(text: str) -> str:
    """The letters and digits of `normalize(text)`, in order: texts equal after normalisation have equal ones.
    Normalising folds a text (NFKC, case) and then only replaces or keeps what lies between its letters and digits,
    so these are the folded text's, found without the normalisation's regular expressions (for ASCII, whose folding
    is lower-casing, without decoding it either)."""
    if text.isascii():
        return text.lower().encode().translate(None, _ASCII_NOT_ALNUM).decode()
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", text).casefold())


def normalized_classes(texts: Sequence[str | None]):
    """A class number per text (numpy int64), equal exactly when `normalized` gives equal texts: for the check of
    which texts are identical once normalised. Only the texts whose letters and digits another text shares are
    normalised: a text whose letters and digits no other has cannot equal another after normalisation (issue 29:
    4 of the 1M freeze's 27 s normalised every query; finding the letters with Arrow's regular expressions instead
    took six times as long)."""
    import numpy as np

    letters = [_letters_and_digits(t or "") for t in texts]
    counts = Counter(letters)
    at = [i for i, k in enumerate(letters) if counts[k] > 1]
    out = np.arange(len(letters), dtype=np.int64) + len(letters)  # a class of its own: a number no shared text gets
    if at:
        number: dict[str, int] = {}
        out[at] = [number.setdefault(norm, len(number)) for norm in normalized([texts[i] for i in at])]
    return out


def near_duplicate_clusters(texts: Sequence[str], threshold: float = 0.8, *,
                            norms: Sequence[str] | None = None) -> list[int]:
    """A cluster number per text (numbered in order of first appearance); texts with Jaccard >= threshold (LSH
    candidates confirmed on the exact shingle sets, as in dedup, with dedup's default shingles and bands) share one
    (transitively). `norms`: the texts already normalised (`normalized(texts)`), when the caller needs them too.
    Exact duplicates after normalisation are one node; clusters are connected components over integer ids."""
    import numpy as np
    import pyarrow as pa

    from mashbill.validators.data.dedup import near_components

    norms = list(norms) if norms is not None else normalized(texts)
    if not norms:
        return []
    enc = pa.array(norms, pa.string()).dictionary_encode()  # ids in order of first appearance
    ids = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    distinct = enc.dictionary.to_pylist()  # the first occurrence of each normalised text, in input order
    m = len(distinct)
    label = near_components(distinct, threshold)  # the defaults, as groups_profile(threshold) describes
    per_text = label[ids]
    _, first = np.unique(per_text, return_index=True)
    number = np.empty(per_text.max() + 1, dtype=np.int64)
    number[per_text[np.sort(first)]] = np.arange(len(first))
    return number[per_text].tolist()


def near_duplicate_pairs(keys: Sequence[str], texts: Sequence[str], threshold: float,
                         norms: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """Pairs of keys whose texts are near duplicates (the validators' MinHash clusters where available)."""
    return cluster_links(keys, near_duplicate_clusters(texts, threshold, norms=norms))


def cluster_links(keys: Sequence[str], clusters: Sequence) -> list[tuple[str, str]]:
    """(the first key of its cluster, key) for every key after the first of a cluster: links that join each cluster
    (`cluster_joins` as keys)."""
    first, row = cluster_joins(clusters)
    return [(keys[a], keys[b]) for a, b in zip(first.tolist(), row.tolist())]


def cluster_joins(clusters):
    """Two numpy arrays (the first row of its cluster, row) for every row after the first of a cluster, in row
    order: row numbers that join each cluster."""
    import numpy as np

    c = np.asarray(clusters)
    if not len(c):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _, first, inverse = np.unique(c, return_index=True, return_inverse=True)
    head = first[inverse.reshape(-1)]
    row = np.arange(len(c), dtype=np.int64)
    joined = head != row
    return head[joined].astype(np.int64), row[joined]
