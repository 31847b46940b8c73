"""Sharded query synthesis: `generate --shard i/n` fills shard i's share of every cell's quota with its slice of the
calls, resumes after kill -9 from its own store, and `mashbill merge` drops the queries two shards both kept.

The teacher is the fault server (tests/factory/fault_server.py): its answer is a hash of the user message, so a
prompt that names the call gives every call a new query and one that does not gives every call of a cell the same
query, in every shard alike: the duplicate that each shard alone cannot see.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import yaml
from synth_specs import write_plan_spec, write_queries_spec
from test_synth import _openai, _wait_for

from mashbill.factory.generate.seeds import spec_inputs
from mashbill.factory.generate.synth import plan_cells, pool_items
from mashbill.factory.generate.synth_shards import shard_quota
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from mashbill.validators.data.dedup import normalize
from mashbill.validators.queries.queries import holdout_hits, holdout_items
from tests.cli.conftest import invoke
from tests.conftest import MASHBILL
from tests.factory.fault_server import FaultServer


def _per_cell(items: list[dict], cells) -> dict[str, int]:
    return {name: sum(i["cell"] == name for i in items) for name in cells}


def _generate(spec, store, *extra):
    res = invoke("generate", spec, "--store", store, "--no-progress", "--allow-unlocked", *extra)
    assert res.exit_code == 0, res.output


def test_shard_shares_add_up_to_each_quota():
    for quota in range(0, 12):
        for n in range(1, 5):
            for index in range(6):
                shares = [shard_quota(quota, index, (i, n)) for i in range(n)]
                assert sum(shares) == quota and max(shares) - min(shares) <= 1
    # the remainder rotates with the cell: quota-1 cells do not all land on shard 0
    assert [shard_quota(1, k, (0, 2)) for k in range(4)] == [1, 0, 1, 0]


def test_two_shards_fill_the_target_exactly_and_one_resumes_after_kill_9(tmp_path):
    server = FaultServer(delay_s=0.05).start()
    try:
        spec = write_queries_spec(tmp_path / "lib", target=10, per_call=2, teacher=_openai(server))
        _generate(spec, tmp_path / "s0", "--shard", "0/2")
        before = len(server.log)
        args = [*MASHBILL, "generate", str(spec), "--store", str(tmp_path / "s1"), "--shard", "1/2", "--no-progress",
                "--allow-unlocked"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for(lambda: len(server.log) - before >= 2 or proc.poll() is not None, "shard 1's first calls")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        _generate(spec, tmp_path / "s1", "--shard", "1/2")
    finally:
        server.stop()
    rs = load_spec(spec)
    cells = {c.name: c.quota for c in plan_cells(rs)}
    for i in range(2):  # each shard holds exactly its share, counted from its own store
        with Store.open(tmp_path / f"s{i}") as s:
            got = _per_cell(pool_items(s, rs), cells)
        assert got == {c: shard_quota(q, k, (i, 2)) for k, (c, q) in enumerate(cells.items())}
    res = invoke("merge", tmp_path / "m", tmp_path / "s0", tmp_path / "s1", "--require-complete", "--json")
    assert res.exit_code == 0, res.output
    pool = json.loads(res.stdout)["synthesis"]
    assert pool == [{"spec": "tq@1", "queries": 10, "target": 10, "cross_shard_dropped": 0, "dropped_now": 0,
                     "cells_short": {}, "cells_over": {}}]
    with Store.open(tmp_path / "m") as s:
        items = pool_items(s, rs)
        ids = s.sql("SELECT count(*) n, count(DISTINCT record_id) d FROM records").to_pylist()[0]
    assert ids["n"] == ids["d"]  # nothing stored twice across the kill
    assert _per_cell(items, cells) == cells and len(items) == 10
    assert len({normalize(i["query"]) for i in items}) == 10
    assert holdout_hits([i["query"] for i in items], holdout_items(rs)) == 0


def test_merge_drops_the_queries_two_shards_both_kept(tmp_path):
    server = FaultServer().start()
    try:
        spec = write_queries_spec(tmp_path / "lib", target=10, per_call=2, teacher=_openai(server))
        data = yaml.safe_load(spec.read_text(encoding="utf-8"))  # no call number, no drawn seeds: one answer per cell
        data["prompt"]["teacher"]["user"] = "Kind: {{ cell_hint }} ({{ language }})\nWrite {{ n }} new requests."
        spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        for i in range(2):
            _generate(spec, tmp_path / f"s{i}", "--shard", f"{i}/2")
    finally:
        server.stop()
    rs = load_spec(spec)
    cells = {c.name: c.quota for c in plan_cells(rs)}
    shard_pools = []
    for i in range(2):
        with Store.open(tmp_path / f"s{i}") as s:
            shard_pools.append(pool_items(s, rs))
    # alone, each shard kept its cell's one answer: the same query, once in each shard
    both = {normalize(i["query"]) for i in shard_pools[0]} & {normalize(i["query"]) for i in shard_pools[1]}
    assert len(both) == len(cells) and all(len(p) == len(cells) for p in shard_pools)

    res = invoke("merge", tmp_path / "m", tmp_path / "s0", tmp_path / "s1")
    assert res.exit_code == 0, res.output
    assert f"cross-shard duplicates dropped {len(cells)}" in res.stdout and "cells short of their quota" in res.stdout
    again = invoke("merge", tmp_path / "m", tmp_path / "s0", tmp_path / "s1", "--json")
    pool = json.loads(again.stdout)["synthesis"][0]
    assert pool["dropped_now"] == 0 and pool["cross_shard_dropped"] == len(cells) and pool["queries"] == len(cells)
    assert set(pool["cells_short"]) == {c for c, q in cells.items() if q > 1} and pool["cells_over"] == {}
    with Store.open(tmp_path / "m") as s:
        items = pool_items(s, rs)
        plan = load_spec(write_plan_spec(tmp_path / "lib" / "plan", seeds={"from_spec": "tq@1"}))
        inputs = spec_inputs(plan, s)
        codes = s.verdict_counts(rs.hash)
        view = s.sql("SELECT count(*) n FROM synth_queries").to_pylist()[0]["n"]
    texts = [normalize(i["query"]) for i in items]
    assert len(texts) == len(set(texts)) == len(cells) and set(texts) == both
    assert all(n <= cells[c] for c, n in _per_cell(items, cells).items())
    assert [i["query"] for i in inputs] == [i["query"] for i in items]  # from_spec seeds read the deduplicated pool
    assert codes["SYN020"] == len(cells) and view == 2 * len(cells)  # the view lists what each shard kept
    from mashbill.curation.reports.report_synth import synthesis_figures

    with Store.open(tmp_path / "m") as s:
        fig = synthesis_figures(s)[0]
    assert fig["cross_shard_dropped"] == len(cells) and fig["queries"] == len(cells)
