"""Query synthesis: cells and quotas, trap tagging, the screen, the one generate loop, kill -9 and resume,
and a plan spec that consumes the pool (`seeds: {from_spec: ...}`) with lineage.

The deterministic teacher is our fault server on 127.0.0.1 (openai backend): each call's answer follows
the schema and a hash of the request, so a call adds one new query (its items repeat within a call).
One test runs the real embedded SmolLM2 on a tiny target.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from synth_specs import ROOT, SEEDS, write_plan_spec, write_queries_spec

from mashbill.errors import SpecError
from mashbill.factory.generate.seeds import spec_inputs
from mashbill.factory.generate.synth import SynthWork, plan_cells, pool_items
from mashbill.factory.records import Record, SpecRef
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from mashbill.validators.queries.queries import QueryScreen, holdout_hits, holdout_items, query_screen
from tests.conftest import MASHBILL, run_cli
from tests.factory.fault_server import FaultServer


def _openai(server) -> dict:
    return {"backend": "openai", "model": "fault-model", "base_url": server.url,
            "sampling": {"temperature": 0.0, "max_tokens": 64, "seed": 1}}


@pytest.fixture
def server():
    s = FaultServer().start()
    yield s
    s.stop()


def test_cells_split_the_target_with_a_trap_share_and_tag_traps(tmp_path):
    rs = load_spec(write_queries_spec(tmp_path, target=20, trap_share=0.25))
    cells = {c.name: c for c in plan_cells(rs)}
    assert sum(c.quota for c in cells.values()) == 20
    traps = [c for c in cells.values() if c.trap]
    assert [c.name for c in traps] == ["precision-first/en/trap"] and traps[0].quota == 5
    # the trap cell shows seeds of its rule's types; plain cells are the seeds' (type, language) pairs
    assert set(traps[0].seeds) == {s["query"] for s in SEEDS if s["type"] in ("arithmetic", "percentage")}
    plain = sorted(c.name for c in cells.values() if not c.trap)
    assert plain == ["arithmetic/en/plain", "creative/en/plain", "general/en/plain", "percentage/en/plain"]
    assert sorted(c.quota for c in cells.values() if not c.trap) == [3, 4, 4, 4]


DE_SEEDS = [{"query": "Was ist 12 mal 13?", "lang": "de", "type": "arithmetic"},
            {"query": "Wie viel sind 20 % von 350 Euro?", "lang": "de", "type": "percentage"},
            {"query": "Schreib ein kurzes Gedicht über den Herbst.", "lang": "de", "type": "creative"}]


def test_language_shares_split_the_target_per_language_before_the_cells(tmp_path):
    rs = load_spec(write_queries_spec(tmp_path, target=40, trap_share=0.25, seeds=SEEDS + DE_SEEDS,
                                      languages=["en", "de"], synthesis={"language_shares": {"en": 0.8, "de": 0.2}}))
    cells = plan_cells(rs)
    per_lang = {lang: sum(c.quota for c in cells if c.lang == lang) for lang in ("en", "de")}
    assert per_lang == {"en": 32, "de": 8}
    assert {c.name: c.quota for c in cells if c.trap} == {"precision-first/en/trap": 8, "precision-first/de/trap": 2}
    assert sorted(c.quota for c in cells if c.lang == "de" and not c.trap) == [2, 2, 2]
    # without shares every cell is alike, whatever its language (the default)
    even = load_spec(write_queries_spec(tmp_path / "even", target=40, trap_share=0.25, seeds=SEEDS + DE_SEEDS,
                                        languages=["en", "de"]))
    assert {c.quota for c in plan_cells(even) if not c.trap} == {4, 5}


def test_language_shares_must_add_up_to_one(tmp_path):
    with pytest.raises(SpecError, match="language_shares must add up to 1"):
        load_spec(write_queries_spec(tmp_path, synthesis={"language_shares": {"en": 0.9, "de": 0.3}}))


def test_weights_give_a_dead_cells_quota_to_the_others_and_weigh_the_rest(tmp_path):
    # 40 = en 32 (trap 8, plain 24) + de 8; creative weighs 2, percentage 0 but 1 in German (TYPE/LANG wins),
    # German arithmetic and traps 0
    weights = {"creative": 2, "percentage": 0, "percentage/de": 1, "arithmetic/de": 0, "precision-first/de": 0}
    rs = load_spec(write_queries_spec(tmp_path, target=40, trap_share=0.25, seeds=SEEDS + DE_SEEDS, languages=["en", "de"],
                                      synthesis={"language_shares": {"en": 0.8, "de": 0.2}, "weights": weights}))
    quotas = {c.name: c.quota for c in plan_cells(rs)}
    assert sum(quotas.values()) == 40
    assert quotas == {"arithmetic/en/plain": 6, "creative/en/plain": 12, "general/en/plain": 6,
                      "precision-first/en/trap": 8,
                      # no German trap cell left: its trap part goes to the German plain cells
                      "creative/de/plain": 5, "percentage/de/plain": 3}
    with pytest.raises(SpecError, match="weights must not be negative"):
        load_spec(write_queries_spec(tmp_path / "neg", synthesis={"weights": {"creative": -1}}))
    # a weight for what is no cell is a typo, not a silent no-op
    with pytest.raises(SpecError, match="weights names no cell: creativ, general/fr"):
        plan_cells(load_spec(write_queries_spec(tmp_path / "typo", synthesis={"weights": {"creativ": 1, "general/fr": 1}})))
    with pytest.raises(SpecError, match="leave 8 of the target to no cell"):
        plan_cells(load_spec(write_queries_spec(
            tmp_path / "none", target=40, seeds=SEEDS + DE_SEEDS, languages=["en", "de"],
            synthesis={"language_shares": {"en": 0.8, "de": 0.2}, "weights": {
                f"{t}/de": 0 for t in ("arithmetic", "percentage", "creative", "precision-first")}})))


def test_weights_left_out_keep_the_spec_hash(tmp_path):
    plain = load_spec(write_queries_spec(tmp_path)).hash
    assert load_spec(write_queries_spec(tmp_path, synthesis={"weights": {}})).hash == plain
    assert load_spec(write_queries_spec(tmp_path, synthesis={"weights": {"creative": 2}})).hash != plain


def test_every_call_of_a_cell_gets_its_own_sampling_seed(tmp_path):
    """A cell with one seed shows the same seed on every call; one sampling seed would repeat one answer."""
    rs = load_spec(write_queries_spec(tmp_path, target=12, per_call=2))
    with Store.open(tmp_path / "s") as store:
        work = SynthWork(rs, store, QueryScreen([], [], rs.spec.synthesis.filters))
    creative = [j for j in work.jobs() if j.inputs["cell"] == "creative/en/plain"]
    assert len(creative) > 1 and len({j.inputs["examples"] for j in creative}) == 1
    seeds = [work.job_sampling(j)["seed"] for j in creative]
    assert len(set(seeds)) == len(seeds)


def test_a_quota_that_can_never_fill_is_reported_before_any_teacher_call(tmp_path, server):
    spec = write_queries_spec(tmp_path, min_seeds=2, teacher=_openai(server))
    proc = run_cli("generate", spec, "--store", tmp_path / "s", "--no-progress", "--allow-unlocked")
    assert proc.returncode == 2, proc.stderr
    assert "quota can never fill" in proc.stderr and "creative/en/plain has 1 seed(s)" in proc.stderr
    assert str(spec) in proc.stderr and "Traceback" not in proc.stderr
    assert not [k for k, _, _ in server.log if k], "no teacher call may be made"


def test_the_screen_drops_by_length_language_duplicates_and_holdout(tmp_path):
    rs = load_spec(write_queries_spec(tmp_path, holdout=["Natalia sold clips to 48 of her friends in April, and "
                                                         "then she sold half as many clips in May."]))
    screen = query_screen(rs)
    assert screen.check("Hi?", "en")[0] == "SYN001"
    assert screen.check("Wie viele Tage hat ein Schaltjahr im Februar?", "en")[0] == "SYN002"
    assert screen.check("Convert 20 Celsius to Fahrenheit.", "de")[0] == "SYN002"  # function words decide
    assert screen.check("Rechne 20 Grad Celsius in Fahrenheit um.", "en")[0] == "SYN002"
    assert screen.check("what is 1847 * 23 + 519", "en")[0] == "SYN003"  # a seed, after normalisation
    assert screen.check("What is 1847 * 23 + 519 now?", "en")[0] == "SYN005"  # near a seed
    leak = screen.check("Natalia sold clips to 48 of her friends in April, and then she sold half as many "
                        "clips in May!", "en")
    assert leak[0] == "LEAK001" and "holdout.jsonl" in leak[1]
    fresh = "How many seconds are there in a leap year?"
    assert screen.check(fresh, "en") is None
    screen.add(fresh)
    assert screen.check("how many seconds are there in a leap year", "en")[0] == "SYN004"
    assert holdout_hits([fresh, "natalia sold clips to 48 of her friends in april and then she sold half as many "
                                "clips in may"], holdout_items(rs)) == 1


def test_the_screen_drops_identifiers_prompt_echoes_and_statements(tmp_path):
    rs = load_spec(write_queries_spec(tmp_path, filters={"min_words": 2, "request_shape": True}))
    screen = query_screen(rs)
    assert screen.check("remove_duplicates", "en")[0] == "SYN001"  # one token: an identifier
    assert screen.check("convert-65mph", "en")[0] == "SYN001"
    assert screen.check("17.5% of 4,360", "en")[0] == "SYN001"  # one word of letters
    # synth@1's instructions ask for "varied topics, names, numbers": repeating them is no user's request
    assert screen.check("Give me varied topics, names and numbers for a quiz?", "en")[0] == "SYN007"
    assert screen.check("What are common side effects of metformin?},{", "en")[0] == "SYN007"  # JSON residue
    assert screen.check("The answer to this one is 42.", "en")[0] == "SYN008"  # a statement, not a request
    # seen in a kept SmolLM2 run: a list item cut at its comma, an identifier run together with a date
    assert screen.check("What is the purpose of a Docker container?,", "en")[0] == "SYN007"
    assert screen.check("is_christmas_dayoftheweek18cdecember 2026?yes", "en")[0] == "SYN001"
    assert screen.check("How do I rename a column in pandas_dataframe_utils?", "en")[0] == "SYN001"
    assert screen.check("How do I call os.path.join with two_parts?", "en") is None  # a short identifier is fine
    assert screen.check("Calculate the area of a circle with radius 4 cm.", "en") is None  # an instruction
    assert screen.check("My printer prints blank pages, any idea why?", "en") is None  # a question
    assert screen.check("Berechne die Fläche eines Kreises mit Radius 4 cm.", "de") is None
    # the word count and the request shape are off by default: a spec turns them on
    plain = query_screen(load_spec(write_queries_spec(tmp_path / "plain")))
    assert plain.check("The answer to this one is 42.", "en") is None


DEV = next((p / "data" / "queries-dev" for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared")
            if (p / "data" / "queries-dev").is_dir()), None)


@pytest.mark.skipif(DEV is None, reason="the shared queries-dev corpora are not beside this checkout")
def test_the_comma_and_identifier_checks_keep_real_queries():
    """Precision on real text we did not write: of the real queries in shared/data/queries-dev (the JSON Lines rows of at
    most 300 characters) at most 0.1% end with a comma or hold a 16+ character snake_case identifier."""
    from mashbill.validators.queries.queries import _LONG_IDENTIFIER

    rows = []
    for p in sorted(DEV.rglob("*.jsonl")):
        for line in p.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:  # a corpus line cut by its source: not a query to measure
                continue
            text = next((v for k, v in row.items() if k in ("question", "prompt", "query", "text", "input")
                         and isinstance(v, str)), None) if isinstance(row, dict) else None
            if text and len(text) <= 300:
                rows.append(text)
    assert len(rows) > 2000
    hits = [t for t in rows if t.rstrip().endswith(",") or _LONG_IDENTIFIER.search(t)]
    assert len(hits) <= 0.001 * len(rows), hits[:5]


def test_the_request_shape_keeps_the_library_seeds():
    """The README's figure: of the 235 library seeds 5 fail the shape check, none of the 52 quick-start ones."""
    from mashbill.validators.queries.queries import looks_like_request

    seeds = ROOT / "specs" / "library" / "seeds"
    failed = {}
    for name in ("quickstart.jsonl", "moe-seeds.jsonl"):
        rows = [json.loads(line) for line in (seeds / name).read_text(encoding="utf-8").splitlines() if line.strip()]
        failed[name] = (len(rows), sum(not looks_like_request(r["query"], r["lang"]) for r in rows))
    assert failed == {"quickstart.jsonl": (52, 0), "moe-seeds.jsonl": (183, 5)}


def test_finish_keeps_only_what_fits_the_quota_and_tags_it(tmp_path):
    rs = load_spec(write_queries_spec(tmp_path, target=4, trap_share=0.25))
    with Store.open(tmp_path / "s") as store:
        work = SynthWork(rs, store, QueryScreen([s["query"] for s in SEEDS], [], rs.spec.synthesis.filters))
    trap_job = next(j for j in work.jobs() if j.inputs["trap"])
    assert trap_job.inputs["rule"] == "precision-first" and work.wanted(trap_job)
    out = {"queries": [{"query": "My router shows 3 of 12 ports busy, what share is that in percent?", "lang": "en"},
                       {"query": "A server has 640 GB of disk and uses 37.5% of it; how many GB are free?",
                        "lang": "en"}]}
    rec = Record(trap_job.rid, "queries", trap_job.inputs, out, "{}", work.ref, "accepted", ())
    kept, verdicts = work.finish(rec, [])
    [item] = kept.output["queries"]  # the trap cell's quota is 1 of the target 4
    assert item["trap"] is True and item["rule"] == "precision-first" and item["cell"] == "precision-first/en/trap"
    assert item["lineage"] == {"record_id": rec.id, "position": 0}
    assert [(v.code, v.severity) for v in verdicts] == [("SYN006", "flag")]
    assert not work.wanted(trap_job)


def test_finish_screens_each_query_against_its_cell(tmp_path):
    """The loop hands the screen the call's cell: a trap with no computation in it and a follow-up that needs
    context are dropped with their codes (SYN012, SYN009); the trap that computes is kept."""
    import yaml

    path = write_queries_spec(tmp_path, target=8, trap_share=0.25,
                              filters={"context": True, "cell_fit": True, "one_request": True, "user_voice": True})
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    spec["rules"] = str(ROOT / "specs" / "library" / "shared" / "rules" / "moe-routing@2.yaml")
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    rs = load_spec(path)
    with Store.open(tmp_path / "s") as store:
        work = SynthWork(rs, store, query_screen(rs))
    trap_job = next(j for j in work.jobs() if j.inputs["trap"])
    out = {"queries": [{"query": "In science, can you explain how it works?"},
                       {"query": "How do I fix it?"},
                       {"query": "A disk of 640 GB is 37.5% full; how many GB are used?"}]}
    rec = Record(trap_job.rid, "queries", trap_job.inputs, out, "{}", work.ref, "accepted", ())
    kept, verdicts = work.finish(rec, [])
    assert [q["query"] for q in kept.output["queries"]] == ["A disk of 640 GB is 37.5% full; how many GB are used?"]
    assert [v.code for v in verdicts] == ["SYN012", "SYN009"]


def _wait_for(predicate, what: str, timeout: float = 300):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_synthesis_resumes_after_kill_9_fills_quotas_and_feeds_a_plan_spec(tmp_path):
    server = FaultServer(delay_s=0.05).start()
    try:
        spec = write_queries_spec(tmp_path / "lib" / "queries", target=10, per_call=2, teacher=_openai(server))
        store = tmp_path / "store"
        args = [*MASHBILL, "generate", str(spec), "--store", str(store), "--no-progress", "--allow-unlocked"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # kill once the teacher has answered a few calls (progress seen by the server, not a timer)
        _wait_for(lambda: len([k for k, _, _ in server.log if k]) >= 3 or proc.poll() is not None, "teacher calls")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        run_cli("generate", spec, "--store", store, "--no-progress", "--allow-unlocked", check=True)
        again = run_cli("generate", spec, "--store", store, "--no-progress", "--json", "--allow-unlocked", check=True)
    finally:
        server.stop()
    rs = load_spec(spec)
    with Store.open(store) as s:
        items = pool_items(s, rs)
        ids = s.sql("SELECT count(*) n, count(DISTINCT record_id) d FROM records").to_pylist()[0]
        cells = {c.name: c.quota for c in plan_cells(rs)}
        counted = {name: sum(i["cell"] == name for i in items) for name in cells}
        view = s.sql("SELECT count(*) n, count(*) FILTER (WHERE trap) t FROM synth_queries").to_pylist()[0]
        plan = load_spec(write_plan_spec(tmp_path / "lib" / "plan", seeds={"from_spec": "tq@1"}))
        inputs = spec_inputs(plan, s)
    assert ids["n"] == ids["d"]  # nothing stored twice across the kill
    assert counted == cells and len(items) == 10  # every cell at its quota, no more
    assert len({i["query"] for i in items}) == 10 and holdout_hits([i["query"] for i in items], holdout_items(rs)) == 0
    assert view == {"n": 10, "t": cells["precision-first/en/trap"]}
    summary = json.loads(again.stdout)
    assert summary["accepted"] + summary["rejected"] == 0 and summary["not_needed"] == summary["requested"]
    # the plan spec consumes the pool, each input with its lineage and trap tag
    assert [i["query"] for i in inputs] == [i["query"] for i in items]
    assert all(i["lineage"]["spec"] == "tq@1" and i["lineage"]["spec_hash"] == rs.hash for i in inputs)
    assert sum(bool(i.get("trap")) for i in inputs) == cells["precision-first/en/trap"]
    assert plan.files["seeds.0"] == rs.hash  # the queries spec's hash is part of the plan spec's hash


def test_a_larger_call_budget_goes_on_filling_short_cells_under_the_same_hash(tmp_path, server):
    # the fault server adds one new query per call: a budget of ceil(quota / per_call * 1) calls leaves cells short
    spec = write_queries_spec(tmp_path / "lib", target=8, per_call=2, teacher=_openai(server),
                              synthesis={"calls_per_quota": 1})
    store = tmp_path / "store"
    run_cli("generate", spec, "--store", store, "--no-progress", "--allow-unlocked", check=True)
    rs = load_spec(spec)
    quotas = {c.name: c.quota for c in plan_cells(rs)}
    with Store.open(store) as s:
        first = {r.id for r in s.records(spec_hash=rs.hash)}
        short = len(pool_items(s, rs))
    assert short < sum(quotas.values())
    run_cli("generate", spec, "--store", store, "--no-progress", "--allow-unlocked", "--calls-per-quota", "3",
            check=True)
    with Store.open(store) as s:
        items = pool_items(s, rs)
        later = {r.id for r in s.records(spec_hash=rs.hash)}
    assert first < later  # the first run's calls are kept, the new budget only adds calls
    assert {name: sum(i["cell"] == name for i in items) for name in quotas} == quotas


def test_a_plan_spec_without_its_queries_in_the_store_says_so(tmp_path):
    write_queries_spec(tmp_path / "lib" / "queries")
    plan = load_spec(write_plan_spec(tmp_path / "lib" / "plan", seeds={"from_spec": "tq@1"}))
    with Store.open(tmp_path / "s") as s, pytest.raises(Exception, match="no accepted queries"):
        spec_inputs(plan, s)
    with pytest.raises(SpecError, match="from_spec: no spec nope@1"):
        load_spec(write_plan_spec(tmp_path / "lib" / "plan", seeds={"from_spec": "nope@1"}, name="tp2"))


def test_synthesis_with_the_embedded_model(tmp_path):
    """The real 135M teacher through the same loop: every call stored, every kept query screened and tagged."""
    spec = write_queries_spec(tmp_path, target=3, per_call=2, trap_share=0.34)
    proc = run_cli("generate", spec, "--store", tmp_path / "s", "--no-progress", "--threads", "1", "--json",
                   "--allow-unlocked", check=True)
    rs = load_spec(spec)
    with Store.open(tmp_path / "s") as s:
        recs = s.records(spec_hash=rs.hash)
        items = pool_items(s, rs)
        codes = {r[0] for r in s.con.execute("SELECT code FROM verdicts").fetchall()}
    assert recs and '"status": "completed"' in proc.stdout
    assert all(r.raw is not None for r in recs)
    screen = QueryScreen([x["query"] for x in SEEDS], holdout_items(rs), rs.spec.synthesis.filters)
    for item in items:  # what was kept passes the screen on its own and carries its cell
        assert screen.check(item["query"], "en") is None
        screen.add(item["query"])
        assert item["cell"] in {c.name for c in plan_cells(rs)}
    assert codes <= {"SYN000", "SYN001", "SYN002", "SYN003", "SYN004", "SYN005", "SYN006", "SYN007", "LEAK001", "PARSE001",
                     "SCHEMA001", "TRUNC001"}
