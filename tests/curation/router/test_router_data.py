"""Outcome snapshots: one embedding per query, splits by query id, held-out models, labels, load_snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from mashbill.curation.router.router_data import freeze_outcomes, win_matrix
from mashbill.curation.snapshots.pull import load_snapshot
from mashbill.curation.snapshots.snapshot import IntegrityError, SnapshotError, verify
from mashbill.factory.router.outcome_import import import_outcomes
from mashbill.factory.store import Store
from mashbill.specs.router import load_recipe

MODELS = ["small", "medium", "large"]
TOPICS = ["bread baking", "tax law", "quantum physics", "python bugs", "poetry", "chess openings", "football",
          "gardening", "car repair", "astronomy"]


def recipe(tmp_path: Path, **over) -> Path:
    data = {"dataset": "outcomes", "name": "rt-out", "version": 1, "models": MODELS,
            "model_costs": {"small": 0.001, "medium": 0.01, "large": 0.1},
            "splits": {"shares": {"train": 0.6, "eval": 0.2, "test": 0.2}, "near_duplicates": True}, **over}
    p = tmp_path / "rt-out@1.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


def outcome_store(tmp_path: Path, n: int = 40) -> Path:
    """n queries x 3 models; `small` is right on every third query, `large` on all but every fifth."""
    rows = []
    for i in range(n):
        q = f"Question {i} about {TOPICS[i % len(TOPICS)]}: what should I know?"
        rows.append({"query": q, "model": "small", "correct": i % 3 == 0})
        rows.append({"query": q, "model": "medium", "correct": i % 2 == 0})
        rows.append({"query": q, "model": "large", "correct": i % 5 != 0})
    rows.append({"query": "Question 0 about bread baking: what should I know?", "model": "huge", "correct": True})
    f = tmp_path / "outcomes.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    with Store.open(store) as s:
        import_outcomes(s, [f])
    return store


def test_freeze_outcomes_stores_each_embedding_once_and_splits_by_query(tmp_path, minilm):
    store = outcome_store(tmp_path)
    rr = load_recipe(recipe(tmp_path))
    res = freeze_outcomes(rr, store, name="rt-out", version="1", encoder=minilm)
    m = verify(res.path)
    assert m["kind"] == "outcomes" and m["rejects"]["by_code"] == {"OUT002": 1}  # the unknown model `huge`
    emb = pq.read_table(res.path / "embeddings.parquet")
    assert emb.num_rows == 40 and len(set(emb.column("query_id").to_pylist())) == 40
    assert m["embeddings"]["computed"] == 40 and m["embeddings"]["dims"] == 384
    sides: dict[str, set] = {}
    total = 0
    for s in ("train", "eval", "test"):
        t = pq.read_table(res.path / "data" / f"{s}.parquet")
        total += t.num_rows
        assert "embedding" not in t.column_names  # outcome rows refer to embeddings by query id
        for q in t.column("query_id").to_pylist():
            sides.setdefault(q, set()).add(s)
    assert total == 120 and all(len(v) == 1 for v in sides.values())
    assert m["splits"]["leakage"]["groups_across_splits"] == 0
    # labels: cheapest correct model by the recipe's costs
    q = {r["text"]: r for s in ("train", "eval", "test")
         for r in pq.read_table(res.path / "queries" / f"{s}.parquet").to_pylist()}
    assert q["Question 0 about bread baking: what should I know?"]["cheapest_correct"] == "small"  # all but large
    assert q["Question 2 about quantum physics: what should I know?"]["cheapest_correct"] == "medium"
    assert q["Question 1 about tax law: what should I know?"]["cheapest_correct"] == "large"
    assert q["Question 5 about chess openings: what should I know?"]["cheapest_correct"] == "none"
    # a second freeze takes every vector from the cache
    again = freeze_outcomes(rr, store, name="rt-out", version="2", encoder=minilm)
    assert again.manifest["embeddings"]["cache_hits"] == 40 and again.manifest["embeddings"]["computed"] == 0
    with pytest.raises(SnapshotError, match="already exists"):
        freeze_outcomes(rr, store, name="rt-out", version="1", encoder=minilm)


def test_held_out_model_is_in_test_only(tmp_path, minilm):
    store = outcome_store(tmp_path)
    rr = load_recipe(recipe(tmp_path, splits={"hold_out_models": ["large"], "near_duplicates": False}))
    res = freeze_outcomes(rr, store, name="cold", version="1", encoder=minilm)
    for s in ("train", "eval", "test"):
        models = set(pq.read_table(res.path / "data" / f"{s}.parquet").column("model").to_pylist())
        assert ("large" in models) == (s == "test")
    n_test = res.manifest["splits"]["queries"]["test"]
    assert res.manifest["splits"]["held_out_rows_dropped"] == 40 - n_test
    wm = json.loads((res.path / "win_matrix.json").read_text())
    assert wm["models"] == ["medium", "small"]


def test_win_matrix_counts_pairs():
    wm = win_matrix({"a": {"x": True, "y": False}, "b": {"x": True, "y": True}, "c": {"x": False}},
                    ["x", "y"])
    assert wm["wins"] == [[0, 1], [0, 0]] and wm["shared"] == [[3, 2], [2, 2]]
    assert wm["win_share"][0][1] == 0.5


def test_load_snapshot_router_format_is_ready_for_pytorch(tmp_path, minilm):
    store = outcome_store(tmp_path)
    res = freeze_outcomes(load_recipe(recipe(tmp_path)), store, name="rt-out", version="1", encoder=minilm)
    dd = load_snapshot("rt-out@1", format="router", store=store)
    models = json.loads(dd["train"].info.description)["models"]
    assert sorted(models) == sorted(MODELS)
    total = sum(dd[s].num_rows for s in dd)
    assert total == 40
    row = dd["train"].with_format("numpy")[0]
    assert row["embedding"].shape == (384,) and row["correct"].shape == (3,)
    i = int(row["cheapest_correct"])
    assert i == -1 or row["correct"][i] == 1.0
    costs = {"small": 0.001, "medium": 0.01, "large": 0.1}  # the recipe's, since the imported rows have none
    assert np.allclose(row["cost"], [costs[m] for m in models])
    emb = pq.read_table(res.path / "embeddings.parquet")
    k = emb.column("query_id").to_pylist().index(row["query_id"])
    assert np.allclose(emb.column("embedding")[k].values.to_numpy(), row["embedding"])
    long = load_snapshot("rt-out@1", format="outcomes", store=store)
    assert sum(long[s].num_rows for s in long) == 120
    (res.path / "data" / "eval.parquet").write_bytes(b"altered")
    with pytest.raises(IntegrityError, match="data/eval.parquet"):
        load_snapshot("rt-out@1", store=store)


def test_empty_store_refuses(tmp_path, minilm):
    with Store.open(tmp_path / "store"):
        pass
    with pytest.raises(SnapshotError, match="no outcome rows"):
        freeze_outcomes(load_recipe(recipe(tmp_path)), tmp_path / "store", name="x", version="1", encoder=minilm)
