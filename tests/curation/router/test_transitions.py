"""Routing-policy transitions from orchestrator logs: schema, reward formula, checks, splits, cascade replay."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from mashbill.curation.router.router_logs import cascade_logs
from mashbill.curation.router.transitions import check_transitions, freeze_transitions, ingest_logs, state_dims
from mashbill.curation.snapshots.pull import load_snapshot
from mashbill.curation.snapshots.snapshot import SnapshotError, verify
from mashbill.factory.router.outcome_import import import_outcomes
from mashbill.factory.store import Store
from mashbill.specs.router import LIBRARY, load_recipe

ACTIONS = ["small", "large"]


def recipe(tmp_path: Path) -> Path:
    data = {"dataset": "transitions", "name": "rt-trn", "version": 1, "actions": ACTIONS,
            "log_schema": str(LIBRARY / "shared" / "schemas" / "orchestrator-log@1.json"),
            "reward": {"confidence_weight": 2.0, "latency_scale_s": 10.0, "cost_weight": 0.5},
            "model_costs": {"small": 0.01, "large": 0.2}, "splits": {"near_duplicates": False}}
    p = tmp_path / "rt-trn@1.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


def step(action, conf, lat, cost):
    return {"action": action, "judge_confidence": conf, "latency_s": lat, "cost": cost}


def logs(tmp_path: Path) -> Path:
    lines = [
        json.dumps({"request_id": "r1", "query": "What is 17 * 23?", "steps": [step("small", 0.2, 1.0, 0.01),
                                                                                step("large", 0.9, 5.0, 0.2)]}),
        json.dumps({"request_id": "r2", "query": "Write a haiku about rain.", "steps": [step("small", 0.8, 20.0, 0.0)]}),
        json.dumps({"request_id": "r3", "query": "Fix my Docker build", "steps": [step(1, 1.0, 2.0, 0.3)]}),
        '{"request_id": "r4", "query": "NaN here", "steps": [{"action": "small", "judge_confidence": 0.5, '
        '"latency_s": NaN, "cost": 0.0}]}',
        json.dumps({"request_id": "r5", "query": "Unknown expert", "steps": [step("medium", 0.5, 1.0, 0.0)]}),
        json.dumps({"request_id": "r1", "query": "What is 17 * 23?", "steps": [step("small", 0.5, 1.0, 0.0)]}),
        json.dumps({"request_id": "r6", "query": "No steps", "steps": []}),
        json.dumps({"request_id": "r7", "query": "Confidence 3", "steps": [step("small", 3, 1.0, 0.0)]}),
        "not json at all",
    ]
    p = tmp_path / "orchestrator.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def expected_reward(conf, lat, cost):  # the formula with this recipe's weights
    return 2.0 * conf * (1 - min(lat / 10.0, 1)) - 0.5 * cost


def test_ingest_computes_rewards_and_names_bad_lines(tmp_path):
    rr = load_recipe(recipe(tmp_path))
    log = logs(tmp_path)
    ing = ingest_logs([log], rr)
    assert ing.lines == 9 and ing.requests == 3 and len(ing.rows) == 4
    assert {(p["code"], p["where"]) for p in ing.problems} == {
        ("TRN001", f"{log}:4"), ("TRN002", f"{log}:5"), ("TRN003", f"{log}:6"), ("LOG001", f"{log}:7"),
        ("LOG001", f"{log}:8"), ("LOG001", f"{log}:9")}
    r1 = [r for r in ing.rows if r["request_id"] == "r1"]
    assert [r["reward"] for r in r1] == pytest.approx([expected_reward(0.2, 1.0, 0.01), expected_reward(0.9, 5.0, 0.2)])
    assert [r["action"] for r in r1] == [0, 1] and [r["done"] for r in r1] == [False, True]
    assert r1[0]["next_state"] == r1[1]["state"]
    dims = state_dims(len(ACTIONS))
    assert r1[0]["state"] == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0] and len(r1[0]["state"]) == dims
    assert r1[1]["state"] == [1.0, 0.0, 1.0, 0.0, 0.1, 0.01]  # after `small`: 1 s of 10, cost 0.01
    r2 = next(r for r in ing.rows if r["request_id"] == "r2")
    assert r2["reward"] == pytest.approx(0.0)  # latency beyond the scale leaves only the cost term
    r3 = next(r for r in ing.rows if r["request_id"] == "r3")
    assert r3["action"] == 1  # an index is accepted as the action


def test_check_transitions_catches_crossing_and_bad_values():
    schema = pa.schema([("request_id", pa.string()), ("step", pa.int32()), ("state", pa.list_(pa.float32())),
                        ("action", pa.int64()), ("reward", pa.float32()), ("next_state", pa.list_(pa.float32())),
                        ("done", pa.bool_())])
    rows = [{"request_id": "a", "step": 0, "state": [0.0], "action": 0, "reward": 1.0, "next_state": [1.0],
             "done": False},
            {"request_id": "b", "step": 0, "state": [1.0], "action": 5, "reward": float("nan"), "next_state": [2.0],
             "done": True}]
    codes = sorted(p["code"] for p in check_transitions(pa.Table.from_pylist(rows, schema=schema), 2))
    assert codes == ["TRN001", "TRN002", "TRN003"]


def test_freeze_transitions_and_load_for_pytorch(tmp_path, minilm):
    rr = load_recipe(recipe(tmp_path))
    res = freeze_transitions(rr, [logs(tmp_path)], tmp_path / "store", name="rt-trn", version="1", encoder=minilm)
    m = verify(res.path)
    assert m["kind"] == "transitions" and sum(m["splits"]["counts"].values()) == 4
    assert m["rejects"]["by_code"] == {"LOG001": 3, "TRN001": 1, "TRN002": 1, "TRN003": 1}
    per_request: dict[str, set] = {}
    for s in ("train", "eval", "test"):
        for r in pq.read_table(res.path / "data" / f"{s}.parquet").to_pylist():
            per_request.setdefault(r["request_id"], set()).add(s)
    assert all(len(v) == 1 for v in per_request.values())
    assert pq.read_table(res.path / "embeddings.parquet").num_rows == 3
    dd = load_snapshot("rt-trn@1", store=tmp_path / "store")
    ds = next(dd[s] for s in dd if dd[s].num_rows)
    row = ds.with_format("numpy")[0]
    assert row["state"].shape == (384 + state_dims(2),) and row["next_state"].shape == row["state"].shape
    assert set(ds.column_names) >= {"state", "action", "reward", "next_state", "done"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("nope\n", encoding="utf-8")
    with pytest.raises(SnapshotError, match="no valid transitions"):  # only the freeze may raise, not the set-up
        freeze_transitions(rr, [bad], tmp_path / "store", name="rt-trn", version="2", encoder=minilm)


def test_cascade_replay_of_outcomes_gives_valid_logs(tmp_path, minilm):
    rows = [{"query": "q one", "model": "small", "correct": False}, {"query": "q one", "model": "large", "correct": True},
            {"query": "q two", "model": "small", "correct": True}, {"query": "q two", "model": "large", "correct": True},
            {"query": "q three", "model": "other", "correct": True}]
    f = tmp_path / "o.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    rr = load_recipe(recipe(tmp_path))
    with Store.open(tmp_path / "store") as store:
        import_outcomes(store, [f])
        info = cascade_logs(store, rr, tmp_path / "cascade.jsonl")
    assert (info["requests"], info["steps"]) == (2, 3)  # q one: small then large; q two: small only
    ing = ingest_logs([tmp_path / "cascade.jsonl"], rr)
    assert not ing.problems and len(ing.rows) == 3
    by_q = {}
    for r in ing.rows:
        by_q.setdefault(r["request_id"], []).append(r)
    first = next(v for v in by_q.values() if len(v) == 2)
    assert [r["action"] for r in first] == [0, 1]
    assert first[0]["reward"] == pytest.approx(expected_reward(0.0, 0.0, 0.01))
    assert first[1]["reward"] == pytest.approx(expected_reward(1.0, 0.0, 0.2))
