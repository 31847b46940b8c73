"""Offline-RL transitions for a routing policy, replayed from orchestrator logs.

A log is JSONL, one request per line, validated against the recipe's JSON Schema
(`specs/library/shared/schemas/orchestrator-log@1.json`). Step t of a request is one expert call; its
transition is (state_t, action_t, reward_t, state_t+1, done):

    state_t  = [t, one-hot of the previous action (index 0: none), elapsed latency / latency_scale_s, cost so far]
    reward_t = confidence_weight * judge_confidence * (1 - min(latency_s / latency_scale_s, 1)) - cost_weight * cost

with the weights from the recipe's `reward:` section. The query's embedding (one per query id, from the
embedding cache) is stored once in `embeddings.parquet`; `load_snapshot(..., format="transitions")`
puts it in front of the state features. Checks, each named by file:line and counted: LOG001 a line that
is not JSON or breaks the schema; TRN001 a non-finite value; TRN002 an action outside the recipe's list;
TRN003 a request id seen before (its transitions would cross requests). A bad line drops that request
only. `check_transitions` re-checks a built table (finite, in range, never crossing requests).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa

from mashbill.curation.router.router_snapshot import card_text, split_queries, write_router_snapshot
from mashbill.curation.selection.split import SPLITS
from mashbill.curation.snapshots.snapshot import FreezeResult, SnapshotError
from mashbill.factory.encoders.embeddings import EmbeddingCache, Encoder, embedding_table
from mashbill.factory.router.outcomes import query_id as make_query_id
from mashbill.specs.router import ResolvedRecipe, Reward

VEC = pa.list_(pa.float32())


def state_dims(n_actions: int) -> int:
    return 1 + (n_actions + 1) + 2


def reward_of(r: Reward, confidence: float, latency_s: float, cost: float) -> float:
    return (r.confidence_weight * confidence * (1.0 - min(latency_s / r.latency_scale_s, 1.0))
            - r.cost_weight * cost)


@dataclass
class Ingested:
    rows: list[dict] = field(default_factory=list)
    queries: dict[str, str] = field(default_factory=dict)  # query id -> text (when the log has it)
    problems: list[dict] = field(default_factory=list)
    lines: int = 0
    requests: int = 0


def _state(t: int, prev: int | None, elapsed: float, cost: float, n_actions: int, scale: float) -> list[float]:
    v = [0.0] * state_dims(n_actions)
    v[0] = float(t)
    v[1 + (0 if prev is None else prev + 1)] = 1.0
    v[-2] = elapsed / scale
    v[-1] = cost
    return v


def ingest_logs(paths: Iterable[str | Path], rr: ResolvedRecipe) -> Ingested:
    import jsonschema

    recipe = rr.recipe
    validator = jsonschema.validators.validator_for(rr.log_schema)(rr.log_schema)
    index = {a: i for i, a in enumerate(recipe.actions)}
    n = len(recipe.actions)
    scale = recipe.reward.latency_scale_s
    out = Ingested()
    seen: dict[str, str] = {}
    for path in map(Path, paths):
        if not path.is_file():
            raise SnapshotError(f"{path}: no such log file")
        with path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                out.lines += 1
                where = f"{path}:{lineno}"

                def bad(code: str, detail: str) -> None:
                    out.problems.append({"where": where, "code": code, "detail": detail})

                try:
                    req = json.loads(line)
                except json.JSONDecodeError as exc:
                    bad("LOG001", f"not JSON: {exc.msg} at char {exc.pos}")
                    continue
                err = next(iter(sorted(validator.iter_errors(req), key=lambda e: list(e.absolute_path))), None)
                if err is not None:
                    at = "/".join(map(str, err.absolute_path)) or "(root)"
                    bad("LOG001", f"{at}: {err.message[:200]}")
                    continue
                rid = req["request_id"]
                if rid in seen:
                    bad("TRN003", f"request_id {rid!r} already seen at {seen[rid]}; its transitions would cross "
                                  "requests, this line is left out")
                    continue
                seen[rid] = where
                steps, problem = [], None
                for t, step in enumerate(req["steps"]):
                    action = step["action"]
                    a = index.get(action) if isinstance(action, str) else action
                    if a is None or not 0 <= a < n:
                        problem = ("TRN002", f"steps/{t}/action {action!r} is not one of the {n} actions "
                                             f"({', '.join(recipe.actions[:8])}{'...' if n > 8 else ''})")
                        break
                    values = [step["judge_confidence"], step["latency_s"], step["cost"]]
                    if not all(math.isfinite(float(x)) for x in values):
                        problem = ("TRN001", f"steps/{t}: non-finite judge_confidence/latency_s/cost {values}")
                        break
                    steps.append((a, *map(float, values)))
                if problem:
                    bad(*problem)
                    continue
                qid = req.get("query_id") or make_query_id(req["query"])
                if req.get("query"):
                    out.queries.setdefault(qid, req["query"])
                elapsed = spent = 0.0
                prev = None
                states = []
                for t, (a, conf, lat, cost) in enumerate(steps):
                    states.append(_state(t, prev, elapsed, spent, n, scale))
                    elapsed += lat
                    spent += cost
                    prev = a
                states.append(_state(len(steps), prev, elapsed, spent, n, scale))
                for t, (a, conf, lat, cost) in enumerate(steps):
                    rew = reward_of(recipe.reward, conf, lat, cost)
                    if not math.isfinite(rew):
                        problem = ("TRN001", f"steps/{t}: reward is not finite")
                        break
                    out.rows.append({"request_id": rid, "query_id": qid, "step": t, "state": states[t], "action": a,
                                     "reward": rew, "next_state": states[t + 1], "done": t == len(steps) - 1,
                                     "judge_confidence": conf, "latency_s": lat, "cost": cost})
                if problem:
                    out.rows = [r for r in out.rows if r["request_id"] != rid]
                    bad(*problem)
                    continue
                out.requests += 1
    return out


def check_transitions(table: pa.Table, n_actions: int) -> list[dict]:
    """Problems in a built transition table: non-finite numbers, actions out of range, crossing requests."""
    problems = []
    cols = table.to_pydict()
    n = table.num_rows
    for i in range(n):
        where = f"row {i} (request {cols['request_id'][i]}, step {cols['step'][i]})"
        nums = [cols["reward"][i], *cols["state"][i], *cols["next_state"][i]]
        if not all(math.isfinite(x) for x in nums):
            problems.append({"where": where, "code": "TRN001", "detail": "non-finite reward or state"})
        if not 0 <= cols["action"][i] < n_actions:
            problems.append({"where": where, "code": "TRN002", "detail": f"action {cols['action'][i]} out of range"})
        if not cols["done"][i]:
            nxt = i + 1
            if (nxt >= n or cols["request_id"][nxt] != cols["request_id"][i] or cols["step"][nxt] != cols["step"][i] + 1
                    or cols["state"][nxt] != cols["next_state"][i]):
                problems.append({"where": where, "code": "TRN003",
                                 "detail": "next_state is not the next step of the same request"})
    return problems


def freeze_transitions(rr: ResolvedRecipe, logs: list[str | Path], store_path: str | Path, *, name: str,
                       version: str, out_dir: str | Path | None = None, encoder: Encoder | None = None) -> FreezeResult:
    recipe = rr.recipe
    root = Path(out_dir) if out_dir is not None else Path(store_path) / "snapshots"
    ing = ingest_logs(logs, rr)
    if not ing.rows:
        codes = ", ".join(f"{p['code']} at {p['where']}" for p in ing.problems[:3])
        raise SnapshotError(f"no valid transitions in {len(logs)} log file(s) ({ing.lines} lines; {codes}). "
                            "Nothing was written.")
    qids = sorted({r["query_id"] for r in ing.rows})
    texts = [ing.queries.get(q, q) for q in qids]
    first_action = {}
    for r in ing.rows:
        if r["step"] == 0:
            first_action.setdefault(r["query_id"], recipe.actions[r["action"]])
    assignment, split_stats = split_queries(qids, texts, [first_action.get(q, "") for q in qids], rr)
    with_text = [q for q in qids if q in ing.queries]
    tables: dict[str, pa.Table] = {}
    emb_info = None
    if with_text:
        enc = encoder or Encoder.load(rr.encoder_path())
        Path(store_path).mkdir(parents=True, exist_ok=True)
        got = EmbeddingCache(Path(store_path) / "embeddings").get(enc, {q: ing.queries[q] for q in with_text})
        tables["embeddings.parquet"] = embedding_table(with_text, got.matrix)
        emb_info = {**enc.info(), "file": "embeddings.parquet", "queries": len(with_text), "cache_hits": got.hits,
                    "computed": got.computed}
    schema = pa.schema([("request_id", pa.string()), ("query_id", pa.string()), ("step", pa.int32()),
                        ("state", VEC), ("action", pa.int64()), ("reward", pa.float32()), ("next_state", VEC),
                        ("done", pa.bool_()), ("judge_confidence", pa.float32()), ("latency_s", pa.float32()),
                        ("cost", pa.float32())])
    counts = {}
    rejects = list(ing.problems)
    for s in SPLITS:
        rows = sorted((r for r in ing.rows if assignment[r["query_id"]] == s), key=lambda r: (r["request_id"], r["step"]))
        t = pa.Table.from_pylist(rows, schema=schema)
        bad = check_transitions(t, len(recipe.actions))
        if bad:  # a bug in the builder, never bad input: refuse to write
            raise SnapshotError(f"built transitions fail their checks: {bad[0]}")
        tables[f"data/{s}.parquet"] = t
        counts[s] = t.num_rows
    rewards = np.array([r["reward"] for r in ing.rows], np.float64)
    extra = {"actions": list(recipe.actions), "reward": recipe.reward.model_dump(),
             "state": {"dims": state_dims(len(recipe.actions)),
                       "features": ["step", "prev_action_onehot[none+actions]", "elapsed_latency/latency_scale_s",
                                    "cost_so_far"], "embedding_first": emb_info is not None},
             "logs": {"files": [str(p) for p in logs], "lines": ing.lines, "requests": ing.requests,
                      "transitions": len(ing.rows)},
             "rewards": {"mean": float(rewards.mean()), "min": float(rewards.min()), "max": float(rewards.max())},
             "splits": split_stats, "embeddings": emb_info}
    body = ["## Contents", "", f"{len(ing.rows)} transitions from {ing.requests} requests ({ing.lines} log lines); "
            f"actions: {', '.join(recipe.actions)}.", "",
            f"reward = {recipe.reward.confidence_weight} x judge_confidence x (1 - min(latency_s / "
            f"{recipe.reward.latency_scale_s}, 1)) - {recipe.reward.cost_weight} x cost", ""]
    return write_router_snapshot(rr, root=root, name=name, version=version, tables=tables,
                                 plain=("embeddings.parquet",), rejects=rejects, extra=extra, split_counts=counts,
                                 card=card_text("routing-policy transition", "transitions", f"{name}@{version}",
                                                str(store_path), body, "transitions"))
