"""Best-of-n and votes (factory.generate.chains) through `mashbill generate` against the fault server: every sample is an
attempt row, `first-accepted` stops at the first accepted sample, `vote` keeps the majority with its share as the
confidence, and a tie or a low share is flagged for review (VOTE001)."""

from __future__ import annotations

import json
from collections import Counter

import yaml

from teacher_helpers import SHARED, lock_spec, run_cli, sql, tag


def _with(path, **sections):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data.update(sections)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return lock_spec(path)


def _chains(store) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for rid, attempt, sample, status, output in sql(store, "SELECT record_id, attempt, sample, status, "
                                                           "CAST(output AS VARCHAR) FROM record_attempts "
                                                           "ORDER BY record_id, attempt"):
        out.setdefault(rid, []).append((attempt, sample, status, json.loads(output) if output else None))
    return out


def test_a_vote_keeps_the_majority_and_flags_ties_and_low_agreement(write_spec, fault_server, tmp_path):
    server = fault_server(by_seed=True)  # each sample's seed gives its own label
    # 40 records: with three samples each, every shape below turns up whatever the spec hash makes of the seeds
    spec = _with(write_spec(n=40, runtime={"concurrency": 2, "batch_size": 4}),
                 output_schema=str(SHARED / "tiny-label@1.json"),
                 samples={"n": 3, "pick": "vote", "vote_on": "complexity", "min_agreement": 0.6})
    store = tmp_path / "store"
    out = run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress", "--json", check=True)
    summary = json.loads(out.stdout)
    assert summary["accepted"] == 40 and summary["calls"] == 40 * 3
    chains = _chains(store)
    records = {rid: (json.loads(output), json.loads(meta)) for rid, output, meta in
               sql(store, "SELECT record_id, CAST(output AS VARCHAR), CAST(meta AS VARCHAR) FROM records")}
    flagged = {rid for (rid,) in sql(store, "SELECT record_id FROM verdicts WHERE code = 'VOTE001' "
                                            "AND severity = 'flag'")}
    shapes = Counter()
    for rid, rows in chains.items():
        assert [(a, s) for a, s, _, _ in rows] == [(1, 0), (2, 1), (3, 2)]  # three samples, seeds + 0, 1, 2
        counts = Counter(o["complexity"] for _, _, _, o in rows)
        top = max(counts.values())
        tie = sum(1 for c in counts.values() if c == top) > 1
        output, meta = records[rid]
        assert counts[output["complexity"]] == top  # the majority (on a tie, one of the tied)
        assert meta["confidence"] == round(top / 3, 4) and meta["votes"] == dict(counts)
        assert (rid in flagged) == (tie or top / 3 < 0.6)
        shapes[tuple(sorted(counts.values(), reverse=True))] += 1
    # the fixed seeds give every shape: a three-way tie (flagged), two of three, all three
    assert set(shapes) == {(1, 1, 1), (2, 1), (3,)}, shapes


def test_a_two_sample_tie_is_flagged_for_review(write_spec, fault_server, tmp_path):
    server = fault_server(by_seed=True)
    spec = _with(write_spec(n=16, runtime={"concurrency": 1, "batch_size": 5}),
                 output_schema=str(SHARED / "tiny-label@1.json"),
                 samples={"n": 2, "pick": "vote", "vote_on": "complexity"})
    store = tmp_path / "store"
    run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress", check=True)
    chains = _chains(store)
    ties = {rid for rid, rows in chains.items() if rows[0][3] != rows[1][3]}
    assert ties and len(ties) < len(chains)  # both kinds occur with these seeds
    flagged = {rid: d for rid, d in sql(store, "SELECT record_id, detail FROM verdicts WHERE code = 'VOTE001'")}
    assert set(flagged) == ties and all("a tie" in d for d in flagged.values())
    confidence = dict(sql(store, "SELECT record_id, CAST(json_extract(meta, '$.confidence') AS DOUBLE) FROM records"))
    assert all(confidence[rid] == (0.5 if rid in ties else 1.0) for rid in chains)
    # review's selections pick the ties: by their flag, and by the vote share as the record's confidence
    from mashbill.curation.review.select import review_items, select
    from mashbill.factory.store import Store
    from mashbill.specs import load_spec

    with Store.open(store, read_only=True) as s:
        items = review_items(s, load_spec(spec))
    assert {i.record.id for i in select(items, "flagged")} == ties
    assert {i.record.id for i in select(items, "low-confidence")} == ties


def test_first_accepted_stops_at_the_first_sample_the_checker_accepts(write_spec, fault_server, tmp_path):
    # even seeds: the first sample breaks the schema, the second is fine; odd seeds are fine at once
    server = fault_server(schedule=lambda key, attempt: "schema" if (tag(key) or 0) % 2 == 0 and tag(key) is not None
                          and attempt == 1 else None)
    spec = _with(write_spec(n=8, runtime={"concurrency": 1, "batch_size": 3}),
                 samples={"n": 3, "pick": "first-accepted"})
    store = tmp_path / "store"
    run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress", check=True)
    inputs = dict(sql(store, "SELECT record_id, CAST(input AS VARCHAR) FROM records"))
    assert sql(store, "SELECT count(*) FILTER (status = 'accepted') FROM records")[0][0] == 8
    for rid, rows in _chains(store).items():
        even = tag(json.loads(inputs[rid])["query"]) % 2 == 0
        assert [(s, st) for _, s, st, _ in rows] == ([(0, "rejected"), (1, "accepted")] if even else [(0, "accepted")])
    [(stats,)] = sql(store, "SELECT stats FROM runs")
    assert json.loads(stats)["sample_turns"] == 4


def test_samples_all_rejected_are_repaired_from_the_last_samples_conversation(write_spec, fault_server, tmp_path):
    # every sample breaks the schema; the repair turn is answered right
    server = fault_server(schedule=lambda key, attempt: "schema" if tag(key) is not None else None)
    spec = _with(write_spec(n=3, runtime={"concurrency": 1, "batch_size": 3}),
                 samples={"n": 2, "pick": "first-accepted"}, repair={"max_attempts": 1, "codes": ["SCHEMA001"]})
    store = tmp_path / "store"
    run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress", check=True)
    assert sql(store, "SELECT count(*) FILTER (status = 'accepted') FROM records")[0][0] == 3
    for rows in _chains(store).values():
        assert [(a, s, st) for a, s, st, _ in rows] == [(1, 0, "rejected"), (2, 1, "rejected"), (3, 1, "accepted")]
    assert sql(store, "SELECT DISTINCT repairs FROM record_attempts WHERE feedback IS NOT NULL") == [(2,)]
    repairs = [k for k, _, _ in server.log if "was rejected (repair 1 of 1)" in k]
    assert len(repairs) == 3
