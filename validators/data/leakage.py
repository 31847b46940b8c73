"""Leakage: no training record may be (nearly) the same as an item of the eval split or of a registered holdout
set (benchmark queries the user names in the spec's ``holdout`` list or with ``--holdout``).

A record leaks (``LEAK001``, with the matched item) when, after normalisation, it equals a holdout item; when one of
the two contains the other (either way, compared without spaces, so a moved comma or question mark does not matter)
and the contained one is at least ``MIN_CONTAINED`` characters and at least ``MIN_SHARE`` of the other's length
(the commonest real leak: a benchmark query with a few words appended or prepended); or when its Jaccard
similarity (character 5-grams; MinHash/LSH candidates confirmed exactly, as in dedup) reaches the threshold.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from mashbill.factory.records import Verdict
from mashbill.specs.holdout import MIN_CONTAINED, MIN_SHARE, HoldoutFileError, HoldoutItem, read_holdout
from mashbill.validators.data.dedup import near_pairs, normalize
from mashbill.validators.errors import ValidationInputError

def load_holdout(path: str | Path) -> list[HoldoutItem]:
    """`specs.holdout.load_holdout`, its errors as validation input errors (one line, exit 2)."""
    try:
        return read_holdout(path)
    except HoldoutFileError as exc:
        raise ValidationInputError(str(exc)) from None


LONG_ITEM = 25  # a holdout item this long leaks wherever it appears verbatim (a prompt embedding a benchmark query)
MAX_WORDS = 80  # a holdout item longer than this is only matched the other ways (MinHash)


def _squash(t: str) -> str:
    return t.replace(" ", "")


def _contained(norms: list[str], hnorm: list[str]) -> dict[int, tuple[int, str]]:
    """Records containing a holdout item, or contained in one: word-aligned, compared without spaces."""
    found: dict[int, tuple[int, str]] = {}
    # a holdout item inside a record: one regex over the records (word-aligned in the normalised text)
    items = {}
    for j, h in enumerate(hnorm):
        if len(_squash(h)) >= MIN_CONTAINED:
            items.setdefault(h, j)
    if items and len(items) <= 5000:
        rx = re.compile(r"(?<!\S)(?:" + "|".join(re.escape(h) for h in sorted(items, key=len, reverse=True))
                        + r")(?!\S)")
        for i, t in enumerate(norms):
            m = rx.search(t)
            if m and (len(m.group(0)) >= LONG_ITEM or len(m.group(0)) >= MIN_SHARE * len(t)):
                found[i] = (items[m.group(0)], "contains the holdout item")
    # a record inside a holdout item: every word run of the item, looked up among the records
    by_text: dict[str, int] = {}
    for i, t in enumerate(norms):
        if len(_squash(t)) >= MIN_CONTAINED:
            by_text.setdefault(_squash(t), i)
    for j, h in enumerate(hnorm):
        words = h.split()
        if len(words) > MAX_WORDS:
            continue
        total = len(_squash(h))
        for a in range(len(words)):
            run = ""
            for b in range(a, len(words)):
                run += words[b]
                if len(run) < MIN_CONTAINED or len(run) < MIN_SHARE * total:
                    continue
                i = by_text.get(run)
                if i is not None and i not in found:
                    found[i] = (j, "contained in the holdout item")
    return found


def leakage(keys: list[str], texts: list[str], holdout: list[HoldoutItem], cfg, dedup_cfg) -> tuple[dict, dict]:
    """LEAK001 verdicts per key, and a summary."""
    verdicts: dict[str, list[Verdict]] = {}
    if not holdout or not keys:
        return verdicts, {"holdout_items": len(holdout), "leaked": 0}
    norms = [normalize(t) for t in texts]
    hnorm = [normalize(h.text) for h in holdout]
    found: dict[int, tuple[int, str]] = {}
    exact = {}
    for j, h in enumerate(hnorm):
        exact.setdefault(h, j)
    for i, t in enumerate(norms):
        if t in exact:
            found[i] = (exact[t], "identical after normalisation")
    for i, (j, how) in _contained(norms, hnorm).items():
        found.setdefault(i, (j, how))
    n = len(norms)
    cross, sims = near_pairs(norms + hnorm, cfg.threshold, shingle=dedup_cfg.shingle, num_perm=dedup_cfg.num_perm,
                             bands=dedup_cfg.bands, keep=lambda p: (p[:, 0] < n) & (p[:, 1] >= n))
    for (i, j), s in zip(cross.tolist(), sims.tolist()):
        if i not in found:
            found[i] = (j - n, f"Jaccard {s:.2f}")
    for i, (j, how) in sorted(found.items()):
        item = holdout[j]
        snippet = item.text if len(item.text) <= 80 else item.text[:77] + "..."
        verdicts.setdefault(keys[i], []).append(
            Verdict(cfg.code, cfg.severity, f"leaks {item.source} ({how}): {snippet!r}", "validate"))
    return verdicts, {"holdout_items": len(holdout), "leaked": len(found)}


def across_splits(assignment: dict[str, str], texts: dict[str, str], groups: dict[str, str],
                  normalized: dict[str, str] | None = None) -> dict:
    """The checks after a split: groups that straddle splits, and queries identical after `normalize` (the rule
    dedup, holdout leakage and the split's near-duplicate groups use) found on more than one side.
    `normalized`: `normalize(texts[k])` per key when the caller has it already (a freeze does)."""
    side_of_group: dict[str, set] = defaultdict(set)
    side_of_text: dict[str, set] = defaultdict(set)
    for k, s in assignment.items():
        side_of_group[groups[k]].add(s)
        if texts.get(k):
            side_of_text[normalized[k] if normalized is not None else normalize(texts[k])].add(s)
    return {"groups_across_splits": sum(1 for v in side_of_group.values() if len(v) > 1),
            "identical_queries_across_splits": sum(1 for v in side_of_text.values() if len(v) > 1)}
