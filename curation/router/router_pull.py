"""Load router snapshots as `datasets.DatasetDict`s a PyTorch or TRL user reads without glue.

- outcomes, format `router` (default): one row per query: `query_id`, `text`, `embedding` (float32),
  `correct` and `cost` (one entry per model, in `models` order; NaN where the model has no outcome; a row
  without its own cost takes the model's cost per query from the manifest),
  `cheapest_correct` (a model index, or -1 when none was right). `ds.with_format("torch")` gives tensors.
- outcomes, format `outcomes`: the long rows (query id, model, correct, score, cost, latency, tokens).
- transitions: `state`, `action`, `reward`, `next_state`, `done` (+ request/query ids); the query's
  embedding is put in front of the state features when the snapshot has embeddings.
- triplets: `anchor`, `positive`, `negative` (sentence-transformers' triplet columns) + categories.

The models list of an outcome snapshot is in `dd["train"].info.description` and the manifest.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mashbill.curation.selection.split import SPLITS
from mashbill.curation.snapshots.snapshot import SnapshotError
from mashbill.factory.encoders.embeddings import vectors_of

FORMATS = {"outcomes": ("router", "outcomes"), "transitions": ("transitions",), "triplets": ("triplets",)}


def _embeddings(path: Path) -> tuple[dict[str, int], np.ndarray] | None:
    f = path / "embeddings.parquet"
    if not f.is_file():
        return None
    t = pq.read_table(f)
    return {q: i for i, q in enumerate(t.column("query_id").to_pylist())}, vectors_of(t.column("embedding"))


def load_router_snapshot(path: Path, manifest: dict, format: str | None):
    import datasets as ds

    kind = manifest["kind"]
    fmt = format or FORMATS[kind][0]
    if fmt not in FORMATS[kind]:
        raise SnapshotError(f"{manifest['ref']} is a {kind} snapshot; formats: {', '.join(FORMATS[kind])}")
    out = {}
    if kind == "outcomes" and fmt == "router":
        models = [m["name"] for m in manifest["models"]]
        midx = {m: i for i, m in enumerate(models)}
        model_cost = {m["name"]: m["cost_per_query"] for m in manifest["models"]}
        index, emb = _embeddings(path)
        for s in SPLITS:
            q = pq.read_table(path / "queries" / f"{s}.parquet").to_pydict()
            rows = pq.read_table(path / "data" / f"{s}.parquet", columns=["query_id", "model", "correct", "cost"])
            pos = {qid: i for i, qid in enumerate(q["query_id"])}
            correct = np.full((len(pos), len(models)), np.nan, np.float32)
            cost = np.full_like(correct, np.nan)
            r = rows.to_pydict()
            for qid, m, ok, c in zip(r["query_id"], r["model"], r["correct"], r["cost"]):
                correct[pos[qid], midx[m]] = float(ok)
                # a row without its own cost takes the model's cost per query (the one the labels used)
                cost[pos[qid], midx[m]] = c if c is not None else (model_cost[m] if model_cost[m] is not None else np.nan)
            vec = emb[[index[x] for x in q["query_id"]]] if q["query_id"] else np.zeros((0, emb.shape[1]), np.float32)
            table = pa.table({
                "query_id": q["query_id"], "text": q["text"],
                "embedding": pa.array(list(vec), pa.list_(pa.float32())),
                "correct": pa.array(list(correct), pa.list_(pa.float32())),
                "cost": pa.array(list(cost), pa.list_(pa.float32())),
                "cheapest_correct": pa.array([midx.get(x, -1) for x in q["cheapest_correct"]], pa.int64()),
            })
            out[s] = ds.Dataset(table, info=ds.DatasetInfo(description=json.dumps({"models": models})), split=s)
    elif kind == "transitions":
        e = _embeddings(path)
        for s in SPLITS:
            t = pq.read_table(path / "data" / f"{s}.parquet")
            if e is not None and t.num_rows:
                index, emb = e
                rows_emb = emb[[index[q] for q in t.column("query_id").to_pylist()]]
                for col in ("state", "next_state"):
                    feats = vectors_of(t.column(col))
                    full = np.concatenate([rows_emb, feats], axis=1)
                    t = t.set_column(t.schema.get_field_index(col), col, pa.array(list(full), pa.list_(pa.float32())))
            out[s] = ds.Dataset(t, split=s)
    else:
        for s in SPLITS:
            out[s] = ds.Dataset(pq.read_table(path / "data" / f"{s}.parquet"), split=s)
    return ds.DatasetDict(out)
