"""Outcome snapshots for a model router: query x model outcome rows, one embedding per query, labels.

    NAME@VERSION/
      data/{train,eval,test}.parquet     one row per (query id, model): correct, score, cost, latency, tokens
      queries/{train,eval,test}.parquet  one row per query id: text, cheapest correct model, models correct
      embeddings.parquet                 one row per query id: the encoder's vector (stored once, uncompressed)
      win_matrix.json                    train split: share of shared queries where model i is right and j wrong
      rejects.parquet, specs/, README.md, manifest.json

Outcome rows refer to embeddings by query id; nothing is copied per model. Splits are by query id (all
models' rows of a query on one side; near-duplicate texts tied), stratified by the cheapest-correct
label; a held-out model's rows are kept for test queries only (cold-start evaluation).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mashbill.curation.router.router_snapshot import card_text, split_queries, write_router_snapshot
from mashbill.curation.selection.split import SPLITS
from mashbill.curation.snapshots.snapshot import FreezeResult, SnapshotError
from mashbill.factory.encoders.embeddings import EmbeddingCache, Encoder, embedding_table
from mashbill.factory.store import Store
from mashbill.specs.router import ResolvedRecipe

NONE_CORRECT = "none"


def load_outcomes(store: Store, sources: list[str] | None = None) -> tuple[pa.Table, dict[str, str]]:
    """The store's outcome rows (optionally only some sources) and the text of every query they name."""
    return store.router_outcomes(sources), store.router_texts()


def _cheapest_correct(models: list[str], correct: list[bool], costs: list[float | None]) -> str:
    best = [(c if c is not None else float("inf"), m) for m, ok, c in zip(models, correct, costs) if ok]
    return min(best)[1] if best else NONE_CORRECT


def win_matrix(per_query: dict[str, dict[str, bool]], models: list[str]) -> dict:
    """W[i][j]: among queries both models answered, the share where model i was right and model j wrong."""
    idx = {m: i for i, m in enumerate(models)}
    present = np.zeros((len(per_query), len(models)), bool)
    right = np.zeros_like(present)
    for r, outcomes in enumerate(per_query.values()):
        for m, ok in outcomes.items():
            if m in idx:
                present[r, idx[m]] = True
                right[r, idx[m]] = bool(ok)
    p, c = present.astype(np.int64), (present & right).astype(np.int64)
    wins = c.T @ (p - c)  # i right and j wrong, both present
    shared = p.T @ p
    share = np.divide(wins, shared, out=np.zeros(wins.shape, float), where=shared > 0)
    return {"models": models, "win_share": np.round(share, 6).tolist(), "wins": wins.tolist(),
            "shared": shared.tolist()}


def freeze_outcomes(rr: ResolvedRecipe, store_path: str | Path, *, name: str, version: str,
                    out_dir: str | Path | None = None, encoder: Encoder | None = None,
                    sources: list[str] | None = None) -> FreezeResult:
    recipe = rr.recipe
    root = Path(out_dir) if out_dir is not None else Path(store_path) / "snapshots"
    if (root / f"{name}@{version}").exists():
        raise SnapshotError(f"snapshot {name}@{version} already exists at {root / f'{name}@{version}'}; "
                            "freeze under a new version")
    with Store.open(store_path, read_only=True) as store:
        table, texts = load_outcomes(store, sources)
    if table.num_rows == 0:
        raise SnapshotError(f"store {store_path}: no outcome rows{' from ' + ', '.join(sources) if sources else ''}; "
                            "import some (`mashbill router outcomes --import`) or run an outcome spec. Nothing was written.")
    rejects: list[dict] = []
    cols = table.to_pydict()
    allowed = set(recipe.models) if recipe.models else None
    keep: dict[tuple[str, str], int] = {}
    for i, (q, m, src) in enumerate(zip(cols["query_id"], cols["model"], cols["source"])):
        if allowed is not None and m not in allowed:
            rejects.append({"where": f"{src} query {q}", "code": "OUT002", "detail": f"unknown model {m!r}"})
        elif q not in texts:
            rejects.append({"where": f"{src} query {q}", "code": "OUT003", "detail": "query id not in router_queries"})
        elif (q, m) in keep:  # the same model on the same query from two sources: the first source (by name) wins
            rejects.append({"where": f"{src} query {q}", "code": "OUT004",
                            "detail": f"model {m!r} already has an outcome for this query from "
                                      f"{cols['source'][keep[(q, m)]]}"})
        else:
            keep[(q, m)] = i
    idx = sorted(keep.values())
    if len(idx) != table.num_rows:
        table = table.take(pa.array(idx, pa.int64()))
        cols = {k: [v[i] for i in idx] for k, v in cols.items()}
    models = sorted(set(cols["model"]))
    missing_hold = sorted(set(recipe.splits.hold_out_models) - set(models))
    if missing_hold:
        raise SnapshotError(f"{rr.ref}: held-out model(s) {missing_hold} have no outcome rows (models: {models})")

    # per-model cost for rows without their own: the recipe's price, else the model's mean over its rows
    row_costs = defaultdict(list)
    for m, c in zip(cols["model"], cols["cost"]):
        if c is not None:
            row_costs[m].append(c)
    model_cost = {m: recipe.model_costs.get(m, float(np.mean(row_costs[m])) if row_costs[m] else None) for m in models}
    per_query: dict[str, dict[str, bool]] = defaultdict(dict)
    per_query_cost: dict[str, dict[str, float | None]] = defaultdict(dict)
    for q, m, ok, c in zip(cols["query_id"], cols["model"], cols["correct"], cols["cost"]):
        per_query[q][m] = bool(ok)
        per_query_cost[q][m] = c if c is not None else model_cost[m]
    qids = sorted(per_query)
    label = {q: _cheapest_correct(list(per_query[q]), list(per_query[q].values()), list(per_query_cost[q].values()))
             for q in qids}
    assignment, split_stats = split_queries(qids, [texts[q] for q in qids], [label[q] for q in qids], rr)

    enc = encoder or Encoder.load(rr.encoder_path())
    got = EmbeddingCache(Path(store_path) / "embeddings").get(enc, {q: texts[q] for q in qids})
    for p in got.problems:
        rejects.append({"where": p.split(": ", 1)[0], "code": p.split(": ", 1)[1][:6], "detail": p})

    held = set(recipe.splits.hold_out_models)
    split_of_row = np.array([assignment[q] for q in cols["query_id"]], dtype=object)
    held_row = np.array([m in held for m in cols["model"]])
    drop = held_row & (split_of_row != "test")
    tables: dict[str, pa.Table] = {}
    counts: dict[str, int] = {}
    query_counts: dict[str, int] = {}
    for s in SPLITS:
        mask = (split_of_row == s) & ~drop
        t = table.filter(pa.array(mask))
        tables[f"data/{s}.parquet"] = t
        counts[s] = t.num_rows
        qs = [q for q in qids if assignment[q] == s]
        query_counts[s] = len(qs)
        tables[f"queries/{s}.parquet"] = pa.table({
            "query_id": qs, "text": [texts[q] for q in qs], "cheapest_correct": [label[q] for q in qs],
            "models_correct": [sorted(m for m, ok in per_query[q].items() if ok and (m not in held or s == "test"))
                               for q in qs],
            "n_models": pa.array([sum(1 for m in per_query[q] if m not in held or s == "test") for q in qs], pa.int32()),
        })
    held_dropped = int(drop.sum())
    tables["embeddings.parquet"] = embedding_table(qids, got.matrix)
    train_q = {q: {m: ok for m, ok in per_query[q].items() if m not in held} for q in qids if assignment[q] == "train"}
    wm = win_matrix(train_q, [m for m in models if m not in held])
    rows_per_model = Counter(cols["model"])
    n_correct = pc.sum(pc.cast(table.column("correct"), pa.int64())).as_py() or 0
    extra = {
        "models": [{"name": m, "rows": rows_per_model[m], "cost_per_query": model_cost[m], "held_out": m in held}
                   for m in models],
        "splits": {**split_stats, "queries": query_counts, "held_out_models": sorted(held),
                   "held_out_rows_dropped": held_dropped},
        "embeddings": {**enc.info(), "file": "embeddings.parquet", "queries": len(qids), "cache_hits": got.hits,
                       "computed": got.computed},
        "labels": {"cheapest_correct": dict(sorted(_count(label.values()).items())), "rows_correct": n_correct},
        "sources": sorted(set(cols["source"])),
    }
    body = ["## Contents", "", f"{len(qids)} queries x {len(models)} models: {table.num_rows - held_dropped} outcome "
            f"rows (train {counts['train']}, eval {counts['eval']}, test {counts['test']}); one {enc.dims}-dim "
            f"embedding per query ({enc.name}, revision {enc.revision}) in `embeddings.parquet`, referenced by "
            "`query_id`.", "", "Models: " + ", ".join(f"`{m}`" + (" (held out: test only)" if m in held else "")
                                                      for m in models), ""]
    return write_router_snapshot(rr, root=root, name=name, version=version, tables=tables,
                                 plain=("embeddings.parquet",), documents={"win_matrix.json": wm}, rejects=rejects, extra=extra, split_counts=counts,
                                 card=card_text("router outcome", "outcomes", f"{name}@{version}", str(store_path),
                                                body, "router"))


def _count(values) -> dict:
    out: dict = defaultdict(int)
    for v in values:
        out[v] += 1
    return out
