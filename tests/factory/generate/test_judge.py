"""The judge through the generate loop: the embedded SmolLM2 scores stored plans; a judge whose answers do not
parse (our fault server) leaves failures with a code that the next run retries; the threshold becomes
verdicts on the judged records, which a snapshot honours and exports."""

from __future__ import annotations

import json
from contextlib import contextmanager

import pyarrow.parquet as pq
from synth_specs import SEEDS, judge_section, write_plan_spec

from mashbill.curation.snapshots.snapshot import freeze
from mashbill.factory.generate.judge import JUDGE_UNPARSEABLE, judge_ref, judge_scores, run_judge
from mashbill.factory.records import Record, SpecRef, record_id
from mashbill.factory.store import Store
from mashbill.factory.teachers import make_teacher
from mashbill.specs import load_spec, render_prompt
from tests.factory.fault_server import FaultServer

PLANS = [[{"task": "Compute it", "category": "precision_tools"}], [{"task": "Answer", "category": "general"}]]


def _store_plans(store, rs, n=3) -> list[Record]:
    ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
    run = store.begin_run(spec_name=rs.spec.name, spec_version=1, spec_hash=rs.hash, kind="plan",
                          backend="llama_cpp", model="m", model_sha256=None, model_info=None, sampling={})
    recs = []
    for i, inputs in enumerate(rs.seeds[:n]):
        rid = record_id(rs.hash, inputs)
        prompt = render_prompt(rs, inputs, rid)
        recs.append(Record(rid, "plan", inputs, PLANS[i % 2], "[]", ref, "accepted", prompt.training_messages,
                           prompt.meta()))
    store.write_batch(run, recs, {}, [])
    store.record_validation(spec_hash=rs.hash, source="test", results={r.id: [] for r in recs}, counts={})
    return recs


def test_the_embedded_judge_scores_records_and_its_threshold_reaches_the_snapshot(tmp_path):
    spec = write_plan_spec(tmp_path / "lib", judge=judge_section(threshold=6, below="penalty"))
    rs = load_spec(spec)
    store_path = tmp_path / "s"
    with Store.open(store_path) as store:
        recs = _store_plans(store, rs)
        # one thread: on a busy shared machine two llama.cpp threads wait on each other at every token
        teacher = make_teacher(rs.spec.judge.teacher, threads=1)
        try:
            summary = run_judge(rs, store, teacher)
            again = run_judge(rs, store, teacher)
        finally:
            teacher.close()
        ref = judge_ref(rs, "score")
        judged = store.records(spec_hash=ref.hash)
        scores = judge_scores(store, rs)
        view = store.sql("SELECT judged_id, score, judge_model, prompt_hash FROM judge_scores").to_pylist()
        penalties = store.sql("SELECT record_id, code, severity FROM verdicts WHERE stage = 'judge'").to_pylist()
        run = store.sql(f"SELECT kind, model_sha256 FROM runs WHERE run_id = '{summary.run_id}'").to_pylist()[0]
    assert summary.requested == 3 and len(judged) == 3
    assert {r.input["record_id"] for r in judged} == {r.id for r in recs}
    for r in judged:  # a judgment is a score, or a failure with its code that the next run asks again
        assert r.status in ("accepted", "failed") and r.meta["prompt_hash"] and r.raw is not None
    failed = [r for r in judged if r.status == "failed"]
    assert again.requested == len(failed)
    assert run["kind"] == "judge" and run["model_sha256"]
    assert {v["judged_id"] for v in view} == set(scores)
    assert all(v["judge_model"] == "embedded:smollm2-135m-instruct" and 1 <= v["score"] <= 5 for v in view)
    # threshold 6 is above every possible score: every scored record gets the judge's penalty
    assert sorted((p["record_id"], p["code"], p["severity"]) for p in penalties) == \
        sorted((rid, "JUDGE010", "penalty") for rid in scores)
    assert scores, [r.raw for r in judged]  # constrained decoding: at least one judgment parses
    res = freeze(spec, store_path=store_path, name="judged", version="1", tokens=False)
    rows = pq.read_table(res.path / "judge.parquet").to_pylist()
    assert {r["record_id"] for r in rows} == set(scores) and res.manifest["judge"]["scored"] == len(scores)
    assert "judge.parquet" in res.manifest["files"]


def test_an_unparseable_judge_is_a_stored_failure_that_the_next_run_retries(tmp_path):
    server = FaultServer(schedule=lambda key, attempt: "prose" if attempt == 1 else None).start()
    try:
        judge = judge_section(teacher={"backend": "openai", "model": "fault-model", "base_url": server.url,
                                       "sampling": {"temperature": 0.0, "max_tokens": 48}},
                              threshold=2, below="reject")
        spec = write_plan_spec(tmp_path / "lib", judge=judge)
        rs = load_spec(spec)
        from mashbill.specs.model import Runtime

        with Store.open(tmp_path / "s") as store:
            recs = _store_plans(store, rs)
            teacher = make_teacher(rs.spec.judge.teacher, runtime=Runtime(max_retries=0, backoff_s=0.01))
            try:
                first = run_judge(rs, store, teacher)
                codes = store.sql("SELECT code, count(*) n FROM verdicts WHERE record_id IN (SELECT record_id FROM "
                                  "records WHERE kind = 'judge') GROUP BY code ORDER BY code").to_pylist()
                second = run_judge(rs, store, teacher)
            finally:
                teacher.close()
            judged = store.records(spec_hash=judge_ref(rs, "score").hash)
            rejects = store.sql("SELECT count(*) n FROM verdicts WHERE stage = 'judge' AND severity = 'reject'"
                                ).to_pylist()[0]["n"]
            from mashbill.curation.selection.select import select_records

            sel = select_records(store, rs)
    finally:
        server.stop()
    assert first.failed == 3 and first.accepted == 0 and first.status == "completed"
    assert {c["code"]: c["n"] for c in codes} == {"PARSE001": 3, JUDGE_UNPARSEABLE: 3}
    assert second.requested == 3 and second.accepted == 3
    assert [r.status for r in judged] == ["accepted"] * 3
    # the fault server's answers score the minimum (1): below the threshold 2, a reject on each judged record,
    # and a snapshot's selection leaves them out
    assert rejects == len(recs) == 3
    assert not sel.candidates and sorted((x.stage, x.codes) for x in sel.excluded) == [("judge", ("JUDGE010",))] * 3


def test_the_judge_command(tmp_path):
    from tests.conftest import run_cli

    server = FaultServer().start()
    try:
        judge = judge_section(teacher={"backend": "openai", "model": "fault-model", "base_url": server.url,
                                       "sampling": {"temperature": 0.0, "max_tokens": 48}}, threshold=2)
        spec = write_plan_spec(tmp_path / "lib", judge=judge)
        with Store.open(tmp_path / "s") as store:
            _store_plans(store, load_spec(spec))
        proc = run_cli("judge", spec, "--store", tmp_path / "s", "--json", check=True)
        pairs = run_cli("judge", spec, "--store", tmp_path / "s", "--pairs", "--json", check=True)
        missing = run_cli("judge", write_plan_spec(tmp_path / "lib2"), "--store", tmp_path / "s")
    finally:
        server.stop()
    summary = json.loads(proc.stdout)
    assert summary["spec"] == "tp.judge@1" and summary["accepted"] == 3 and summary["status"] == "completed"
    assert json.loads(pairs.stdout)["requested"] == 0  # plan records have no sample groups to compare
    assert missing.returncode == 2 and "no `judge:` section" in missing.stderr


@contextmanager
def _fault_judged(tmp_path):
    """(spec, store, teacher): a plan spec whose teacher and judge are the fault server at temperature 0."""
    from mashbill.specs.model import Runtime

    server = FaultServer().start()
    try:
        teacher_cfg = {"backend": "openai", "model": "fault-model", "base_url": server.url,
                       "sampling": {"temperature": 0.0, "max_tokens": 48}}
        rs = load_spec(write_plan_spec(tmp_path / "lib", judge=judge_section(teacher=teacher_cfg)))
        with Store.open(tmp_path / "s") as store:
            teacher = make_teacher(rs.spec.judge.teacher, runtime=Runtime(max_retries=0))
            try:
                yield rs, store, teacher
            finally:
                teacher.close()
    finally:
        server.stop()


def test_samples_and_pair_judging_run_through_the_generate_loop(tmp_path):
    """n samples per query are records of the loop (seed + k, one prompt); the judge compares each two in both
    orders, and a re-run asks for nothing."""
    from mashbill.factory.generate.generate import generate

    with _fault_judged(tmp_path) as (rs, store, teacher):
        samples = generate(rs, store, teacher, samples=3, limit=2)
        first = run_judge(rs, store, teacher, mode="pairs")
        again = run_judge(rs, store, teacher, mode="pairs")
        recs = store.records(spec_hash=rs.hash)
        pairs = store.sql("SELECT a, b FROM judge_pairs").to_pylist()
    assert samples.requested == 6 and len(recs) == 6
    groups = {}
    for r in recs:
        groups.setdefault(r.meta["group"], []).append((r.meta["sample"], r.meta["seed"], json.dumps(r.messages)))
    assert len(groups) == 2 and all(sorted(m[0] for m in g) == [0, 1, 2] for g in groups.values())
    assert all(len({m[2] for m in g}) == 1 for g in groups.values())  # one shared prompt per query
    assert all(sorted(m[1] for m in g) == [0, 1, 2] for g in groups.values())  # seed + k
    assert first.requested == 2 * 3 * 2 == len(pairs) and again.requested == 0  # 3 pairs per query, 2 orders
    assert {(p["b"], p["a"]) for p in pairs} == {(p["a"], p["b"]) for p in pairs}


def test_limit_counts_records_or_with_pairs_queries(tmp_path):
    """`judge --limit N`: the first N records; with --pairs the first N queries, each pair in both orders."""
    from mashbill.factory.generate.generate import generate

    with _fault_judged(tmp_path) as (rs, store, teacher):
        generate(rs, store, teacher, samples=3, limit=2)  # 2 queries x 3 samples
        scored = run_judge(rs, store, teacher, limit=4)
        paired = run_judge(rs, store, teacher, mode="pairs", limit=1)
        pairs = store.sql("SELECT a, b FROM judge_pairs").to_pylist()
        groups = {r.id: r.meta["group"] for r in store.records(spec_hash=rs.hash)}
    assert scored.requested == 4
    assert paired.requested == 3 * 2 == len(pairs)  # one query: 3 pairs of its samples, both orders
    assert len({groups[p["a"]] for p in pairs} | {groups[p["b"]] for p in pairs}) == 1
