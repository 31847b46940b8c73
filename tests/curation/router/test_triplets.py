"""Bi-encoder triplets: positives from validated plan records, hard negatives mined with MiniLM."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import yaml

from mashbill.curation.router.triplets import category_descriptions, freeze_triplets
from mashbill.curation.snapshots.pull import load_snapshot
from mashbill.curation.snapshots.snapshot import verify
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from mashbill.specs.router import load_recipe

from tests.curation.conftest import PLANS, SEEDS, add_records


def test_triplets_take_nearest_wrong_category_as_negative(tmp_path, lib, minilm):
    seeds = SEEDS[:12]
    plans = dict(PLANS)
    odd = seeds[-1][0]
    plans[odd] = [{"task": "Read the whole log file", "category": "long_context"}]  # not a taxonomy category
    spec_path = lib.write("trip-src", seeds=seeds)
    rs = load_spec(spec_path)
    store = tmp_path / "store"
    with Store.open(store) as s:
        add_records(s, rs, plans=plans, rejected_by_validation={seeds[0][0]: "HR001"})
    rp = tmp_path / "rt-trip@1.yaml"
    rp.write_text(yaml.safe_dump({"dataset": "triplets", "name": "rt-trip", "version": 1, "source_spec": str(spec_path),
                                  "taxonomy": str(lib.root / "shared" / "taxonomy" / "moe-experts@1.yaml"),
                                  "negatives_per_query": 2, "splits": {"near_duplicates": False}}), encoding="utf-8")
    rr = load_recipe(rp)
    res = freeze_triplets(rr, store, name="rt-trip", version="1", encoder=minilm)
    m = verify(res.path)
    assert m["rejects"]["by_code"] == {"HR001": 1, "TRP001": 1}
    rows = [r for s in ("train", "eval", "test") for r in pq.read_table(res.path / "data" / f"{s}.parquet").to_pylist()]
    cats = category_descriptions(rr)
    names = sorted(cats)
    cvec = minilm.encode([cats[c] for c in names])
    positives: dict[str, set] = {}
    for r in rows:
        positives.setdefault(r["anchor"], set()).add(r["positive_category"])
    assert odd not in positives and seeds[0][0] not in positives and len(positives) == 10
    for r in rows:
        assert r["negative_category"] not in positives[r["anchor"]]
        assert r["positive"] == cats[r["positive_category"]] and r["negative"] == cats[r["negative_category"]]
    # recompute the mining independently: the two most similar wrong categories, per positive
    for anchor, pos in positives.items():
        sims = cvec @ minilm.encode([anchor])[0]
        wrong = [names[i] for i in np.argsort(-sims, kind="stable") if names[i] not in pos][:2]
        got = {r["negative_category"] for r in rows if r["anchor"] == anchor}
        assert got == set(wrong)
    per_query_sides: dict[str, set] = {}
    for s in ("train", "eval", "test"):
        for r in pq.read_table(res.path / "data" / f"{s}.parquet").to_pylist():
            per_query_sides.setdefault(r["query_id"], set()).add(s)
    assert all(len(v) == 1 for v in per_query_sides.values())
    dd = load_snapshot("rt-trip@1", store=store)
    assert {"anchor", "positive", "negative"} <= set(dd["train"].column_names)
    assert sum(dd[s].num_rows for s in dd) == len(rows)
