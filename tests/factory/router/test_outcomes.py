"""Outcome tables: RouteLLM-style imports with bad rows, and an outcome spec run through the generate loop."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from mashbill.factory.generate.generate import select_inputs
from mashbill.factory.router.outcome_import import import_outcomes
from mashbill.factory.router.outcomes import check_answer, model_views, query_id
from mashbill.factory.shards import shard_of
from mashbill.factory.store import Store
from mashbill.specs import LIBRARY, find_spec, load_spec

WIDE = ('prompt,mistralai/Mixtral-8x7B-Instruct-v0.1,gpt-4-1106-preview,mistralai/Mixtral-8x7B-Instruct-v0.1_response\n'
        '"Janet has 3 ducks. How many legs?",True,True,"6"\n'
        '"What is 7*8?",False,True,"54"\n'
        '"Name a prime above 10.",True,maybe,"11"\n')


def long_lines(known_qid: str) -> list[str]:
    rows = [
        {"question_id": 81, "model": "gpt-4-1106-preview", "score": 9, "turn": 1,
         "user_prompt": "<|The Start of Assistant A's Conversation with User|>\n\n### User:\nWrite a haiku about rain.\n\n"
                        "### Assistant A:\nDrops...", "judge": ["gpt-4", "single-v1"]},
        {"question_id": 81, "model": "mistralai/Mixtral-8x7B-Instruct-v0.1", "score": 2.0, "turn": 1,
         "user_prompt": "### User:\nWrite a haiku about rain.\n\n### Assistant A:\nRain.", "judge": ["gpt-4", "single-v1"]},
        {"query": "Write a haiku about rain.", "model": "some-other-model", "correct": True},
        {"query_id": "q-not-stored", "model": "gpt-4-1106-preview", "correct": True},
        {"query_id": known_qid, "model": "gpt-4-1106-preview", "correct": "false", "cost": 0.01, "latency_s": 2.5},
        {"query": "Write a haiku about rain.", "model": "gpt-4-1106-preview", "correct": True},
    ]
    return [json.dumps(r) for r in rows] + ["{not json"]


def test_import_keeps_good_rows_and_names_every_bad_one(tmp_path):
    wide = tmp_path / "mmlu_anatomy.csv"
    wide.write_text(WIDE, encoding="utf-8")
    models = ["mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"]
    with Store.open(tmp_path / "store") as store:
        (w,) = import_outcomes(store, [wide], models=models)
        assert (w.rows_read, w.rows_kept, w.queries) == (3, 5, 3)
        assert w.counts() == {"OUT001": 1}
        assert w.problems[0]["where"] == f"{wide}:4" and "'gpt-4-1106-preview'" in w.problems[0]["detail"]
        longf = tmp_path / "judgements.jsonl"
        longf.write_text("\n".join(long_lines(query_id("What is 7*8?"))) + "\n", encoding="utf-8")
        (j,) = import_outcomes(store, [longf], models=models, pass_mark=0.8)
        assert j.counts() == {"OUT001": 1, "OUT002": 1, "OUT003": 1, "OUT004": 1}
        where = {p["code"]: p["where"] for p in j.problems}
        assert where == {"OUT002": f"{longf}:3", "OUT003": f"{longf}:4", "OUT004": f"{longf}:6", "OUT001": f"{longf}:7"}
        assert j.rows_kept == 3
        rows = store.con.execute("SELECT q.text, o.model, o.correct, o.score, o.cost, o.latency_s FROM router_outcomes o "
                                 "JOIN router_queries q USING (query_id) WHERE o.source = 'import:judgements.jsonl' "
                                 "ORDER BY 1, 2").fetchall()
        assert rows == [("What is 7*8?", "gpt-4-1106-preview", False, None, 0.01, 2.5),
                        ("Write a haiku about rain.", "gpt-4-1106-preview", True, 0.9, None, None),
                        ("Write a haiku about rain.", "mistralai/Mixtral-8x7B-Instruct-v0.1", False, 0.2, None, None)]
        meta = store.con.execute("SELECT meta FROM router_queries WHERE text = 'What is 7*8?'").fetchone()[0]
        assert json.loads(meta) == {"subject": "anatomy"}
        # the same question from another file (spaces differ) is the same query
        again = tmp_path / "again.csv"
        again.write_text('prompt,gpt-4-1106-preview\n"What is  7*8? ",True\n', encoding="utf-8")
        import_outcomes(store, [again], models=models)
        assert store.con.execute("SELECT count(*) FROM router_queries").fetchone()[0] == 4
        assert store.con.execute("SELECT count(*) FROM router_outcomes WHERE source = 'import:again.csv' AND "
                                 "query_id = ?", [query_id("What is 7*8?")]).fetchone()[0] == 1
        store.con.execute("DELETE FROM router_outcomes WHERE source = 'import:again.csv'")
        # re-importing the same file replaces its rows instead of doubling them
        import_outcomes(store, [wide], models=models)
        assert store.con.execute("SELECT count(*) FROM router_outcomes").fetchone()[0] == 8
        assert store.con.execute("SELECT count(*) FROM router_imports").fetchone()[0] == 4


def test_reference_checks():
    assert check_answer("number", "She makes $18 every day.", "18")
    assert check_answer("number", "1,000", "#### 1000")
    assert not check_answer("number", "17", "18")
    assert not check_answer("number", "no idea", "18")
    assert check_answer("choice", "B", "(B) paralysis")
    assert not check_answer("choice", "C", "B")
    assert check_answer("exact", " Berlin ", "berlin")


def test_outcome_spec_views_give_each_model_its_own_records():
    rs = load_spec(find_spec("outcome-gsm8k"))
    views = model_views(rs)
    assert [n for n, _ in views] == ["smollm2-135m-greedy", "smollm2-135m-sampled"]
    assert all(v.hash == rs.hash for _, v in views)
    assert views[0][1].spec.teacher.sampling.temperature == 0.0 and views[1][1].spec.teacher.sampling.temperature == 0.8
    ids = [set(rid for rid, _ in select_inputs(v)) for _, v in views]
    assert len(ids[0]) == len(rs.seeds) and not ids[0] & ids[1]
    # shards split each model's records the same way any spec's are split
    parts = [set(rid for rid, _ in select_inputs(views[0][1], shard=(i, 2))) for i in range(2)]
    assert parts[0] | parts[1] == ids[0] and not parts[0] & parts[1]
    assert all(shard_of(r, 2) == 0 for r in parts[0])


def tiny_outcome_spec(tmp_path):
    """outcome-gsm8k cut down for a test: two models, 8 answer tokens each, a small context."""
    lib = tmp_path / "lib"
    shutil.copytree(LIBRARY / "shared", lib / "shared")
    shutil.copytree(LIBRARY / "seeds", lib / "seeds")
    data = yaml.safe_load((LIBRARY / "outcome" / "outcome-gsm8k@1.yaml").read_text(encoding="utf-8"))
    for m in data["outcome"]["models"]:
        m["teacher"]["n_ctx"] = 512
        m["teacher"]["sampling"]["max_tokens"] = 8
    path = lib / "outcome" / "outcome-tiny@1.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({**data, "name": "outcome-tiny"}), encoding="utf-8")
    return path


@pytest.mark.slow
def test_outcome_spec_generates_every_model_and_materializes(tmp_path):
    from mashbill.cli.make.generate import run_generate

    spec = tiny_outcome_spec(tmp_path)
    store_path = tmp_path / "store"
    summaries = run_generate(str(spec), store_path, limit=1, progress=False, allow_unlocked=True)  # a test draft
    assert [s.requested for s in summaries] == [1, 1] and all(s.status == "completed" for s in summaries)
    with Store.open(store_path) as store:
        rows = store.con.execute("SELECT model, correct, cost, latency_s, tokens_in, tokens_out, judge, record_id "
                                 "FROM router_outcomes ORDER BY model, query_id").fetchall()
        assert [r[0] for r in rows] == ["smollm2-135m-greedy", "smollm2-135m-sampled"]
        for model, correct, cost, latency, t_in, t_out, judge, rid in rows:
            assert latency > 0 and t_in > 0 and t_out > 0 and judge == "reference:number"
            assert cost == pytest.approx((t_in * 0.01 + t_out * 0.02) / 1e6)
            status, out, inp = store.con.execute("SELECT status, output, input FROM records WHERE record_id = ?",
                                                 [rid]).fetchone()
            out, inp = json.loads(out or "null"), json.loads(inp)
            assert inp["model"] == model
            assert correct == (status == "accepted" and check_answer("number", out["answer"], inp["reference"]))
        assert store.con.execute("SELECT count(DISTINCT query_id) FROM router_queries").fetchone()[0] == 1
    again = run_generate(str(spec), store_path, limit=1, progress=False, allow_unlocked=True)  # resume: no work left
    assert [s.requested for s in again] == [0, 0] and [s.skipped for s in again] == [1, 1]
