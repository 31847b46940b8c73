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


def test_texts_share_a_class_exactly_when_their_normalisations_are_equal():
    """`normalized_classes` is a shortcut for the cross-split check (only texts that share their letters and digits
    are normalised, ASCII ones found without decoding): two texts must share a class exactly when their
    normalisations are equal, over classes of what normalisation folds (case, punctuation and spacing,
    operators kept or dropped, underscores, NFKC forms, non-Latin scripts, NUL)."""
    import random

    from mashbill.curation.selection.groups import normalized_classes
    from mashbill.validators.data.dedup import normalize

    words = ["what", "What", "WHAT", "is", "7", "3", "km", "h", "e", "mail", "Ärger", "ärger", "uber", "über",
             "straße", "STRASSE", "ﬁle", "file", "ＡＢＣ", "abc", "東京", "x2", "½", "sqrt(2)", "①"]
    glue = [" ", "  ", "-", " - ", "+", " * ", "/", "_", "__", "?", ", ", "\t", "\0", "·", "×", ".", ""]
    rng = random.Random(29)
    for trial in range(60):
        texts = []
        for _ in range(rng.randint(2, 40)):
            parts = [rng.choice(words)]
            for _ in range(rng.randint(0, 4)):
                parts += [rng.choice(glue), rng.choice(words)]
            texts.append("".join(parts) + rng.choice(["", "?", " ", "!"]))
        texts += [rng.choice(texts).upper(), rng.choice(texts).replace(" ", "  "), "", None]
        norms = [normalize(t or "") for t in texts]
        out = normalized_classes(texts).tolist()
        for i in range(len(texts)):
            for j in range(i):
                assert (out[i] == out[j]) == (norms[i] == norms[j]), (trial, texts[i], texts[j])
