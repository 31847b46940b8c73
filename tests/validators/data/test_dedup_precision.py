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


def _corpus(rng, n_wide: int = 0) -> list[str]:
    """Classes of text the packed shingles must get right: templated near duplicates, short texts (padded), repeated
    shingles, umlauts and other scripts, astral characters, texts sharing nothing, the fooling pairs, and (n_wide)
    texts over an alphabet wider than the packed keys hold (600 CJK characters), near duplicates among them too."""
    texts = [t for pair in DISTINCT + NEAR for t in pair]
    texts += ["what is 17 % of 2840", "what is 18 % of 2840", "ab", "abc", "a", "aaaaaaaaaaaa", "aaaaaaab",
              "wie spät ist es in tokio", "wie spät ist es in köln", "größe straße maß", "grösse strasse mass",
              "東京は今何時ですか", "東京は今何時ですか 教えて", "ǅ ϗ ѯ ࿿ pack", "ǅ ϗ ѯ က pack", "𝔘𝔫𝔦 𝕔𝕠𝕕𝕖 🙂🙂 x",
              "𝔘𝔫𝔦 𝕔𝕠𝕕𝕖 🙂🙂 y"]
    texts += [f"please convert {rng.randint(1, 99)} {unit} to {other} for the road trip we take tomorrow morning"
              for unit, other in [("miles", "km"), ("pounds", "kg")] for _ in range(15)]
    texts += ["".join(rng.choice("abcdefgh ") for _ in range(rng.randint(1, 30))) for _ in range(30)]
    wide = [chr(0x4E00 + i) for i in range(600)]
    for _ in range(n_wide):
        base = "".join(rng.choice(wide) for _ in range(rng.randint(3, 12)))
        texts += [base, base + rng.choice(wide), base + " " + str(rng.randint(0, 9))]
    return [normalize(t) for t in texts]


def test_packed_shingles_give_the_jaccard_of_the_string_sets():
    """jaccard packs each text's shingles into one uint64 each (characters as ranks in the texts' alphabet) and
    compares all pairs at once; texts with characters outside the alphabet it can pack (the most frequent 2^bits - 1)
    go through their own alphabet or string sets. Every pair, of any mix, gets exactly the string sets' Jaccard."""
    import random

    from mashbill.validators.data.dedup import _PackedShingles, jaccard

    rng = random.Random(3)
    for n_wide in (0, 200):
        norms = _corpus(rng, n_wide)
        pairs = np.array([(rng.randrange(len(norms)), rng.randrange(len(norms))) for _ in range(3000)]
                         + [(i, i + 1) for i in range(len(norms) - 1)], dtype=np.int64)
        assert jaccard(norms, pairs).tolist() == [_jaccard(norms[a], norms[b]) for a, b in pairs.tolist()]
        packed = _PackedShingles(norms, np.arange(len(norms)), 5).packed
        assert packed.all() == (n_wide == 0)  # the wide alphabet leaves some texts unpacked: both paths taken
    assert jaccard(norms, np.empty((0, 2), dtype=np.int64)).size == 0


def test_dup002_names_each_members_jaccard_with_its_keeper(ruleset):
    """DUP002's detail: each member's own Jaccard with its cluster's keeper (the shingles packed once for the
    clusters and the keepers), for clusters of packed texts and of texts outside the packed alphabet."""
    import random

    rng = random.Random(4)
    norms = _corpus(rng, 200)
    keys = [f"k{i:04d}" for i in range(len(norms))]
    res = dedup(keys, norms, ruleset.checks.dedup)
    details = [(k, v.detail) for k, vs in res.verdicts.items() for v in vs if v.code == "DUP002"]
    assert len(details) > 100
    for key, detail in details:
        keeper = detail.rsplit("kept ", 1)[1]
        want = _jaccard(norms[keys.index(key)], norms[keys.index(keeper)])
        assert f"Jaccard {want:.2f}" in detail, (key, detail)


def test_near_components_are_the_components_of_the_near_pairs():
    """near_components checks only the candidates that can still join two components; its components are those of
    every confirmed pair (templated clusters, chains through a middle text, fooling pairs and singletons)."""
    import random

    from mashbill.validators.data.dedup import connected, near_components

    rng = random.Random(5)
    texts = [t for pair in DISTINCT + NEAR for t in pair]
    texts += [f"please convert {rng.randint(1, 99)} {unit} to {other} for the road trip we take tomorrow morning"
              for unit, other in [("miles", "km"), ("pounds", "kg"), ("feet", "meters")] for _ in range(40)]
    texts += [f"{w} what is the capital of france today" for w in ("so", "ok", "hey", "um")]
    texts += ["".join(rng.choice("abcdefgh ") for _ in range(30)) for _ in range(60)]
    for norms in (list(dict.fromkeys(normalize(t) for t in texts)), list(dict.fromkeys(_corpus(rng, 200)))):
        pairs, _ = near_pairs(norms, 0.8)
        want = connected(len(norms), pairs[:, 0], pairs[:, 1])
        got = near_components(norms, 0.8)
        assert len(pairs) > 100 and len(set(want.tolist())) < len(norms) - 50  # clusters to find
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


def test_near_components_do_not_depend_on_which_candidates_a_round_checks(monkeypatch):
    """Each round checks some candidates (the best of each component, then more); whichever it checks, the rounds
    end with the components of every confirmed pair: here each round checks one to three candidates at random."""
    import random

    import mashbill.validators.data.dedup as dedup_module

    rng = random.Random(6)
    norms = list(dict.fromkeys(_corpus(rng, 20)))
    pairs, _ = near_pairs(norms, 0.8)
    want = dedup_module.connected(len(norms), pairs[:, 0], pairs[:, 1])
    monkeypatch.setattr(dedup_module, "_leading",
                        lambda group, k: np.sort(rng.sample(range(group.size), min(group.size, rng.randint(1, 3)))))
    assert dedup_module.near_components(norms, 0.8).tolist() == want.tolist()
