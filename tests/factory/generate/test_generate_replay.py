"""The replay teacher's error mix shows up in the verdict counts exactly (tests/factory/replay_server.py): a few hundred
records per kind through the real generate loop, guards and accounting (the openai backend), each count checked
against what the server's seeded mix set for those inputs."""

from __future__ import annotations

from collections import Counter

import pytest

from mashbill.cli.make.generate import run_generate
from tests.factory.rehearsal import seed_rows, write_seeds, write_spec
from tests.factory.replay_plans import CLASSES, plan_answer, plan_query, read_plan_query, wrong_codes
from tests.factory.replay_server import ReplayServer, build_corpus, expected_counts, outcome
from tests.factory.teacher_helpers import sql

SEED = 11


@pytest.fixture(scope="module")
def corpus():
    return build_corpus()


def _store_counts(store) -> dict[str, Counter]:
    status = Counter(dict(sql(store, "SELECT status, count(*) FROM records GROUP BY ALL")))
    codes = Counter(dict(sql(store, "SELECT code, count(DISTINCT record_id) FROM verdicts "
                                    "WHERE severity = 'reject' GROUP BY ALL")))
    retries = Counter(retries=sql(store, "SELECT sum(retries) FROM runs")[0][0])
    return {"status": status, "codes": codes, "retries": retries}


@pytest.mark.parametrize("kind,n", [("complexity", 300), ("plan", 200), ("routing", 120)])
def test_the_error_mix_is_the_verdict_counts(kind, n, corpus, tmp_path):
    rows = seed_rows(kind, n, corpus)
    spec = write_spec(tmp_path, kind, write_seeds(tmp_path / "seeds.jsonl", rows))
    store = tmp_path / "store"
    queries = [r["query"] for r in rows]
    mix = Counter(outcome(SEED, q) for q in queries)
    assert all(mix[o] for o in ("ok", "wrong", "unparseable", "length", "429", "500")), mix  # every fault is in play

    with ReplayServer(corpus, seed=SEED) as server:
        summary = run_generate(str(spec), store, progress=False, base_url=server.url)

    expected = expected_counts(SEED, queries, corpus, kind=kind)
    assert summary.requested == n and summary.failed == 0
    assert _store_counts(store) == expected
    # 429 and 500 were answered on the second attempt: each one a stored attempt with its error, none a failure
    errors = Counter(dict(sql(store, "SELECT left(error, 8), count(*) FROM teacher_calls WHERE error IS NOT NULL "
                                     "GROUP BY ALL")))
    assert errors == Counter({"HTTP 429": mix["429"], "HTTP 500": mix["500"]}) - Counter()
    calls, retries = sql(store, "SELECT calls, retries FROM runs")[0]
    assert calls == sql(store, "SELECT count(*) FROM teacher_calls")[0][0] == n + retries
    if kind == "plan":  # wrong plans of several classes, each with its class's codes
        wrong = {read_plan_query(q)[0].name for q in queries if outcome(SEED, q) == "wrong"}
        assert len(wrong) >= 4, wrong
        assert {c for cls in wrong for c in wrong_codes()[cls]} <= set(expected["codes"])
    if kind == "complexity":  # the wrong labels are the rules' codes, one per wrong record
        rule_codes = {c: k for c, k in expected["codes"].items() if c.startswith("CPLX")}
        assert sum(rule_codes.values()) == mix["wrong"]


def test_a_rerun_asks_for_nothing_and_a_changed_seed_changes_the_mix(corpus, tmp_path):
    rows = seed_rows("complexity", 120, corpus)
    spec = write_spec(tmp_path, "complexity", write_seeds(tmp_path / "seeds.jsonl", rows))
    store = tmp_path / "store"
    with ReplayServer(corpus, seed=SEED) as server:
        run_generate(str(spec), store, progress=False, base_url=server.url)
        again = run_generate(str(spec), store, progress=False, base_url=server.url)
    assert again.requested == 0 and again.skipped == 120
    queries = [r["query"] for r in rows]
    assert expected_counts(SEED, queries, corpus) != expected_counts(SEED + 1, queries, corpus)


def test_plan_requests_are_classes_of_phrasing_whose_wrong_plans_the_rules_reject():
    """Plan seeds take turns over classes of requests (not one template), each read back to its class by the server,
    all distinct; the real rules reject each class's wrong plan with its own codes (wrong_codes refuses a class whose
    right plan they reject or whose wrong plan's codes vary), and a request of no class gets no plan."""
    seen = set()
    for i in range(50_000):
        cls, query = plan_query(i)
        if i < 3 * len(CLASSES):
            assert read_plan_query(query)[0] is cls, query
        seen.add(query)
    assert len(seen) == 50_000
    codes = wrong_codes()
    assert set(codes) == {c.name for c in CLASSES} and all(codes.values())
    assert len(CLASSES) == 14 and len(set(codes.values())) >= 8  # the classes reach different rules (docs/scale.md)
    assert set().union(*codes.values()) == {"ARG001", "ARG002", "ARG003", "ARG004", "FIT001", "FIT002", "HR003",
                                            "HR006", "PLAN004"}
    with pytest.raises(ValueError, match="no plan class"):
        plan_answer("What is the airspeed of an unladen swallow?", wrong=False)
