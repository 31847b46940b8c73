"""Query synthesis in the one generate loop, beyond tests/factory/generate/test_synth.py: each call shows k seeds of its
own cell, drawn per call; the spec's accept-rate guard stops a synthesis run whose calls keep nothing (exit 3),
and the calls it made are accounted on the run."""

from __future__ import annotations

import json

from synth_specs import SEEDS, write_queries_spec

from mashbill.factory.generate.synth import SynthWork, plan_cells
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from mashbill.validators.queries.queries import QueryScreen
from tests.cli.conftest import invoke
from tests.factory.fault_server import FaultServer

MORE = [{"query": q, "lang": "en", "type": "arithmetic"} for q in
        ("What is 3 to the power of 7?", "How much is 19 times 23?", "Divide 1024 by 64, please.")]


def test_each_call_shows_k_seeds_of_its_cell_drawn_per_call(tmp_path):
    rs = load_spec(write_queries_spec(tmp_path, target=20, per_call=3, seeds=SEEDS + MORE))
    cells = {c.name: c for c in plan_cells(rs)}
    with Store.open(tmp_path / "s") as store:
        work = SynthWork(rs, store, QueryScreen([], [], rs.spec.synthesis.filters))
    jobs = work.jobs()
    assert {j.inputs["cell"] for j in jobs} == set(cells)
    for j in jobs:
        shown = [line[2:] for line in j.inputs["examples"].splitlines()]
        cell = cells[j.inputs["cell"]]
        assert len(shown) == min(2, len(cell.seeds)) == len(set(shown)) and set(shown) <= set(cell.seeds)
        assert j.inputs["n"] == 3 and j.inputs["trap"] == cell.trap
        user = work.prompt(j).teacher_messages[-1]["content"]
        assert all(q in user for q in shown) and "Write 3 new requests" in user
    # the arithmetic cell has 5 seeds: the two shown are drawn again for each call
    draws = {j.inputs["examples"] for j in jobs if j.inputs["cell"] == "arithmetic/en/plain"}
    assert len(draws) > 1


def test_the_accept_rate_guard_stops_a_synthesis_run_that_keeps_nothing(tmp_path):
    """Every query is longer than max_chars 9 (SYN001), so every call is a SYN000 reject: the spec's guard
    (window 4, min 0.5) stops the run after its first window instead of spending the whole call budget."""
    server = FaultServer().start()
    try:
        teacher = {"backend": "openai", "model": "fault-model", "base_url": server.url,
                   "sampling": {"temperature": 0.0, "max_tokens": 64, "seed": 1}}
        spec = write_queries_spec(tmp_path / "lib", target=20, per_call=2, teacher=teacher,
                                  filters={"max_chars": 9})
        import yaml

        data = yaml.safe_load(spec.read_text(encoding="utf-8"))
        data["guards"] = {"accept_rate": {"window": 4, "min_rate": 0.5}}
        data["runtime"]["concurrency"] = 1
        spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        res = invoke("generate", spec, "--store", tmp_path / "s", "--no-progress", "--json", "--allow-unlocked")
    finally:
        server.stop()
    assert res.exit_code == 3, res.output
    summary = json.loads(res.stdout)
    rs = load_spec(spec)
    budget = sum(-(-c.quota * 3 // 2) for c in plan_cells(rs))  # ceil(quota / per_call * calls_per_quota)
    assert summary["status"] == "aborted" and "accept" in (summary.get("stop_reason") or "")
    with Store.open(tmp_path / "s") as s:
        rows = s.sql("SELECT status, count(*) n FROM records GROUP BY status").to_pylist()
        codes = {r[0] for r in s.con.execute("SELECT DISTINCT code FROM verdicts").fetchall()}
    made = sum(r["n"] for r in rows)
    assert {r["status"] for r in rows} == {"rejected"} and 4 <= made < budget
    assert summary["rejected"] == made and codes == {"SYN000", "SYN001"}
    # accounting: one teacher call per stored call, its tokens counted, the rejects by code
    assert summary["calls"] == made and summary["tokens_out"] > 0 and summary["reject_codes"] == {"SYN000": made}


def test_traps_get_15_percent_of_the_target_by_default(tmp_path):
    import yaml

    path = write_queries_spec(tmp_path, target=40)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    del data["synthesis"]["trap_share"]
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    cells = plan_cells(load_spec(path))
    assert sum(c.quota for c in cells if c.trap) == 6 and sum(c.quota for c in cells) == 40  # 15% of 40
