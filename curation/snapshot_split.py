"""Balance a snapshot's examples to their cell quotas, group them (paraphrases, shared sources, near
duplicates) and split the groups into train/eval/test without leakage."""

from __future__ import annotations

from collections import Counter, defaultdict

from mashbill.curation.balance import apply_quotas, oversample
from mashbill.curation.groups import near_duplicate_pairs, normalized
from mashbill.curation.snapshot_examples import Built
from mashbill.curation.snapshot_format import SnapshotError
from mashbill.curation.split import assign_splits
from mashbill.hashing import canonical_json
from mashbill.specs import ResolvedSpec
from mashbill.validators.leakage import across_splits

def split_and_balance(built: Built, rs: ResolvedSpec):
    spec = rs.spec
    cur = spec.curation
    base = [e for e in built.examples if e.row_kind != "correction"]
    derived = [e for e in built.examples if e.row_kind == "correction"]
    if not base:
        codes = Counter(c for x in built.excluded for c in x.codes)
        why = ", ".join(f"{c}: {n}" for c, n in codes.most_common(8)) or "no records"
        raise SnapshotError(f"nothing to freeze for {rs.ref}: the selection is empty ({built.records_seen} record(s) "
                            f"seen; left out by code: {why}). Nothing was written.")
    balance = apply_quotas([e.key for e in base], [e.cell for e in base], built.dims, cur.quotas, rs.ref)
    kept = set(balance.kept)
    cut = [e for e in base if e.key not in kept]
    base = [e for e in base if e.key in kept]
    derived = [e for e in derived if all(k in kept for k in e.group_links)]
    examples = base + derived
    keys = [e.key for e in examples]
    links = [(e.key, other) for e in examples for other in e.group_links]
    # paraphrase groups and shared sources
    for fieldname in cur.group_by:
        first: dict[str, str] = {}
        for e in examples:
            value = e.inputs.get(fieldname)
            if value is None:
                continue
            value = canonical_json(value)
            if value in first:
                links.append((first[value], e.key))
            else:
                first[value] = e.key
    by_record: dict[str, str] = {}
    for e in examples:
        if e.record_id in by_record:
            links.append((by_record[e.record_id], e.key))
        else:
            by_record[e.record_id] = e.key
    queries = [e.query for e in examples]
    norms = normalized(queries)  # once, for the near-duplicate groups and the cross-split check
    links += near_duplicate_pairs(keys, queries, cur.near_duplicate_threshold, norms)
    ratios = {"train": cur.splits.train, "eval": cur.splits.eval, "test": cur.splits.test}
    res = assign_splits(keys, [e.cell for e in examples], links, ratios)
    train_by_cell: dict[str, list[str]] = defaultdict(list)
    for e in base:
        if res.assignment[e.key] == "train":
            train_by_cell[e.cell].append(e.key)
    copies = oversample(balance, train_by_cell, cur.quotas, rs.ref)
    leak = across_splits(res.assignment, dict(zip(keys, queries)), res.groups, dict(zip(keys, norms)))
    if leak["groups_across_splits"] or leak["identical_queries_across_splits"]:
        raise SnapshotError(f"{rs.ref}: the split leaks across train/eval/test ({leak}); this is a bug")
    return examples, cut, balance, res, copies, leak
