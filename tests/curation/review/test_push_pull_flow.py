"""Push -> annotate (as the annotator, through the REST API the UI uses) -> pull, against the real server."""

from __future__ import annotations

import json
import time

import pyarrow.parquet as pq
import pytest

from mashbill.curation.review.errors import ReviewError
from mashbill.curation.review.select import parse_selection

from mashbill.factory.store import Store
from tests.conftest import run_cli
from tests.curation.review.conftest import (Annotator, answer, by_external_id, cli, fill_store, pull_decisions, push_records,
                                   spec_copy, status_filter)

RIGHT_FIX = json.dumps([{"task": "Compute 98.765 - 45.678 * 2 exactly.", "category": "precision_tools",
                         "mcp_tool": "calculate", "mcp_args": {"expression": "98.765 - 45.678 * 2"}}])
RULE_BREAKING_FIX = json.dumps([{"task": "Explain the heating demand.", "category": "science"},
                                {"task": "Compute it.", "category": "precision_tools"}])  # no mcp_tool: PLAN006
HAMLET_FIX = json.dumps([{"task": "Summarise Shakespeare's Hamlet in two sentences.", "category": "general"}])
MALFORMED_FIX = '[{"task": "Summarise Hamlet", "category": "general",]'


def _decisions(store_dir) -> dict[str, dict]:
    with Store.open(store_dir, read_only=True) as store:
        rows = store.sql("SELECT * FROM review_decisions ORDER BY record_id, reviewer").to_pylist()
    return {r["record_id"]: r for r in rows}


def _without_pulled_at(rows: dict) -> dict:
    return {k: {c: v for c, v in row.items() if c != "pulled_at"} for k, row in rows.items()}


def test_push_annotate_pull_freeze(argilla, tmp_path):
    spec = spec_copy(tmp_path, "review-flow", "curation:\n  require_review: true\n")
    store_dir = tmp_path / "store"
    ids = fill_store(store_dir, spec)

    first = cli(argilla, "push", str(spec), "--select", "all", "--store", str(store_dir))
    assert "pushed 5 record(s)" in first.stdout and "(created)" in first.stdout, first.stdout
    again = push_records(argilla, spec, store_dir, "all")
    assert (again.pushed, again.created, again.total_in_dataset) == (5, False, 5)

    annotator = Annotator(argilla.url, argilla.annotator_key)
    ds = annotator.dataset_id("review-flow@1")
    pending = by_external_id(annotator.pending(ds))
    assert set(pending) == set(ids[:5])  # the failed record was never pushed, nothing twice
    shown = pending[ids[1]]
    assert "98.765" in shown["fields"]["query"] and "`math`" in shown["fields"]["output"]
    assert "HR001" in shown["fields"]["verdicts"] and shown["metadata"]["verdict_codes"] == ["HR001"]
    assert shown["metadata"]["language"] == "de" and shown["metadata"]["spec_version"] == 1
    suggested = {s["value"] if isinstance(s["value"], str) else tuple(s["value"]) for s in shown["suggestions"]}
    assert "reject" in suggested  # a rule rejected it: the decision is suggested as reject, scored low
    assert any(isinstance(v, str) and '"math"' in v for v in suggested)  # the correction box starts as the plan
    assert ("math",) in suggested  # categories, canonical names
    guidelines = annotator.http.get(f"/datasets/{ds}").raise_for_status().json()["guidelines"]
    assert "# Review of review-flow@1" in guidelines and "| HR001 | reject |" in guidelines
    assert "`precision_tools`" in guidelines and '"maxItems": 4' in guidelines

    annotator.respond(pending[ids[0]]["id"], answer("accept", complexity="moderate", categories=["precision_tools"]))
    annotator.respond(pending[ids[1]]["id"], answer("reject", RIGHT_FIX))
    annotator.respond(pending[ids[2]]["id"], {}, status="discarded")
    annotator.respond(pending[ids[3]]["id"], answer("reject", RULE_BREAKING_FIX))
    fifth = annotator.respond(pending[ids[4]]["id"], answer("accept", MALFORMED_FIX))
    assert annotator.pending(ds) == []

    pulled = cli(argilla, "pull", str(spec), "--store", str(store_dir), "--json")
    summary = json.loads(pulled.stdout)
    assert summary["responses"] == 5 and summary["stored"] == 5 and summary["replaced"] == 0
    assert summary["by_status"] == {"submitted": 4, "discarded": 1}
    assert summary["corrections_valid"] == 1 and len(summary["corrections_invalid"]) == 2
    rows = _decisions(store_dir)
    assert set(rows) == set(ids[:5]) and {r["reviewer"] for r in rows.values()} == {"annotator"}
    assert all(r["dataset"] == "review-flow@1" and r["responded_at"] is not None for r in rows.values())

    accepted = rows[ids[0]]
    assert (accepted["status"], accepted["decision"], accepted["corrected_output"]) == ("submitted", "accept", None)
    assert json.loads(accepted["response_values"])["complexity"] == {"value": "moderate"}

    corrected = rows[ids[1]]
    assert corrected["decision"] == "reject" and corrected["correction_valid"] is True
    assert json.loads(corrected["corrected_output"]) == json.loads(RIGHT_FIX)

    discarded = rows[ids[2]]
    assert (discarded["status"], discarded["decision"], discarded["corrected_output"]) == ("discarded", None, None)

    rule_broken = rows[ids[3]]
    assert rule_broken["correction_valid"] is False
    assert json.loads(rule_broken["corrected_output"]) == json.loads(RULE_BREAKING_FIX)
    assert "PLAN006" in {i["code"] for i in json.loads(rule_broken["correction_issues"])}

    malformed = rows[ids[4]]
    assert malformed["correction_valid"] is False and malformed["corrected_output"] is None
    assert [i["code"] for i in json.loads(malformed["correction_issues"])] == ["PARSE001"]
    assert json.loads(malformed["response_values"])["correction"]["value"] == MALFORMED_FIX  # kept as given

    # Pulling again changes nothing; a changed answer replaces that reviewer's row.
    pull_decisions(argilla, spec, store_dir)
    assert _without_pulled_at(_decisions(store_dir)) == _without_pulled_at(rows)
    # a correction that fits the fifth request (the first wave reused the arithmetic fix here: "1+1" for a Hamlet
    # summary, which the argument-fidelity rules now rightly refuse as an invented operand)
    annotator.update(fifth["id"], answer("reject", HAMLET_FIX))
    assert pull_decisions(argilla, spec, store_dir).replaced == 5
    rows = _decisions(store_dir)
    # the server's search view of a changed response can lag its write on a busy machine: pull again until the
    # changed answer is the one stored (bounded), then check it
    deadline = time.monotonic() + 60
    while (json.loads(rows[ids[4]]["response_values"]).get("correction", {}).get("value") != HAMLET_FIX
           and time.monotonic() < deadline):
        time.sleep(0.5)
        pull_decisions(argilla, spec, store_dir)
        rows = _decisions(store_dir)
    assert len(rows) == 5 and rows[ids[4]]["decision"] == "reject" and rows[ids[4]]["correction_valid"] is True

    # A re-push after review keeps every answer.
    push_records(argilla, spec, store_dir, "all")
    assert annotator.search(ds, status_filter(["submitted"]))[0] == 4

    # The snapshot honours the decisions: corrections replace the teacher output, rejected and unreviewed
    # records (the spec requires review) stay out with their codes.
    frozen = run_cli("snapshot", "freeze", str(spec), "--name", "reviewed", "--version", "1", "--store",
                     str(store_dir), "--no-tokens", check=True)
    snap = store_dir / "snapshots" / "reviewed@1"
    assert (snap / "manifest.json").is_file(), frozen.stdout
    rows = [r for f in sorted((snap / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    trained = {r["record_id"]: json.loads(r["completion"]) for r in rows}
    assert set(trained) == {ids[0], ids[1], ids[4]}
    assert trained[ids[1]] == json.loads(RIGHT_FIX)  # the reviewer's correction, not the teacher's `math` plan
    assert trained[ids[4]] == json.loads(HAMLET_FIX)
    assert trained[ids[0]][0]["mcp_tool"] == "calculate"  # accepted as the teacher wrote it
    rejects = {r["record_id"]: list(r["codes"]) for r in pq.read_table(snap / "rejects.parquet").to_pylist()}
    assert set(rejects) == {ids[2], ids[3], ids[5]}
    assert any(c.startswith("REVIEW") for c in rejects[ids[2]]) and any(c.startswith("REVIEW") for c in rejects[ids[3]])


def test_selection_pushes_only_what_needs_eyes(argilla, tmp_path):
    spec = spec_copy(tmp_path, "review-select")
    store_dir = tmp_path / "store"
    ids = fill_store(store_dir, spec)
    annotator = Annotator(argilla.url, argilla.annotator_key)

    out = cli(argilla, "push", str(spec), "--select", "flagged", "--store", str(store_dir)).stdout
    assert "pushed 3 record(s)" in out, out
    ds = annotator.dataset_id("review-select@1")
    assert set(by_external_id(annotator.pending(ds))) == {ids[1], ids[2], ids[3]}

    low = push_records(argilla, spec, store_dir, "low-confidence:0.85")
    assert low.pushed == 2  # the reject (0.5) and the penalty (0.8); the flag is at 0.9

    sample = push_records(argilla, spec, store_dir, "random:2")
    assert sample.pushed == 2 and 3 <= sample.total_in_dataset <= 5  # may overlap what is there, never twice
    assert push_records(argilla, spec, store_dir, "random:2").total_in_dataset == sample.total_in_dataset
    assert push_records(argilla, spec, store_dir, "all").total_in_dataset == 5
    assert annotator.search(ds)[0] == 5

    with pytest.raises(ReviewError, match="--select: expected flagged"):
        parse_selection("some")
    with pytest.raises(ReviewError, match="random:N needs N >= 1"):
        parse_selection("random:0")
