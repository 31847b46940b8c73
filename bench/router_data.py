"""Router data at the size of the reference's model router: 15,339 queries x 18 models of synthetic outcomes.

Measures, side by side in one run:
- outcome import (our checked import into the store) against a bare pyarrow read of the same file;
- query embedding (MiniLM through onnxruntime) cold, then the cache on a re-run with 10% new queries;
- one outcome snapshot freeze (splits with near-duplicate groups, labels, win matrix, Parquet, hashes),
  and the bytes its embeddings take against queries x dims x 4 and against one copy per outcome row;
- transition ingest (schema check, rewards, states) from synthetic orchestrator logs.

    .venv/bin/python bench/router_data.py [--queries 15339] [--models 18] [--rows 231750] [--requests 20000]

The last line is machine-readable: outcome_rows_per_s= embed_queries_per_s= cache_hit_rate= transitions_per_s= ...
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from mashbill.curation.router.router_data import freeze_outcomes
from mashbill.curation.router.transitions import ingest_logs
from mashbill.factory.encoders.embeddings import EmbeddingCache, Encoder
from mashbill.factory.router.outcome_import import import_outcomes
from mashbill.factory.router.outcomes import query_id
from mashbill.factory.store import Store
from mashbill.specs.router import LIBRARY, load_recipe

SUBJECTS = ["algebra", "anatomy", "tax law", "poetry", "python", "chess", "astronomy", "cooking", "networking",
            "history", "statistics", "German grammar", "contracts", "genetics", "music theory", "marketing"]
VERBS = ["Explain", "Summarise", "Compare", "Give an example of", "What is", "How do I learn", "Critique"]


def texts(n: int, seed: int = 0) -> list[str]:
    """Distinct questions of varied wording (random words from syllables), so near-duplicate grouping sees
    what it sees on real queries: mostly singletons, not one template repeated 15,000 times."""
    rng = random.Random(seed)
    syll = ["ka", "lo", "mi", "ten", "ra", "vus", "de", "sho", "pri", "gan", "el", "tor", "bi", "nu", "qua", "zer"]
    words = sorted({"".join(rng.choice(syll) for _ in range(rng.randint(2, 4))) for _ in range(4000)})
    return [f"{rng.choice(VERBS)} {rng.choice(SUBJECTS)}: " + " ".join(rng.choice(words) for _ in range(rng.randint(4, 12)))
            + "?" for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=15339)
    ap.add_argument("--models", type=int, default=18)
    ap.add_argument("--rows", type=int, default=231750)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    rng = random.Random(1)
    work = Path(tempfile.mkdtemp(prefix="mb-router-bench-"))
    qtexts = texts(a.queries)
    models = [f"model-{k:02d}" for k in range(a.models)]
    skill = {m: 0.3 + 0.6 * k / max(1, a.models - 1) for k, m in enumerate(models)}
    pairs = [(i, m) for i in range(a.queries) for m in models]
    rng.shuffle(pairs)
    pairs = sorted(pairs[:a.rows])
    table = pa.table({"query": [qtexts[i] for i, _ in pairs], "model": [m for _, m in pairs],
                      "correct": [rng.random() < skill[m] for _, m in pairs],
                      "cost": [0.0001 * (1 + models.index(m)) ** 2 for _, m in pairs],
                      "latency_s": [rng.uniform(0.2, 8.0) for _ in pairs]})
    src = work / "outcomes.parquet"
    pq.write_table(table, src)

    t0 = time.perf_counter()
    bare = pq.read_table(src).to_pylist()
    bare_s = time.perf_counter() - t0
    store = work / "store"
    t0 = time.perf_counter()
    with Store.open(store) as s:
        (imp,) = import_outcomes(s, [src], models=models)
    import_s = time.perf_counter() - t0
    rows_per_s = imp.rows_kept / import_s
    print(f"outcome import: {imp.rows_kept} rows, {imp.queries} queries in {import_s:.2f}s ({rows_per_s:,.0f} rows/s); "
          f"bare pyarrow read to dicts {bare_s:.2f}s -> ours is {import_s / bare_s:.1f}x the bare read")

    enc = Encoder.load(threads=a.threads)
    cache = EmbeddingCache(store / "embeddings")
    ids = [query_id(t) for t in qtexts]
    first = int(len(ids) * 0.9)
    t0 = time.perf_counter()
    cold = cache.get(enc, dict(zip(ids[:first], qtexts[:first])))
    embed_s = time.perf_counter() - t0
    embed_rate = cold.computed / embed_s
    print(f"embedding: {cold.computed} queries in {embed_s:.1f}s ({embed_rate:,.0f} queries/s, {enc.name} rev "
          f"{enc.revision}, {enc.dims} dims, onnxruntime CPU)")

    recipe = work / "bench-out@1.yaml"
    recipe.write_text(yaml.safe_dump({"dataset": "outcomes", "name": "bench-out", "version": 1, "models": models}))
    rr = load_recipe(recipe)
    t0 = time.perf_counter()
    res = freeze_outcomes(rr, store, name="bench-out", version="1", encoder=enc)
    freeze_s = time.perf_counter() - t0
    e = res.manifest["embeddings"]
    hit_rate = e["cache_hits"] / (e["cache_hits"] + e["computed"])
    emb_bytes = (res.path / "embeddings.parquet").stat().st_size
    ideal = a.queries * enc.dims * 4
    per_row = imp.rows_kept * enc.dims * 4
    print(f"freeze: {freeze_s:.1f}s for {imp.rows_kept} rows x {a.queries} queries (its embedding step: "
          f"{e['cache_hits']} from cache, {e['computed']} new, hit rate {hit_rate:.3f})")
    print(f"embeddings on disk: {emb_bytes:,} bytes = {emb_bytes / ideal:.4f} x queries*dims*4 ({ideal:,}); "
          f"one copy per outcome row would be {per_row:,} bytes ({per_row / emb_bytes:.1f}x more)")

    t0 = time.perf_counter()
    res2 = freeze_outcomes(rr, store, name="bench-out", version="2", encoder=enc)
    cached_s = time.perf_counter() - t0
    print(f"freeze again, every embedding cached ({res2.manifest['embeddings']['cache_hits']} hits): {cached_s:.1f}s; "
          f"the first freeze, which embedded {e['computed']} new queries, took {freeze_s / cached_s:.1f}x as long")

    schema_path = LIBRARY / "shared" / "schemas" / "orchestrator-log@1.json"
    trecipe = work / "bench-trn@1.yaml"
    trecipe.write_text(yaml.safe_dump({"dataset": "transitions", "name": "bench-trn", "version": 1, "actions": models,
                                       "log_schema": str(schema_path)}))
    trr = load_recipe(trecipe)
    logs = work / "logs.jsonl"
    n_steps = 0
    with open(logs, "w", encoding="utf-8") as f:
        for r in range(a.requests):
            k = rng.randint(1, 5)
            n_steps += k
            f.write(json.dumps({"request_id": f"r{r}", "query": qtexts[r % len(qtexts)],
                                "steps": [{"action": rng.choice(models), "judge_confidence": rng.random(),
                                           "latency_s": rng.uniform(0.1, 20), "cost": rng.uniform(0, 0.05)}
                                          for _ in range(k)]}) + "\n")
    t0 = time.perf_counter()
    ing = ingest_logs([logs], trr)
    trn_s = time.perf_counter() - t0
    trn_rate = len(ing.rows) / trn_s
    print(f"transitions: {len(ing.rows)} from {ing.requests} requests in {trn_s:.2f}s ({trn_rate:,.0f}/s), "
          f"{len(ing.problems)} problems")
    print(f"outcome_rows_per_s={rows_per_s:.0f} embed_queries_per_s={embed_rate:.1f} cache_hit_rate={hit_rate:.4f} "
          f"transitions_per_s={trn_rate:.0f} freeze_s={cached_s:.2f} freeze_with_new_embeddings_s={freeze_s:.2f} "
          f"embedding_bytes_ratio={emb_bytes / ideal:.4f} "
          f"queries={a.queries} outcome_rows={imp.rows_kept}")


if __name__ == "__main__":
    main()
