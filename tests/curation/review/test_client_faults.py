"""Bad input and faults: each gets a clear message, nothing in the store is lost, re-running completes the work."""

from __future__ import annotations

import json

import pytest

from mashbill.curation.review.client import resolve_connection
from mashbill.curation.review.errors import ReviewError
from mashbill.factory.store import Store
from tests.conftest import free_port, run_cli
from tests.curation.review.conftest import (Annotator, answer, by_external_id, cli, client_for, fill_store,
                                   pull_decisions, push_records, spec_copy)


def _rows(store_dir) -> list[dict]:
    with Store.open(store_dir, read_only=True) as store:
        return store.sql("SELECT record_id, reviewer, decision FROM review_decisions ORDER BY record_id").to_pylist()


def test_unreachable_server_and_missing_configuration(tmp_path):
    spec = spec_copy(tmp_path, "review-down")
    store_dir = tmp_path / "store"
    fill_store(store_dir, spec)
    url = f"http://127.0.0.1:{free_port()}"
    down = run_cli("review", "push", str(spec), "--store", str(store_dir),
                   env={"ARGILLA_API_URL": url, "ARGILLA_API_KEY": "a-secret-key-never-shown"})
    assert down.returncode == 2 and f"cannot reach the Argilla server at {url}" in down.stderr, down.stderr
    assert "a-secret-key-never-shown" not in down.stdout + down.stderr

    nothing = run_cli("review", "pull", str(spec), "--store", str(store_dir), "--home", str(tmp_path / "no-server"),
                      env={"ARGILLA_API_URL": ""})
    assert nothing.returncode == 2 and "no review server" in nothing.stderr and "review serve" in nothing.stderr

    with pytest.raises(ReviewError, match="ARGILLA_API_KEY is not"):
        resolve_connection(url=url)
    assert _rows(store_dir) == []


def test_wrong_api_key(argilla, tmp_path):
    spec = spec_copy(tmp_path, "review-key")
    store_dir = tmp_path / "store"
    fill_store(store_dir, spec)
    bad = run_cli("review", "pull", str(spec), "--store", str(store_dir),
                  env={"ARGILLA_API_URL": argilla.url, "ARGILLA_API_KEY": "wrong-key-0123456789"})
    assert bad.returncode == 2 and "rejected the API key" in bad.stderr, bad.stderr
    assert "wrong-key-0123456789" not in bad.stdout + bad.stderr
    # the real key works through the same variables, and never shows up either
    ok = run_cli("review", "push", str(spec), "--store", str(store_dir), "--select", "flagged",
                 env={"ARGILLA_API_URL": argilla.url, "ARGILLA_API_KEY": argilla.owner_key})
    assert ok.returncode == 0 and "pushed 3 record(s)" in ok.stdout, ok.stderr
    assert argilla.owner_key not in ok.stdout + ok.stderr
    assert argilla.owner_key not in (argilla.home / "server.log").read_text()


def test_dataset_deleted_in_argilla(argilla, tmp_path):
    spec = spec_copy(tmp_path, "review-deleted")
    store_dir = tmp_path / "store"
    ids = fill_store(store_dir, spec)
    summary = push_records(argilla, spec, store_dir, "all")
    annotator = Annotator(argilla.url, argilla.annotator_key)
    annotator.respond(by_external_id(annotator.pending(summary.dataset_id))[ids[0]]["id"], answer("accept"))
    pull_decisions(argilla, spec, store_dir)
    before = _rows(store_dir)
    assert before == [{"record_id": ids[0], "reviewer": "annotator", "decision": "accept"}]

    owner = Annotator(argilla.url, argilla.owner_key)
    owner.http.delete(f"/datasets/{summary.dataset_id}").raise_for_status()
    with pytest.raises(ReviewError, match="'review-deleted@1' is not in workspace 'mashbill'.*deleted or never pushed"):
        pull_decisions(argilla, spec, store_dir)
    assert _rows(store_dir) == before  # nothing lost

    again = push_records(argilla, spec, store_dir, "all")  # a new review starts; earlier decisions stay
    assert again.created and again.total_in_dataset == 5
    assert pull_decisions(argilla, spec, store_dir).responses == 0
    assert _rows(store_dir) == before


def test_response_for_a_record_no_longer_in_the_store(argilla, tmp_path):
    spec = spec_copy(tmp_path, "review-orphan")
    ids = fill_store(tmp_path / "full", spec)
    push_records(argilla, spec, tmp_path / "full", "all")
    annotator = Annotator(argilla.url, argilla.annotator_key)
    ds = annotator.dataset_id("review-orphan@1")
    recs = by_external_id(annotator.pending(ds))
    annotator.respond(recs[ids[0]]["id"], answer("accept"))
    annotator.respond(recs[ids[3]]["id"], answer("reject"))

    partial = tmp_path / "partial"  # the same spec's store without ids[3]
    fill_store(partial, spec, only=[0, 1, 2, 4])
    out = cli(argilla, "pull", str(spec), "--store", str(partial))
    assert "skipped 1 response(s) to record(s) no longer in the store" in out.stdout, out.stdout
    assert ids[3][:16] in out.stdout
    assert _rows(partial) == [{"record_id": ids[0], "reviewer": "annotator", "decision": "accept"}]
    # the response is still in Argilla: the full store gets both
    assert pull_decisions(argilla, spec, tmp_path / "full").stored == 2


def test_push_interrupted_midway_completes_on_rerun(argilla, tmp_path):
    spec = spec_copy(tmp_path, "review-interrupted")
    store_dir = tmp_path / "store"
    ids = fill_store(store_dir, spec)

    def die_after_first_batch(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        push_records(argilla, spec, store_dir, "all", batch_size=2, on_batch=die_after_first_batch)
    annotator = Annotator(argilla.url, argilla.annotator_key)
    ds = annotator.dataset_id("review-interrupted@1")
    assert annotator.search(ds)[0] == 2
    done = push_records(argilla, spec, store_dir, "all", batch_size=2)
    assert done.total_in_dataset == 5 and set(by_external_id(annotator.pending(ds))) == set(ids[:5])


def test_dataset_creation_interrupted_leaves_a_draft_that_push_replaces(argilla, tmp_path):
    spec = spec_copy(tmp_path, "review-draft")
    store_dir = tmp_path / "store"
    fill_store(store_dir, spec)
    owner = Annotator(argilla.url, argilla.owner_key)
    ws = next(w["id"] for w in owner.http.get("/me/workspaces").json()["items"] if w["name"] == "mashbill")
    draft = owner.http.post("/datasets", json={"name": "review-draft@1", "workspace_id": ws}).raise_for_status().json()
    owner.http.post(f"/datasets/{draft['id']}/fields",  # half of the settings, as a killed creation leaves them
                    json={"name": "query", "title": "q", "settings": {"type": "text"}}).raise_for_status()
    summary = push_records(argilla, spec, store_dir, "all")
    assert summary.created and summary.dataset_id != draft["id"] and summary.total_in_dataset == 5


def test_dataset_with_other_settings_is_refused(argilla, tmp_path):
    import argilla as rg

    spec = spec_copy(tmp_path, "review-foreign")
    store_dir = tmp_path / "store"
    fill_store(store_dir, spec)
    client = client_for(argilla)
    rg.Dataset(name="review-foreign@1", workspace="mashbill", client=client.sdk, settings=rg.Settings(
        fields=[rg.TextField(name="text")], questions=[rg.LabelQuestion(name="label", labels=["a", "b"])])).create()
    with pytest.raises(ReviewError, match="has fields \\['text'\\] and questions \\['label'\\]"):
        push_records(argilla, spec, store_dir, "all")


def test_malformed_correction_is_flagged_not_accepted(argilla, tmp_path):
    spec = spec_copy(tmp_path, "review-malformed")
    store_dir = tmp_path / "store"
    ids = fill_store(store_dir, spec)
    push_records(argilla, spec, store_dir, "flagged")
    annotator = Annotator(argilla.url, argilla.annotator_key)
    recs = by_external_id(annotator.pending(annotator.dataset_id("review-malformed@1")))
    annotator.respond(recs[ids[1]]["id"], answer("reject", "[{'task': 'single quotes are not JSON'}]"))
    out = cli(argilla, "pull", str(spec), "--store", str(store_dir)).stdout
    assert "0 valid, 1 invalid" in out and f"invalid correction {ids[1][:16]} by annotator: PARSE001" in out, out
    with Store.open(store_dir, read_only=True) as store:
        row = store.sql("SELECT correction_valid, corrected_output, correction_issues FROM review_decisions"
                        ).to_pylist()[0]
    assert row["correction_valid"] is False and row["corrected_output"] is None
    assert json.loads(row["correction_issues"])[0]["code"] == "PARSE001"
