"""Duplicates: exact after normalisation, and near duplicates as MinHash/LSH clusters with a keep-one policy.

Normalisation: NFKC, case-folded, everything that is not a letter, digit or an operator between two operands
becomes a space, spaces collapsed.
Near duplicates are found on character 5-gram shingles (queries are short; word shingles would leave a
five-word query with one shingle). Signatures use one-permutation hashing with rotation densification
(Shrivastava and Li, 2014): one 64-bit hash per shingle, split into ``num_perm`` bins, the minimum per bin,
empty bins borrowing from the next non-empty one. This is computed for whole batches in numpy, roughly two
orders of magnitude faster than hashing every shingle once per permutation; the Jaccard estimate is the share
of equal bins. Candidate pairs come from LSH banding (``bands`` bands of ``num_perm / bands`` rows; 16 x 8 by
default, which finds a pair at Jaccard 0.8 with probability 0.95 and at 0.85 with 0.99); a candidate joins a
cluster when the exact Jaccard similarity of the two shingle sets reaches the threshold (the estimate alone was
wrong on half its pairs of short queries; see ``near_pairs``). The first record of a cluster
(in input order) is kept; the others get ``DUP002`` naming the kept one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mashbill.factory.records import Verdict
from mashbill.specs.holdout import normalize
from mashbill.validators.plans.rulebase import DedupConfig

# The clustering's defaults are a rule set's `dedup` section's (DedupConfig), so that a freeze and a validation that
# both take the defaults cluster the same way; the estimate's margin is not a rule set setting.
_RULE_SET_DEFAULTS = DedupConfig()
SHINGLE, NUM_PERM, BANDS = _RULE_SET_DEFAULTS.shingle, _RULE_SET_DEFAULTS.num_perm, _RULE_SET_DEFAULTS.bands
MARGIN = 0.15

_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_C = np.uint64(1 << 32)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser, vectorised (uint64 arithmetic wraps)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _concatenated(texts: list[str], shingle: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The texts' code points end to end (uint32; a text shorter than one shingle padded with spaces), the text each
    shingle belongs to, and where each shingle starts: a text of length L has L - shingle + 1, none across two."""
    docs = [t if len(t) >= shingle else t.ljust(shingle) for t in texts]
    lens = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
    codes = np.frombuffer("".join(docs).encode("utf-32-le"), dtype=np.uint32)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    counts = lens - shingle + 1  # shingles per doc (>= 1)
    doc_of = np.repeat(np.arange(len(docs)), counts)
    pos = (np.arange(doc_of.size) - np.repeat(np.cumsum(counts) - counts, counts)) + np.repeat(starts, counts)
    return codes, doc_of, pos


def signatures(norm_texts: list[str], *, shingle: int = SHINGLE, num_perm: int = NUM_PERM,
               chunk: int = 20000) -> np.ndarray:
    """One-permutation MinHash signatures (n x num_perm, uint64) of already normalised texts."""
    if num_perm & (num_perm - 1):
        raise ValueError("num_perm must be a power of two")
    bits = num_perm.bit_length() - 1
    out = np.empty((len(norm_texts), num_perm), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c0 in range(0, len(norm_texts), chunk):
            docs = norm_texts[c0:c0 + chunk]
            codes, doc_of, pos = _concatenated(docs, shingle)
            codes = codes.astype(np.uint64)
            n_pos = codes.size - shingle + 1
            h = np.zeros(n_pos, dtype=np.uint64)
            base = np.uint64(1_000_003)
            for j in range(shingle):
                h = h * base + codes[j:j + n_pos]
            z = _mix(h[pos])
            bins = (z >> np.uint64(64 - bits)).astype(np.int64)
            vals = z & np.uint64(0xFFFFFFFF)
            sig = np.full(len(docs) * num_perm, _EMPTY, dtype=np.uint64)
            np.minimum.at(sig, doc_of * num_perm + bins, vals)
            sig = sig.reshape(len(docs), num_perm)
            empty = sig == _EMPTY
            if empty.any():
                # rotation densification: an empty bin takes the nearest non-empty bin to its right (circularly),
                # offset by the distance so that borrowed values only match values borrowed from as far
                cols = np.arange(num_perm)
                big = 2 * num_perm
                pos = np.where(empty, big, cols)
                nxt = np.minimum.accumulate(pos[:, ::-1], axis=1)[:, ::-1]
                first = nxt[:, :1]
                nxt = np.where(nxt == big, first + num_perm, nxt)
                src = np.take_along_axis(sig, nxt % num_perm, axis=1)
                dist = (nxt - cols).astype(np.uint64)
                sig = np.where(empty, src + dist * _C, sig)
            out[c0:c0 + len(docs)] = sig
    return out


def candidate_pairs(sig: np.ndarray, bands: int) -> np.ndarray:
    """Pairs (i, j), i < j, sharing at least one LSH band bucket (k x 2 int64, unique)."""
    n, p = sig.shape
    if n < 2:
        return np.empty((0, 2), dtype=np.int64)
    r = p // bands
    pairs = []
    with np.errstate(over="ignore"):
        for b in range(bands):
            block = sig[:, b * r:(b + 1) * r]
            key = np.full(n, np.uint64(b + 1), dtype=np.uint64)
            for j in range(r):
                key = _mix(key ^ block[:, j])
            order = np.argsort(key, kind="stable")
            k = key[order]
            same = np.concatenate(([False], k[1:] == k[:-1]))
            if not same.any():
                continue
            # each member of a bucket pairs with the bucket's first member and with its predecessor
            idx = np.arange(n)
            run_start = np.maximum.accumulate(np.where(~same, idx, 0))
            members = np.nonzero(same)[0]
            a = order[run_start[members]]
            c = order[members]
            prev = order[members - 1]
            for x, y in ((a, c), (prev, c)):
                lo, hi = np.minimum(x, y), np.maximum(x, y)
                pairs.append(np.stack([lo, hi], axis=1))
    if not pairs:
        return np.empty((0, 2), dtype=np.int64)
    allp = np.concatenate(pairs)
    allp = allp[allp[:, 0] != allp[:, 1]]
    code = np.unique(allp[:, 0] * np.int64(n) + allp[:, 1])
    return np.stack([code // n, code % n], axis=1)


def estimate(sig: np.ndarray, pairs: np.ndarray, chunk: int = 20_000) -> np.ndarray:
    """The share of equal bins per pair (a chunk of pairs at a time: 200,000 pairs' rows were 400 MB at once)."""
    out = np.empty(len(pairs), dtype=np.float64)
    for c in range(0, len(pairs), chunk):
        pc = pairs[c:c + chunk]
        out[c:c + chunk] = (sig[pc[:, 0]] == sig[pc[:, 1]]).mean(axis=1)
    return out


def shingles(norm_text: str, shingle: int = SHINGLE) -> set[str]:
    """The character shingle set the signatures hash (a text shorter than one shingle is padded with spaces)."""
    t = norm_text if len(norm_text) >= shingle else norm_text.ljust(shingle)
    return {t[i:i + shingle] for i in range(len(t) - shingle + 1)}


_SMALL = 4096  # a shingle of code points below this packs exactly into 60 bits (12 a character)


def _shingle_keys(norm_text: str, shingle: int) -> np.ndarray | set[str]:
    """A text's shingle set, compact: the sorted distinct shingles packed exactly into uint64 (12 bits a code
    point) when every character is below U+1000, else the set of shingle strings (``shingles``)."""
    t = norm_text if len(norm_text) >= shingle else norm_text.ljust(shingle)
    codes = np.frombuffer(t.encode("utf-32-le"), dtype=np.uint32)
    if shingle * 12 > 64 or codes.max() >= _SMALL:
        return shingles(norm_text, shingle)
    codes = codes.astype(np.uint64)
    n = codes.size - shingle + 1
    key = np.zeros(n, dtype=np.uint64)
    for j in range(shingle):
        key = (key << np.uint64(12)) | codes[j:j + n]
    key.sort()  # sorted and distinct, as np.unique gives it at half its cost on arrays this small
    return key[np.concatenate(([True], key[1:] != key[:-1]))]


def _as_set(x: np.ndarray | set[str], norm_text: str, shingle: int) -> set[str]:
    return x if isinstance(x, set) else shingles(norm_text, shingle)


class _ShingleSets:
    """Each text's shingle set built on first need, packed into a sorted uint64 array where its characters allow
    (about a tenth of a set of strings' memory), and dropped after the last pair that needs it (`last`: pair index
    of each text's last use): a 100K-record rehearsal's 44,000 clustered queries held ~350 MB of string sets at
    once before."""

    def __init__(self, norm_texts: list[str], listed: list, shingle: int):
        self.texts, self.shingle = norm_texts, shingle
        self.last: dict[int, int] = {}
        for k, (a, b) in enumerate(listed):
            self.last[a] = self.last[b] = k
        self.cache: dict[int, np.ndarray | set[str]] = {}

    def _get(self, i: int):
        x = self.cache.get(i)
        if x is None:
            x = self.cache[i] = _shingle_keys(self.texts[i], self.shingle)
        return x

    def similarity(self, a: int, b: int) -> float:
        x, y = self._get(a), self._get(b)
        if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
            inter = np.intersect1d(x, y, assume_unique=True).size
            union = x.size + y.size - inter
        else:
            xs, ys = _as_set(x, self.texts[a], self.shingle), _as_set(y, self.texts[b], self.shingle)
            inter = len(xs & ys)
            union = len(xs) + len(ys) - inter
        return inter / union

    def done(self, k: int, a: int, b: int) -> None:
        """Pair k was the last to need a or b: drop their sets."""
        if self.last[a] == k:
            self.cache.pop(a, None)
        if self.last[b] == k:
            self.cache.pop(b, None)


def jaccard(norm_texts: list[str], pairs: np.ndarray, shingle: int = SHINGLE) -> np.ndarray:
    """Exact Jaccard similarity of the shingle sets of each pair (the confirmation of an LSH candidate)."""
    listed = pairs.tolist()
    sets = _ShingleSets(norm_texts, listed, shingle)
    out = np.empty(len(listed), dtype=np.float64)
    for k, (a, b) in enumerate(listed):
        out[k] = sets.similarity(a, b)
        sets.done(k, a, b)
    return out


def _packed_rows(texts: list[str], shingle: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Every shingle of each text packed as `_shingle_keys` packs it (12 bits a code point, a short text padded with
    spaces), for all texts at once: (keys, the row each key belongs to); None when a character is U+1000 or above."""
    codes, row, pos = _concatenated(texts, shingle)
    if shingle * 12 > 64 or (codes.size and codes.max() >= _SMALL):
        return None
    codes = codes.astype(np.uint64)
    n_pos = codes.size - shingle + 1
    key = np.zeros(n_pos, dtype=np.uint64)
    for j in range(shingle):
        key = (key << np.uint64(12)) | codes[j:j + n_pos]
    return key[pos], row


def keeper_jaccards(norm_texts: list[str], clusters: list[list[int]], shingle: int = SHINGLE) -> np.ndarray:
    """The exact Jaccard of each cluster member's shingle set with its keeper's (the cluster's smallest index), for
    the members in cluster order, keepers left out: `jaccard` of those pairs, a cluster at a time in numpy (the
    keeper's set is built once, and the members' sets in one pass), with `jaccard` itself where a text holds a
    character the packed keys cannot."""
    out: list[np.ndarray] = []
    for members in clusters:
        keeper = min(members)
        others = [m for m in members if m != keeper]
        packed = _packed_rows([norm_texts[keeper]] + [norm_texts[m] for m in others], shingle)
        if packed is None:
            out.append(jaccard(norm_texts, np.array([(keeper, m) for m in others], dtype=np.int64).reshape(-1, 2),
                               shingle))
            continue
        keys, row = packed
        dense, inv = np.unique(keys, return_inverse=True)
        code = row * np.int64(len(dense)) + inv  # (row, shingle id); sorted and distinct: each row's shingle set
        code.sort()
        code = code[np.concatenate(([True], code[1:] != code[:-1]))]
        row_of, shingle_of = code // len(dense), code % len(dense)
        size = np.bincount(row_of, minlength=len(others) + 1)
        in_keeper = np.zeros(len(dense), dtype=bool)
        in_keeper[shingle_of[row_of == 0]] = True
        inter = np.bincount(row_of, weights=in_keeper[shingle_of], minlength=len(others) + 1)
        inter = inter.astype(np.int64)
        out.append(inter[1:] / (size[0] + size[1:] - inter[1:]))
    return np.concatenate(out) if out else np.empty(0, dtype=np.float64)


def _candidates(norm_texts: list[str], threshold: float, shingle: int, num_perm: int, bands: int, keep,
                margin: float) -> tuple[np.ndarray, np.ndarray]:
    """LSH candidate pairs whose one-permutation estimate is at least threshold - margin, and those estimates."""
    sig = signatures(norm_texts, shingle=shingle, num_perm=num_perm)
    pairs = candidate_pairs(sig, bands)
    if keep is not None and len(pairs):
        pairs = pairs[keep(pairs)]
    if not len(pairs):
        return pairs, np.empty(0, dtype=np.float64)
    est = estimate(sig, pairs)
    ok = est >= threshold - margin
    return pairs[ok], est[ok]


def near_pairs(norm_texts: list[str], threshold: float, *, shingle: int = SHINGLE, num_perm: int = NUM_PERM,
               bands: int = BANDS, keep=None, margin: float = MARGIN) -> tuple[np.ndarray, np.ndarray]:
    """Near-duplicate pairs (i < j) of normalised texts and their exact Jaccard, all >= threshold.

    LSH only proposes candidates; each is confirmed on the exact shingle sets, because the one-permutation
    estimate is too coarse to decide on its own: on the 28,306 queries of queries-dev 93 of the 192 pairs it put
    at >= 0.8 were below (short queries: "alarm"/"alarms" 0.96 for an exact 0.50, "fix an alarm"/"set an
    alarm" 0.82 for 0.45), and it missed 31 pairs that are above. Candidates whose estimate is below
    ``threshold - margin`` are dropped before the exact check (on queries-dev the lowest estimate of a true
    pair was 0.68; at 0.65 the filter cuts the 54,766 candidates to 899, keeping the exact check near a tenth of
    the time; every pair the estimate alone accepted is still checked, so recall cannot fall below it). ``keep`` (a boolean function of the pair array) narrows the candidates too (leakage keeps only
    record-holdout pairs)."""
    empty = np.empty((0, 2), dtype=np.int64), np.empty(0, dtype=np.float64)
    if len(norm_texts) < 2:
        return empty
    pairs, _ = _candidates(norm_texts, threshold, shingle, num_perm, bands, keep, margin)
    if not len(pairs):
        return empty
    sims = jaccard(norm_texts, pairs, shingle)
    ok = sims >= threshold
    return pairs[ok], sims[ok]


def near_components(norm_texts: list[str], threshold: float, *, shingle: int = SHINGLE, num_perm: int = NUM_PERM,
                    bands: int = BANDS, margin: float = MARGIN) -> np.ndarray:
    """A component per text (the smallest text index in it): the connected components of `near_pairs`' pairs.
    Only what can change a component is checked exactly: candidates are taken by falling estimate and a pair
    whose texts are already joined is skipped (a cluster of k templated queries proposes up to k^2/2 candidates
    and needs k - 1 of them; a 100K-record replay store's freeze checked 567,197 pairs exactly, issue 29)."""
    n = len(norm_texts)
    parent = list(range(n))
    if n >= 2:
        pairs, est = _candidates(norm_texts, threshold, shingle, num_perm, bands, None, margin)
        listed = pairs[np.argsort(-est, kind="stable")].tolist()
        sets = _ShingleSets(norm_texts, listed, shingle)

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for k, (a, b) in enumerate(listed):
            ra, rb = find(a), find(b)
            if ra != rb and sets.similarity(a, b) >= threshold:
                parent[max(ra, rb)] = min(ra, rb)
            sets.done(k, a, b)
        for i in range(n):
            parent[i] = find(i)
    return np.array(parent, dtype=np.int64)


def groups_profile(threshold: float, *, shingle: int = SHINGLE, num_perm: int = NUM_PERM, bands: int = BANDS,
                   margin: float = MARGIN) -> str:
    """What a set of near-duplicate groups depends on besides the texts (the normalisation, shingles, signatures,
    bands, the estimate's margin and the threshold), as one string: a freeze reads validation's groups only where
    its own would be made the same way. A change to `normalize`, the signatures or `near_components` that can move
    a text to another cluster must bump its version here, or a freeze would read clusters made the old way."""
    return (f"query normalize/1 shingle={shingle} minhash=oph-rotation/{num_perm} bands={bands} "
            f"margin={margin!r} jaccard>={threshold!r} near_components/1")


@dataclass
class DedupResult:
    verdicts: dict[str, list[Verdict]] = field(default_factory=dict)
    groups: dict[str, str] = field(default_factory=dict)  # each key -> the key its cluster keeps (itself if alone)
    exact_groups: int = 0
    exact_dropped: int = 0
    near_clusters: int = 0
    near_dropped: int = 0
    largest_cluster: int = 0

    def summary(self) -> dict:
        return {"exact_groups": self.exact_groups, "exact_duplicates": self.exact_dropped,
                "near_clusters": self.near_clusters, "near_duplicates": self.near_dropped,
                "largest_cluster": self.largest_cluster}


def dedup(keys: list[str], texts: list[str], cfg) -> DedupResult:
    """Exact and near duplicates among texts (keep the first of each group/cluster)."""
    res = DedupResult()
    norms = [normalize(t) for t in texts]
    first: dict[str, int] = {}
    exact_of: dict[int, int] = {}
    for i, t in enumerate(norms):
        j = first.setdefault(t, i)
        if j != i:
            exact_of[i] = j
    res.exact_dropped = len(exact_of)
    res.exact_groups = len({j for j in exact_of.values()})
    for i, j in exact_of.items():
        res.verdicts.setdefault(keys[i], []).append(
            Verdict(cfg.exact_code, cfg.exact_severity, f"exact duplicate (after normalisation) of {keys[j]}",
                    "validate"))
    kept = [i for i in range(len(norms)) if i not in exact_of]
    if len(kept) < 2:
        res.groups = {k: keys[exact_of.get(i, i)] for i, k in enumerate(keys)}
        return res
    kept_norms = [norms[i] for i in kept]
    # the clusters are the components of the near pairs (near_components checks only the pairs that can join two)
    labels = near_components(kept_norms, cfg.threshold, shingle=cfg.shingle, num_perm=cfg.num_perm,
                             bands=cfg.bands).tolist()
    # a component's label is its smallest member, the cluster's keeper; an exact duplicate joins its original's
    keeper_of = {kept[local]: keys[kept[lab]] for local, lab in enumerate(labels)}
    res.groups = {k: keeper_of[exact_of.get(i, i)] for i, k in enumerate(keys)}
    clusters: dict[int, list[int]] = {}
    for local, lab in enumerate(labels):
        clusters.setdefault(lab, []).append(local)
    clusters = {lab: members for lab, members in clusters.items() if len(members) >= 2}
    # each member reports its own Jaccard with the cluster's keeper (its first text), linked directly or not
    sims = iter(keeper_jaccards(kept_norms, list(clusters.values()), cfg.shingle).tolist())
    for members in clusters.values():
        res.near_clusters += 1
        res.largest_cluster = max(res.largest_cluster, len(members))
        keeper = min(members)
        for m in members:
            if m == keeper:
                continue
            res.near_dropped += 1
            res.verdicts.setdefault(keys[kept[m]], []).append(
                Verdict(cfg.near_code, cfg.near_severity,
                        f"near duplicate (Jaccard {next(sims):.2f}) in a cluster of {len(members)}; "
                        f"kept {keys[kept[keeper]]}", "validate"))
    return res
