"""Orchestrator logs replayed from an outcome table: a cheapest-first cascade over the recipe's actions.

Real orchestrator logs come from a running orchestrator. Until those are at hand, the store's outcome
table says what each model would have done on each query, so a cascade (call the cheapest model, stop at
the first correct answer, else escalate) can be replayed into logs of the documented schema
(orchestrator-log@1): one request per query with outcomes, one step per model called. The judge
confidence of a step is the judge's score when there is one, else 1.0 for a correct answer and 0.0
for a wrong one; latency and cost are the row's own, else 0.0 and the recipe's `model_costs`.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

from mashbill.factory.store import Store
from mashbill.specs.router import ResolvedRecipe


def cascade_logs(store: Store, rr: ResolvedRecipe, out_path: Path) -> dict:
    actions = list(rr.recipe.actions)
    costs = rr.recipe.model_costs
    all_texts = store.router_texts()
    outcomes = store.router_outcomes().to_pylist()
    rows = [(o["query_id"], all_texts[o["query_id"]], o["model"], o["correct"], o["score"], o["cost"], o["latency_s"])
            for o in outcomes if o["query_id"] in all_texts]
    per_query: dict[str, dict] = defaultdict(dict)
    texts = {}
    for qid, text, model, ok, score, cost, lat in rows:
        if model in actions and model not in per_query[qid]:
            per_query[qid][model] = (ok, score, cost, lat)
            texts[qid] = text

    def price(model: str, row_cost) -> float:
        return float(row_cost if row_cost is not None else costs.get(model, 0.0))

    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".tmp")
    requests = steps = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for qid in sorted(per_query):
            models = sorted(per_query[qid], key=lambda m: (price(m, per_query[qid][m][2]), actions.index(m)))
            trail = []
            for m in models:
                ok, score, cost, lat = per_query[qid][m]
                conf = float(score) if score is not None else (1.0 if ok else 0.0)
                trail.append({"action": m, "judge_confidence": conf, "latency_s": float(lat or 0.0),
                              "cost": price(m, cost)})
                if ok:
                    break
            if not trail:
                continue
            f.write(json.dumps({"request_id": f"cascade-{qid}", "query_id": qid, "query": texts[qid],
                                "steps": trail}, ensure_ascii=False) + "\n")
            requests += 1
            steps += len(trail)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(out_path)
    return {"path": str(out_path), "requests": requests, "steps": steps}
