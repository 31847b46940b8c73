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
wrong on half its pairs of short queries; see ``near_pairs``). Exact checks run on many pairs at once, on shingles
packed into integers (``_PackedShingles``), and clusters are found in rounds that check only candidates that can
still join two (``near_components``). The first record of a cluster (in input order) is kept; the others get
``DUP002`` naming the kept one.
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


def _code_points(texts, shingle: int) -> tuple[np.ndarray, np.ndarray]:
    """The texts' code points end to end (uint32; a text shorter than one shingle padded with spaces) and each
    text's length as padded."""
    docs = [t if len(t) >= shingle else t.ljust(shingle) for t in texts]
    lens = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
    return np.frombuffer("".join(docs).encode("utf-32-le"), dtype=np.uint32), lens


def _concatenated(texts: list[str], shingle: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The texts' code points end to end (`_code_points`), the text each shingle belongs to, and where each shingle
    starts: a text of length L has L - shingle + 1, none across two."""
    codes, lens = _code_points(texts, shingle)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    counts = lens - shingle + 1  # shingles per doc (>= 1)
    doc_of = np.repeat(np.arange(len(lens)), counts)
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


def band_key(sig: np.ndarray, band: int, bands: int) -> np.ndarray:
    """Each row's bucket in one LSH band: the band's rows of the signature mixed into one uint64."""
    r = sig.shape[1] // bands
    key = np.full(sig.shape[0], np.uint64(band + 1), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(band * r, (band + 1) * r):
            key = _mix(key ^ sig[:, j])
    return key


def candidate_pairs(sig: np.ndarray, bands: int) -> np.ndarray:
    """Pairs (i, j), i < j, sharing at least one LSH band bucket (k x 2 int64, unique)."""
    n = sig.shape[0]
    if n < 2:
        return np.empty((0, 2), dtype=np.int64)
    pairs = []
    for b in range(bands):
        key = band_key(sig, b, bands)
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
    code = sorted_distinct(allp[:, 0] * np.int64(n) + allp[:, 1])
    return np.stack([code // n, code % n], axis=1)


def sorted_distinct(values: np.ndarray) -> np.ndarray:
    """np.unique's values, by a sort and a neighbour compare: numpy 2.3+ finds them with a hash table first, 13 s for
    the 11.7M pair codes of a 440,000-query store against 0.8 s this way (bench/RESULTS.md)."""
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if values.size else values


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


class _PackedShingles:
    """The distinct shingles of many texts at once, each packed exactly into one uint64: its characters as their ranks
    in the texts' alphabet (`bits` a character) in the low bits, the text's row above them; sorted, so each text is
    one sorted run. Texts with a character outside the alphabet (the most frequent 2^bits - 1 characters, as many as
    the row numbers leave room for) are not packed (`packed` is False for them). Built in numpy for all texts in one
    pass: the per-pair sets of `_ShingleSets` cost a numpy call or two per text and pair (issue 29)."""

    _CHUNK = 4_000_000  # code points a build step, shingles a comparison step (a few 8-byte arrays of this size)

    def __init__(self, norm_texts: list[str], rows: np.ndarray, shingle: int):
        self.rows, self.shingle = rows, shingle  # rows: the texts held (sorted), local row i is text rows[i]
        codes, lens = _code_points([norm_texts[i] for i in rows.tolist()], shingle)
        row_bits = max(16, (len(lens) - 1).bit_length())  # >= 16: a comparison step tags up to 65,535 pairs
        seen = np.zeros(0x110000, dtype=bool)
        seen[codes] = True
        present = np.flatnonzero(seen)
        bits = min((64 - row_bits) // shingle, present.size.bit_length())  # ranks 1..len(present)
        self.key_bits = bits * shingle
        rank = np.zeros(seen.size, dtype=np.uint64)
        ends = np.cumsum(lens)
        if present.size <= (1 << bits) - 1:
            rank[present] = np.arange(1, present.size + 1, dtype=np.uint64)
            self.packed = np.ones(len(lens), dtype=bool)
        else:  # the most frequent characters, ranked in code point order; texts with any other are not packed
            counts = np.bincount(codes, minlength=1)
            present = np.sort(present[np.argsort(-counts[present], kind="stable")[:(1 << bits) - 1]])
            rank[present] = np.arange(1, present.size + 1, dtype=np.uint64)
            self.packed = np.add.reduceat((rank[codes] == 0).astype(np.int64), ends - lens) == 0
        sizes = np.zeros(len(lens), dtype=np.int64)
        parts: list[np.ndarray] = []
        first = 0
        while first < len(lens):  # a step of whole texts, about _CHUNK code points
            last = max(first + 1, int(np.searchsorted(ends, ends[first] - lens[first] + self._CHUNK, side="right")))
            step = np.flatnonzero(self.packed[first:last]) + first
            if step.size:
                lo, hi = ends[first] - lens[first], ends[last - 1]
                parts.append(self._packed_step(rank[codes[lo:hi]], ends[step] - lens[step] - lo, lens[step], step,
                                               bits, sizes))
            first = last
        self.keys = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
        self.sizes = sizes
        self.starts = np.concatenate(([0], np.cumsum(sizes)))

    def _packed_step(self, ranks, starts, lens, rows, bits, sizes) -> np.ndarray:
        """The sorted, distinct packed shingles of some texts (all packable; `ranks`: the ranks of a stretch of text
        holding them, `starts`: where each begins in it); their counts go to `sizes`."""
        shingle, shift = self.shingle, np.uint64(bits)
        windows = ranks.size - shingle + 1
        key = ranks[:windows].copy()  # every window of the stretch; those across two texts are not taken
        for j in range(1, shingle):
            key <<= shift
            key |= ranks[j:j + windows]
        counts = lens - shingle + 1
        first = np.cumsum(counts) - counts
        key = key[np.repeat(starts - first, counts) + np.arange(counts.sum())]
        key |= np.repeat(rows.astype(np.uint64) << np.uint64(self.key_bits), counts)
        key.sort(kind="stable")  # rows come in order: runs the merge sort finds (4x a quicksort's speed here)
        distinct = np.concatenate(([True], key[1:] != key[:-1]))
        sizes[rows] = np.add.reduceat(distinct, first, dtype=np.int64)
        return key[distinct]

    def _run(self, local: np.ndarray, tag_shift: np.uint64) -> np.ndarray:
        """The packed shingles of these rows end to end, each under its position in `local` instead of its row."""
        n = self.sizes[local]
        out = np.repeat(np.arange(local.size, dtype=np.uint64) << tag_shift, n)
        at = np.repeat(self.starts[local] - (np.cumsum(n) - n), n) + np.arange(out.size)
        out |= self.keys[at] & np.uint64((1 << self.key_bits) - 1)
        return out

    def intersections(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """|shingles(a) & shingles(b)| of each pair of local rows (both packed): the two rows' runs, each pair under its
        own tag, merged by one sort; a shingle in both is two equal neighbours."""
        shift = np.uint64(self.key_bits)
        out = np.empty(a.size, dtype=np.int64)
        per_pair = np.cumsum(self.sizes[a] + self.sizes[b])
        most = (1 << (64 - self.key_bits)) - 1
        first = 0
        while first < a.size:
            done = per_pair[first - 1] if first else 0
            last = min(first + most, max(first + 1, int(np.searchsorted(per_pair, done + self._CHUNK, side="right"))))
            both = np.concatenate((self._run(a[first:last], shift), self._run(b[first:last], shift)))
            both.sort(kind="stable")  # two sorted runs: a merge
            twice = both[1:][both[1:] == both[:-1]]
            out[first:last] = np.bincount((twice >> shift).astype(np.int64), minlength=last - first)
            first = last
        return out


def jaccard(norm_texts: list[str], pairs: np.ndarray, shingle: int = SHINGLE) -> np.ndarray:
    """Exact Jaccard similarity of the shingle sets of each pair (the confirmation of an LSH candidate): all pairs at
    once on packed shingles (`_PackedShingles`), a pair with a text they cannot pack on its sets (`_ShingleSets`)."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if not len(pairs):
        return np.empty(0, dtype=np.float64)
    packed = _PackedShingles(norm_texts, sorted_distinct(pairs.ravel()), shingle)
    return _similarities(norm_texts, packed, pairs[:, 0], pairs[:, 1])


def _similarities(norm_texts: list[str], packed: _PackedShingles, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`jaccard` of the pairs (a[i], b[i]) of texts whose shingles `packed` holds. Pairs with a text outside the
    alphabet go to `jaccard` again (their own alphabet may pack them) unless every pair did, and then to
    `_ShingleSets`."""
    la, lb = np.searchsorted(packed.rows, a), np.searchsorted(packed.rows, b)
    out = np.empty(a.size, dtype=np.float64)
    fast = packed.packed[la] & packed.packed[lb]
    if fast.any():
        fa, fb = la[fast], lb[fast]
        inter = packed.intersections(fa, fb)
        out[fast] = inter / (packed.sizes[fa] + packed.sizes[fb] - inter)
    slow = np.flatnonzero(~fast)
    if slow.size and fast.any():
        out[slow] = jaccard(norm_texts, np.stack([a[slow], b[slow]], axis=1), packed.shingle)
    elif slow.size:
        listed = np.stack([a, b], axis=1).tolist()
        sets = _ShingleSets(norm_texts, listed, packed.shingle)
        for k, (i, j) in enumerate(listed):
            out[k] = sets.similarity(i, j)
            sets.done(k, i, j)
    return out


def connected(n: int, a, b):
    """Connected components of an undirected graph on nodes 0..n-1 with edges (a[i], b[i]) (numpy integer arrays):
    each node's label is the smallest node of its component. Min-label hooking with pointer jumping, in numpy (no
    scipy: it is not a core dependency); a few passes for the small components splits and duplicates make."""
    label = np.arange(n, dtype=np.int64)
    if not len(a):
        return label
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    while True:
        low = np.minimum(label[a], label[b])
        new = label.copy()
        np.minimum.at(new, a, low)
        np.minimum.at(new, b, low)
        while True:  # every label is a node of the same component no larger than the node: jump to its label
            jumped = new[new]
            if np.array_equal(jumped, new):
                break
            new = jumped
        if np.array_equal(new, label):
            return label
        label = new


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
    Only what can change a component is checked exactly, in rounds over all candidates at once: in round r every
    component with candidates towards smaller components has its best 2^r (by estimate) checked (one at a time, a
    component whose best ones fail took 2,756 rounds on 439,521 queries), the pairs that hold join their components,
    and candidates within one component are dropped; when few are left, all are checked. A cluster of k templated
    queries proposes up to k^2/2 candidates and needs k - 1 of them (a 100K-record replay store's freeze checked
    567,197 pairs exactly, issue 29). The components do not depend on the order pairs are checked in: a pair is
    skipped only when its texts are already joined."""
    return _near_components(norm_texts, threshold, shingle, num_perm, bands, margin)[0]


def _near_components(norm_texts: list[str], threshold: float, shingle: int, num_perm: int, bands: int,
                     margin: float) -> tuple[np.ndarray, _PackedShingles | None]:
    """`near_components`, with the shingles it packed (None without candidates), for the keepers' Jaccards."""
    n = len(norm_texts)
    label = np.arange(n, dtype=np.int64)
    if n < 2:
        return label, None
    pairs, est = _candidates(norm_texts, threshold, shingle, num_perm, bands, None, margin)
    pairs = pairs[np.argsort(-est, kind="stable")]
    packed = _PackedShingles(norm_texts, sorted_distinct(pairs.ravel()), shingle) if len(pairs) else None
    a, b = pairs[:, 0], pairs[:, 1]
    rounds = 0
    while a.size:
        la, lb = label[a], label[b]
        apart = la != lb
        a, b, la, lb = a[apart], b[apart], la[apart], lb[apart]
        if not a.size:
            break
        pick = _leading(np.maximum(la, lb), 1 << min(rounds, 30))
        if a.size <= 2 * pick.size:
            pick = np.arange(a.size)
        rounds += 1
        holds = _similarities(norm_texts, packed, a[pick], b[pick]) >= threshold
        label = connected(n, la[pick][holds], lb[pick][holds])[label]
        rest = np.ones(a.size, dtype=bool)
        rest[pick] = False
        a, b = a[rest], b[rest]
    return label, packed


def _leading(group: np.ndarray, k: int) -> np.ndarray:
    """The positions of the first k entries of each group value (positions in order)."""
    if k == 1:  # the first round, over every candidate: a scatter, not a sort (0.7-1.3 s of 14 on 439,521 queries)
        first = np.full(int(group.max()) + 1, group.size, dtype=np.int64)
        np.minimum.at(first, group, np.arange(group.size))
        return np.sort(first[first < group.size])
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    starts = np.concatenate(([True], sorted_group[1:] != sorted_group[:-1]))
    rank = np.arange(group.size) - np.maximum.accumulate(np.where(starts, np.arange(group.size), 0))
    return np.sort(order[rank < k])


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
    labels, packed = _near_components(kept_norms, cfg.threshold, cfg.shingle, cfg.num_perm, cfg.bands, MARGIN)
    labels = labels.tolist()
    # a component's label is its smallest member, the cluster's keeper; an exact duplicate joins its original's
    keeper_of = {kept[local]: keys[kept[lab]] for local, lab in enumerate(labels)}
    res.groups = {k: keeper_of[exact_of.get(i, i)] for i, k in enumerate(keys)}
    clusters: dict[int, list[int]] = {}
    for local, lab in enumerate(labels):
        clusters.setdefault(lab, []).append(local)
    clusters = {lab: members for lab, members in clusters.items() if len(members) >= 2}
    # each member reports its own Jaccard with the cluster's keeper (its first text), linked directly or not
    keeper_pairs = np.array([(lab, m) for lab, members in clusters.items() for m in members if m != lab],
                            dtype=np.int64).reshape(-1, 2)
    sims = iter(_similarities(kept_norms, packed, keeper_pairs[:, 0], keeper_pairs[:, 1]).tolist()
                if len(keeper_pairs) else [])
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
