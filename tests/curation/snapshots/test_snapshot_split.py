"""The columnar split's leakage check answers as the validators' across_splits does."""

from __future__ import annotations

import random

import numpy as np

from mashbill.curation.selection.groups import normalized
from mashbill.curation.selection.split import SPLITS, assign_splits
from mashbill.curation.snapshots.snapshot_split import leakage
from mashbill.validators.data.leakage import across_splits


def test_leakage_counts_what_across_splits_counts():
    rng = random.Random(7)
    texts = ["What is 7-3?", "what is 7 - 3", "", None, "Ärger über ÄRGER", "ärger uber ärger", "km/h", "KM/H"]
    for trial in range(40):
        n = rng.randint(1, 30)
        keys = [f"k{rng.randint(0, n)}" for _ in range(n)]  # repeats: two rows of one key
        queries = [rng.choice(texts) for _ in keys]
        roots = [f"g{rng.randint(0, 5)}" for _ in keys]
        side_of = {k: rng.choice(SPLITS) for k in keys}
        group_of = {}
        for k, g in zip(keys, roots):
            group_of.setdefault(k, g)
        roots = [group_of[k] for k in keys]  # rows of one key share its group and side, as in a split
        sides = [side_of[k] for k in keys]
        want = across_splits(side_of, dict(zip(keys, queries)), group_of, dict(zip(keys, normalized(queries))))
        side_numbers = np.array([SPLITS.index(s) for s in sides], dtype=np.int8)
        root_numbers = np.array([sorted(set(roots)).index(g) for g in roots], dtype=np.int64)
        assert leakage(keys, side_numbers, root_numbers, queries) == want, trial


def test_assign_splits_gives_rows_their_sides_and_groups():
    keys = ["b", "a", "c", "b", "d"]
    res = assign_splits(keys, ["x"] * 5, [("c", "d")], {"train": 0.6, "eval": 0.2, "test": 0.2})
    assert res.sides == [res.assignment[k] for k in keys]
    assert res.roots == [res.groups[k] for k in keys] and res.groups["d"] == "c"
    assert res.stats["multi_record_groups"] == 2  # b twice, and c with d


def test_repeated_record_ids_are_found_sorted_or_not():
    import pyarrow as pa

    from mashbill.curation.snapshots.snapshot_split import _repeats

    rng = random.Random(3)
    for trial in range(200):
        ids = [f"r{rng.randint(0, 12)}" for _ in range(rng.randint(0, 8))]
        if rng.random() < 0.5:
            ids.sort()
        chunks = [ids[:len(ids) // 2], ids[len(ids) // 2:]]
        assert _repeats(pa.chunked_array([pa.array(c, pa.string()) for c in chunks], pa.string())) \
            == (len(set(ids)) < len(ids)), (trial, ids)
