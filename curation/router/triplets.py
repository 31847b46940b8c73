"""(query, positive category description, hard negative) triplets for a bi-encoder semantic router.

Positives come from a routing or plan spec's selected records (validated, and reviewed where the spec
requires it: `curation.selection.select`): every category the teacher routed the query to, described by the
recipe's taxonomy. Hard negatives are mined with the embedding cache: the wrong categories whose
descriptions lie nearest to the query's embedding (cosine), `negatives_per_query` of them per positive.
TRP001 marks a record whose categories are none of the taxonomy's (left out, named by record id).
Splits are by query id, so a query's triplets are on one side.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from mashbill.curation.router.router_snapshot import card_text, split_queries, write_router_snapshot
from mashbill.curation.selection.labels import classification_label
from mashbill.curation.selection.select import select_records
from mashbill.curation.selection.split import SPLITS
from mashbill.curation.snapshots.snapshot import FreezeResult, SnapshotError
from mashbill.factory.encoders.embeddings import EmbeddingCache, Encoder
from mashbill.factory.router.outcomes import query_id
from mashbill.factory.store import Store
from mashbill.hashing import sha256_text
from mashbill.specs import find_spec, load_spec
from mashbill.specs.router import ResolvedRecipe

SCHEMA = pa.schema([("query_id", pa.string()), ("record_id", pa.string()), ("anchor", pa.string()),
                    ("positive_category", pa.string()), ("positive", pa.string()),
                    ("negative_category", pa.string()), ("negative", pa.string()),
                    ("positive_similarity", pa.float32()), ("negative_similarity", pa.float32())])


def category_descriptions(rr: ResolvedRecipe) -> dict[str, str]:
    tax = rr.taxonomy
    out = dict(tax.categories)
    out.update({k: v.description for k, v in tax.structural.items()})
    return out


def freeze_triplets(rr: ResolvedRecipe, store_path: str | Path, *, name: str, version: str,
                    out_dir: str | Path | None = None, encoder: Encoder | None = None) -> FreezeResult:
    recipe = rr.recipe
    root = Path(out_dir) if out_dir is not None else Path(store_path) / "snapshots"
    src = load_spec(find_spec(recipe.source_spec))
    if src.spec.kind not in ("routing", "plan"):
        raise SnapshotError(f"{rr.ref}: source_spec {src.ref} is kind {src.spec.kind}; triplets need routing or plan")
    with Store.open(store_path, read_only=True) as store:
        sel = select_records(store, src)
    cats = category_descriptions(rr)
    names = sorted(cats)
    rejects = [{"where": f"record {x.record_id[:16]}", "code": x.codes[0] if x.codes else "EXCLUDED",
                "detail": f"not selected from {src.ref}: {x.detail[:200]}"} for x in sel.excluded]
    positives: list[tuple[str, str, str, str]] = []  # (query id, record id, query, category)
    for cand in sel.candidates:
        rec = cand.record
        labels = classification_label(src.spec.kind, cand.output, rec.meta) or []
        known = [c for c in labels if c in cats]
        if not known:
            rejects.append({"where": f"record {rec.id[:16]}", "code": "TRP001",
                            "detail": f"categories {labels} are none of the taxonomy's ({len(cats)} known)"})
            continue
        q = rec.input.get("query", "")
        for c in known:
            positives.append((query_id(q), rec.id, q, c))
    if not positives:
        raise SnapshotError(f"{rr.ref}: no record of {src.ref} in {store_path} gives a positive category "
                            f"({len(sel.candidates)} selected, {len(sel.excluded)} excluded). Nothing was written.")
    enc = encoder or Encoder.load(rr.encoder_path())
    cache = EmbeddingCache(Path(store_path) / "embeddings")
    texts = {p[0]: p[2] for p in positives}
    qgot = cache.get(enc, texts)
    cat_ids = {c: "cat-" + sha256_text(cats[c])[:16] for c in names}
    cgot = cache.get(enc, {cat_ids[c]: cats[c] for c in names})
    qvec = dict(zip(qgot.ids, qgot.matrix))
    cmat = cgot.matrix  # rows in `names` order
    pos_of: dict[str, set[str]] = {}
    for qid, _, _, c in positives:
        pos_of.setdefault(qid, set()).add(c)
    rows = []
    for qid, rid, q, c in positives:
        sims = cmat @ qvec[qid]
        wrong = [i for i in np.argsort(-sims, kind="stable") if names[i] not in pos_of[qid]]
        for i in wrong[:recipe.negatives_per_query]:
            rows.append({"query_id": qid, "record_id": rid, "anchor": q, "positive_category": c, "positive": cats[c],
                         "negative_category": names[i], "negative": cats[names[i]],
                         "positive_similarity": float(sims[names.index(c)]), "negative_similarity": float(sims[i])})
    qids = sorted(pos_of)
    first_cat = {qid: sorted(pos_of[qid])[0] for qid in qids}
    assignment, split_stats = split_queries(qids, [texts[q] for q in qids], [first_cat[q] for q in qids], rr)
    tables, counts = {}, {}
    for s in SPLITS:
        part = sorted((r for r in rows if assignment[r["query_id"]] == s),
                      key=lambda r: (r["query_id"], r["positive_category"], r["negative_category"]))
        tables[f"data/{s}.parquet"] = pa.Table.from_pylist(part, schema=SCHEMA)
        counts[s] = len(part)
    harder = sum(r["negative_similarity"] > r["positive_similarity"] for r in rows)
    extra = {"source": {"spec": src.ref, "hash": src.hash, "selected": len(sel.candidates),
                        "excluded": len(sel.excluded), "run_ids": sel.run_ids, "validation_ids": sel.validation_ids},
             "categories": names, "negatives_per_query": recipe.negatives_per_query,
             "mining": {"negative_closer_than_positive": int(harder), "triplets": len(rows)},
             "splits": split_stats, "embeddings": {**enc.info(), "queries": len(qids), "cache_hits": qgot.hits,
                                                   "computed": qgot.computed}}
    body = ["## Contents", "", f"{len(rows)} triplets over {len(qids)} queries from {src.ref}; hard negatives are the "
            f"wrong categories nearest to the query under {enc.name} (revision {enc.revision}); in {harder} of them "
            "the negative is closer to the query than the positive.", ""]
    spec_entry = {"name": src.spec.name, "version": src.spec.version, "hash": src.hash, "kind": src.spec.kind,
                  "role": "source", "path": "", "files": {}}
    return write_router_snapshot(rr, root=root, name=name, version=version, tables=tables, rejects=rejects,
                                 extra=extra, split_counts=counts, extra_specs=[spec_entry],
                                 card=card_text("bi-encoder triplet", "triplets", f"{name}@{version}", str(store_path),
                                                body, "triplets"))
