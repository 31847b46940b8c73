"""Near-duplicate precision: LSH candidates are confirmed on the exact shingle sets, so distinct short queries that
the one-permutation estimate put at >= 0.8 are no longer DUP002 (nor leaks, nor one split group). The pairs are
real queries of shared/data/queries-dev that the estimate-only rule got wrong."""

from __future__ import annotations

import numpy as np
import pytest

from mashbill.curation.selection.groups import near_duplicate_clusters
from mashbill.validators.data.dedup import dedup, estimate, near_pairs, normalize, signatures
from mashbill.validators.data.leakage import HoldoutItem, leakage

# distinct queries the estimate put at >= 0.8 (exact Jaccard of character 5-grams 0.45 to 0.76)
DISTINCT = [
    ("alarm", "alarms"),
    ("fix an alarm", "set an alarm"),
    ("decrease the volume", "increase the volume"),
    ("can you please shut up", "would you please shut up"),
    ("control lights turn off room lights", "turn off room lights"),
    ("1234 rankine in fahrenheit", "84856 rankine in fahrenheit"),
]
# true near duplicates (exact Jaccard >= 0.8), the last three with an estimate below 0.8 (missed before)
NEAR = [
    ("0 celsius in fahrenheit", "7 celsius in fahrenheit"),
    ("1/1/2012 plus 1 day", "1/1/2012 plus 1 days"),
    ("3 days ago+1 second", "3 days ago+1 seconds"),
    ("i can t stop eating what can i do", "i just can t stop eating what can i do"),
    ("can you check and confirm my last command please", "check and confirm my last command please"),
]


def _jaccard(a: str, b: str, k: int = 5) -> float:
    def sh(t):
        t = normalize(t).ljust(k)
        return {t[i:i + k] for i in range(len(t) - k + 1)}

    x, y = sh(a), sh(b)
    return len(x & y) / len(x | y)


def _est(a: str, b: str) -> float:
    return float(estimate(signatures([normalize(a), normalize(b)]), np.array([[0, 1]]))[0])


def test_the_pairs_are_what_they_claim():
    """Guards the fixtures: the distinct pairs fool the estimate, the near pairs are near, three missed by it."""
    for a, b in DISTINCT:
        assert _jaccard(a, b) < 0.8 <= _est(a, b), (a, b)
    for a, b in NEAR:
        assert _jaccard(a, b) >= 0.8, (a, b)
    assert [_est(a, b) < 0.8 for a, b in NEAR[2:]] == [True, True, True]


def test_distinct_short_queries_are_not_near_duplicates_and_true_ones_are(ruleset):
    cfg = ruleset.checks.dedup
    texts = [t for pair in DISTINCT + NEAR for t in pair]
    keys = [f"q{i}" for i in range(len(texts))]
    res = dedup(keys, texts, cfg)
    flagged = {k for k, vs in res.verdicts.items() if any(v.code == cfg.near_code for v in vs)}
    assert flagged == {f"q{2 * i + 1}" for i in range(len(DISTINCT), len(DISTINCT) + len(NEAR))}
    detail = res.verdicts[f"q{2 * len(DISTINCT) + 1}"][0].detail
    assert f"Jaccard {_jaccard(*NEAR[0]):.2f}" in detail and f"kept q{2 * len(DISTINCT)}" in detail


def test_near_pairs_reports_exact_jaccard():
    norms = [normalize(t) for pair in DISTINCT + NEAR for t in pair]
    pairs, sims = near_pairs(norms, 0.8)
    want = {(2 * i, 2 * i + 1) for i in range(len(DISTINCT), len(DISTINCT) + len(NEAR))}
    assert {tuple(p) for p in pairs.tolist()} == want
    for (a, b), s in zip(pairs.tolist(), sims.tolist()):
        assert s == pytest.approx(_jaccard(norms[a], norms[b]))


def test_split_groups_and_leakage_get_the_same_answer(ruleset):
    texts = [t for pair in DISTINCT + NEAR for t in pair]
    clusters = near_duplicate_clusters(texts, 0.8)
    same = [clusters[2 * i] == clusters[2 * i + 1] for i in range(len(DISTINCT) + len(NEAR))]
    assert same == [False] * len(DISTINCT) + [True] * len(NEAR)
    # each pair's first text is a holdout item, the second a training record; at dedup's threshold (the rule set's
    # leakage threshold is a stricter 0.7) no distinct pair leaks by Jaccard, every near pair leaks
    cfg = ruleset.checks.leakage.model_copy(update={"threshold": 0.8})
    hold = [HoldoutItem(f"bench:{i}", a) for i, (a, _) in enumerate(DISTINCT + NEAR)]
    train = [b for _, b in DISTINCT + NEAR]
    verdicts, _ = leakage([f"t{i}" for i in range(len(train))], train, hold, cfg, ruleset.checks.dedup)
    by_jaccard = {k for k, vs in verdicts.items() if any("Jaccard" in v.detail for v in vs)}
    assert not by_jaccard & {f"t{i}" for i in range(len(DISTINCT))}
    # containment (a query inside a longer one) is its own rule and may catch a pair first
    assert {f"t{i}" for i in range(len(DISTINCT), len(DISTINCT) + len(NEAR))} <= set(verdicts)
    assert {"t6", "t7", "t8"} <= by_jaccard


def test_packed_shingles_give_the_jaccard_of_the_string_sets():
    """jaccard packs a text's shingles into uint64 where every character is below U+1000 and keeps string sets
    otherwise; pairs of either kind, mixed, short or sharing no shingle get exactly the string sets' Jaccard."""
    import numpy as np

    from mashbill.validators.data.dedup import jaccard, normalize

    texts = ["what is 17 % of 2840", "what is 18 % of 2840", "wie spät ist es in tokio", "wie spät ist es in köln",
             "東京は今何時ですか", "東京は今何時ですか 教えて", "ab", "abc", "größe straße maß", "grösse strasse mass",
             "ǅ ϗ ѯ ࿿ pack", "ǅ ϗ ѯ က pack"]  # U+0FFF packs, U+1000 does not
    norms = [normalize(t) for t in texts]
    pairs = np.array([(i, j) for i in range(len(norms)) for j in range(i + 1, len(norms))], dtype=np.int64)
    assert list(jaccard(norms, pairs)) == [_jaccard(norms[a], norms[b]) for a, b in pairs.tolist()]


def test_keeper_jaccards_are_jaccard_of_each_member_with_its_keeper():
    """DUP002's detail: each member's Jaccard with its cluster's keeper, a cluster at a time in numpy, equals
    `jaccard` of those pairs exactly, for short texts (padded), repeated shingles, and a cluster with a character
    the packed keys cannot hold (that cluster goes through `jaccard` itself)."""
    import numpy as np

    from mashbill.validators.data.dedup import jaccard, keeper_jaccards, normalize

    texts = ["what is 17 % of 2840", "what is 18 % of 2840", "what is 17 % of 2841 please", "ab", "abc", "a",
             "aaaaaaaaaaaa", "aaaaaaab", "東京は今何時ですか", "東京は今何時ですか 教えて",
             "ǅ ϗ ѯ ࿿ pack", "ǅ ϗ ѯ က pack", "größe straße maß", "grösse strasse mass"]
    norms = [normalize(t) for t in texts]
    clusters = [[2, 0, 1], [3, 4, 5], [6, 7], [8, 9], [10, 11], [12, 13, 0]]
    pairs = np.array([(min(c), m) for c in clusters for m in c if m != min(c)], dtype=np.int64)
    assert keeper_jaccards(norms, clusters).tolist() == jaccard(norms, pairs).tolist()
    assert keeper_jaccards(norms, []).size == 0


def test_near_components_are_the_components_of_the_near_pairs():
    """near_components checks only the candidates that can still join two components; its components are those of
    every confirmed pair (templated clusters, chains through a middle text, fooling pairs and singletons)."""
    import random

    from mashbill.curation.selection.split import connected
    from mashbill.validators.data.dedup import near_components

    rng = random.Random(5)
    texts = [t for pair in DISTINCT + NEAR for t in pair]
    texts += [f"please convert {rng.randint(1, 99)} {unit} to {other} for the road trip we take tomorrow morning"
              for unit, other in [("miles", "km"), ("pounds", "kg"), ("feet", "meters")] for _ in range(40)]
    texts += [f"{w} what is the capital of france today" for w in ("so", "ok", "hey", "um")]
    texts += ["".join(rng.choice("abcdefgh ") for _ in range(30)) for _ in range(60)]
    norms = list(dict.fromkeys(normalize(t) for t in texts))
    pairs, _ = near_pairs(norms, 0.8)
    want = connected(len(norms), pairs[:, 0], pairs[:, 1])
    got = near_components(norms, 0.8)
    assert len(pairs) > len(norms) // 2 and len(set(want.tolist())) < len(norms)  # clusters to find
    assert got.tolist() == want.tolist()  # both label a component by its smallest text


def test_dedup_groups_are_the_clusters_a_freeze_finds_and_name_each_keeper(ruleset):
    """`dedup` keeps each key's cluster as the key its cluster keeps (validation stores it for the freeze, issue 29):
    the partition `near_duplicate_clusters` makes of the same texts, exact duplicates with their original, each
    cluster named by its first key, the keeper DUP002 names."""
    import random

    rng = random.Random(11)
    texts = [t for pair in DISTINCT + NEAR for t in pair]
    texts += [f"please convert {rng.randint(1, 99)} {unit} to {other} for the road trip we take tomorrow morning"
              for unit, other in [("miles", "km"), ("pounds", "kg")] for _ in range(30)]
    texts += [texts[3], texts[12].upper(), "What is the capital of France?", "what is the capital of france"]
    keys = [f"k{i:03d}" for i in range(len(texts))]
    res = dedup(keys, texts, ruleset.checks.dedup)
    clusters = near_duplicate_clusters(texts, ruleset.checks.dedup.threshold)
    first: dict[int, str] = {}
    for key, c in zip(keys, clusters):
        first.setdefault(c, key)
    assert res.groups == {key: first[c] for key, c in zip(keys, clusters)}
    named = {k: (v.code, v.detail.split()[-1]) for k, vs in res.verdicts.items() for v in vs}
    assert {k for k, g in res.groups.items() if g != k} == set(named) and len(named) > 40
    for key, (code, other) in named.items():  # DUP002 names the keeper; DUP001 the original, in the keeper's cluster
        assert res.groups[key] == (other if code == "DUP002" else res.groups[other])
    assert {code for code, _ in named.values()} == {"DUP001", "DUP002"}
