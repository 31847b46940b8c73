"""The searches, progress and metrics the annotation UI relies on, answered by our SQL search engine."""

from __future__ import annotations

from tests.curation.review.conftest import (Annotator, answer, by_external_id, fill_store, pull_decisions, push_records,
                                   spec_copy, status_filter)


def _terms(entity: str, values: list, **scope) -> dict:
    return {"filters": {"and": [{"type": "terms", "scope": {"entity": entity, **scope}, "values": values}]}}


def _range(entity: str, ge=None, le=None, **scope) -> dict:
    f = {"type": "range", "scope": {"entity": entity, **scope}}
    if ge is not None:
        f["ge"] = ge
    if le is not None:
        f["le"] = le
    return {"filters": {"and": [f]}}


def _ids(result) -> set[str]:
    return {r["external_id"] for r in result[1]}


def test_annotation_ui_searches(argilla, tmp_path):
    spec = spec_copy(tmp_path, "review-search")
    store_dir = tmp_path / "store"
    ids = fill_store(store_dir, spec)
    push_records(argilla, spec, store_dir, "all")
    annotator = Annotator(argilla.url, argilla.annotator_key)
    owner = Annotator(argilla.url, argilla.owner_key)
    ds = annotator.dataset_id("review-search@1")
    recs = by_external_id(annotator.pending(ds))
    assert set(recs) == set(ids[:5])

    annotator.respond(recs[ids[0]]["id"], answer("accept"))
    annotator.respond(recs[ids[1]]["id"], {}, status="discarded")
    annotator.respond(recs[ids[2]]["id"], answer("reject"), status="draft")
    owner.respond(recs[ids[3]]["id"], answer("reject"))

    # pending is per user: the owner's answer does not take ids[3] off the annotator's queue
    assert set(by_external_id(annotator.pending(ds))) == {ids[3], ids[4]}
    assert set(by_external_id(owner.pending(ds))) == {ids[0], ids[1], ids[2], ids[4]}
    # by response status, and combinations with pending
    assert _ids(annotator.search(ds, status_filter(["submitted"]))) == {ids[0]}
    assert _ids(annotator.search(ds, status_filter(["discarded"]))) == {ids[1]}
    assert _ids(annotator.search(ds, status_filter(["draft"]))) == {ids[2]}
    assert _ids(annotator.search(ds, status_filter(["discarded", "pending"]))) == {ids[1], ids[3], ids[4]}
    # by record status: a record with one submitted response is complete (min_submitted 1)
    assert _ids(annotator.search(ds, _terms("record", ["completed"], property="status"))) == {ids[0], ids[3]}
    # by metadata: terms (also inside lists) and ranges
    assert _ids(annotator.search(ds, _terms("metadata", ["de"], metadata_property="language"))) == {ids[1], ids[3]}
    assert _ids(annotator.search(ds, _terms("metadata", ["HR001", "HR008"], metadata_property="verdict_codes"))) \
        == {ids[1], ids[3]}
    assert _ids(annotator.search(ds, _range("metadata", ge=0.5, le=0.85, metadata_property="confidence"))) \
        == {ids[1], ids[2]}
    # by suggestion: value (inside a multi-label list), score and agent
    assert _ids(annotator.search(ds, _terms("suggestion", ["research"], question="categories", property="value"))) \
        == {ids[2]}
    assert _ids(annotator.search(ds, _range("suggestion", le=0.6, question="decision", property="score"))) == {ids[1]}
    assert _ids(annotator.search(ds, _terms("suggestion", ["smollm2-135m-instruct"], question="decision",
                                            property="agent"))) == set(ids[:5])
    # by response value, across all users (the owner's view of a dataset)
    resp = owner.http.post(f"/datasets/{ds}/records/search", json=_terms("response", ["reject"], question="decision"))
    assert {i["record"]["external_id"] for i in resp.raise_for_status().json()["items"]} == {ids[2], ids[3]}
    # text: whole words, any case, umlauts included; a field; a prefix
    assert _ids(annotator.search(ds, {"query": {"text": {"q": "HAMLET"}}})) == {ids[4]}
    assert _ids(annotator.search(ds, {"query": {"text": {"q": "heizwärmebedarf", "field": "query"}}})) == {ids[3]}
    assert _ids(annotator.search(ds, {"query": {"text": {"q": "HEIZWÄRME*"}}})) == {ids[3]}
    assert _ids(annotator.search(ds, {"query": {"text": {"q": "tetri"}}})) == set()
    # sorting by metadata, and paging with a stable total
    total, ordered = annotator.search(ds, {"sort": [{"scope": {"entity": "metadata", "metadata_property": "confidence"},
                                                     "order": "asc"}]})
    assert total == 5 and [r["external_id"] for r in ordered][:3] == [ids[1], ids[2], ids[3]]
    total, page = annotator.search(ds, {}, offset=4, limit=2)
    assert total == 5 and len(page) == 1

    # progress and metrics
    me = annotator.http.get(f"/me/datasets/{ds}/metrics").raise_for_status().json()["responses"]
    assert me == {"total": 5, "submitted": 1, "discarded": 1, "draft": 1, "pending": 2}
    progress = owner.http.get(f"/datasets/{ds}/progress").raise_for_status().json()
    assert (progress["total"], progress["completed"], progress["pending"]) == (5, 2, 3)
    props = {p["name"]: p["id"] for p in
             owner.http.get(f"/me/datasets/{ds}/metadata-properties").raise_for_status().json()["items"]}
    lang = owner.http.get(f"/metadata-properties/{props['language']}/metrics").raise_for_status().json()
    assert {v["term"]: v["count"] for v in lang["values"]} == {"en": 3, "de": 2}
    conf = owner.http.get(f"/metadata-properties/{props['confidence']}/metrics").raise_for_status().json()
    assert (conf["min"], conf["max"]) == (0.5, 1.0)


def test_disagreement_between_reviewers_is_reported(argilla, tmp_path):
    spec = spec_copy(tmp_path, "review-disagree")
    store_dir = tmp_path / "store"
    ids = fill_store(store_dir, spec)
    push_records(argilla, spec, store_dir, "all")
    annotator = Annotator(argilla.url, argilla.annotator_key)
    owner = Annotator(argilla.url, argilla.owner_key)
    ds = annotator.dataset_id("review-disagree@1")
    recs = by_external_id(annotator.pending(ds))
    annotator.respond(recs[ids[0]]["id"], answer("accept"))
    owner.respond(recs[ids[0]]["id"], answer("reject"))
    annotator.respond(recs[ids[4]]["id"], answer("accept"))
    owner.respond(recs[ids[4]]["id"], answer("accept"))

    summary = pull_decisions(argilla, spec, store_dir)
    assert summary.stored == 4
    assert summary.disagreements == [{"record_id": ids[0], "decisions": {"annotator": "accept", "mashbill": "reject"},
                                      "corrections_differ": False}]


def test_similarity_search_by_vector_and_by_record(argilla):
    import argilla as rg

    from tests.curation.review.conftest import client_for

    client = client_for(argilla)
    ds = rg.Dataset(name="review-vectors", workspace="mashbill", client=client.sdk, settings=rg.Settings(
        fields=[rg.TextField(name="text")], questions=[rg.LabelQuestion(name="label", labels=["a", "b"])],
        vectors=[rg.VectorField(name="emb", dimensions=3)])).create()
    vectors = {"x": [1.0, 0.0, 0.0], "near-x": [0.9, 0.1, 0.0], "y": [0.0, 1.0, 0.0], "minus-x": [-1.0, 0.0, 0.0]}
    ds.records.log([rg.Record(id=name, fields={"text": name}, vectors={"emb": vec}) for name, vec in vectors.items()])
    annotator = Annotator(argilla.url, argilla.annotator_key)
    dsid = annotator.dataset_id("review-vectors")

    def similar(**vector) -> list[str]:
        return [r["external_id"] for r in annotator.search(dsid, {"query": {"vector": {"name": "emb", **vector}}})[1]]

    assert similar(value=[1.0, 0.05, 0.0]) == ["x", "near-x", "y", "minus-x"]
    assert similar(value=[1.0, 0.05, 0.0], order="least_similar")[0] == "minus-x"
    x_uuid = by_external_id(annotator.search(dsid)[1])["x"]["id"]
    assert similar(record_id=x_uuid) == ["near-x", "y", "minus-x"]  # the record itself is left out
