"""Retrieved examples (factory/generate/examples.py) with the real MiniLM encoder: the k bank rows nearest to a
request are the ones MiniLM ranks nearest; never the request itself, never a test/held-out row or a holdout query;
the rows shown are stored with the record and rebuild the same prompt (docs/yield.md)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mashbill.errors import MashbillError
from mashbill.factory.generate.examples import Retriever, is_held_out, normalize, rebuild_prompt
from mashbill.factory.records import record_id
from mashbill.specs import LIBRARY, load_spec
from tests.specs.test_examples_spec import bank_row, spec_with_bank, write_bank

HOLDOUT = json.loads((LIBRARY / "shared" / "holdout" / "moe-eval@1.jsonl").read_text(encoding="utf-8")
                     .splitlines()[0])["query"]
TOPICS = ["Compute 12 times 7.", "Write a haiku about snow.", "Who wrote Faust?", "Convert 5 miles to kilometres.",
          "Explain how a heat pump works.", "Schreib ein Gedicht über den Herbst.", "What is 15% of 260?",
          "Fix this Python error: IndexError list index out of range.", "Wie viele Tage hat ein Schaltjahr?",
          "Summarise the causes of the French Revolution."]


@pytest.fixture(scope="module")
def encoder():
    from mashbill.factory.encoders.embeddings import Encoder

    return Encoder.load()


def test_never_the_request_itself_nor_a_test_or_held_out_row(tmp_path, encoder):
    request = {"query": "What is 12 * 7?", "lang": "en"}
    path = spec_with_bank(tmp_path, [bank_row(0, TOPICS[0])])
    rows = [bank_row(i, q) for i, q in enumerate(TOPICS)]
    rows += [bank_row(90, "what is 12*7"),  # the request itself: the same text once normalized
             bank_row(91, "  WHAT is 12 * 7 ?? "),  # the request itself, spelled differently
             bank_row(92, "What is 12 times 7, exactly?", record_id="REQUEST"),  # the request's own record
             bank_row(93, "What is 12 multiplied by 7?", split="test"),
             bank_row(94, "What is 12 times seven?", split="held-out"),
             bank_row(95, "What is twelve times 7?", split="eval"),
             bank_row(96, HOLDOUT),  # a benchmark query of the spec's holdout set
             bank_row(97, HOLDOUT + " Answer briefly.")]  # the same with words appended
    write_bank(tmp_path / "bank@1.jsonl", rows)
    rs = load_spec(path)
    rid = "REQUEST"  # the request's record id (a real one is a hash of the spec, and so of this bank)
    assert normalize("  WHAT is 12 * 7 ?? ") == normalize(request["query"])
    assert is_held_out(HOLDOUT + " Answer briefly.", [normalize(HOLDOUT)])
    retriever = Retriever(rs, encoder=encoder)
    never = {"b-090", "b-091", "b-092", "b-093", "b-094", "b-095", "b-096", "b-097"}
    shown_ids = set()
    for k in (1, 3, len(rows)):
        object.__setattr__(retriever, "k", k)
        shown = retriever.nearest(request["query"], rid)
        shown_ids |= {r.id for r in shown}
        assert not {r.id for r in shown} & never, [r.id for r in shown]
        assert len(shown) == min(k, len(rows) - len(never))
    # what is left is shown: the filter takes out exactly the request, the non-train rows and the holdout queries
    assert shown_ids == {r["id"] for r in rows} - never
    # the rows nearest to the request are otherwise its paraphrases: without the filter they would have been first
    sims = encoder.encode([request["query"]] + [r["query"] for r in rows])
    sims = sims / np.linalg.norm(sims, axis=1, keepdims=True)
    ranked = [rows[i]["id"] for i in np.argsort(-(sims[1:] @ sims[0]))]
    assert set(ranked[:3]) & never


def test_the_nearest_rows_are_the_ones_minilm_ranks_nearest(tmp_path, encoder):
    rows = [bank_row(i, q) for i, q in enumerate(TOPICS)]
    rs = load_spec(spec_with_bank(tmp_path, rows))
    texts = [r["query"] for r in rows]
    mat = encoder.encode(texts)
    mat = mat / np.linalg.norm(mat, axis=1, keepdims=True)
    cached = Retriever(rs, encoder=encoder, cache_root=tmp_path / "embeddings")
    plain = Retriever(rs, encoder=encoder)
    for query in ("Berechne 18 mal 4.", "Compose a limerick about a cat.", "Wer schrieb die Räuber?",
                  "How many centimetres are in 3 feet?"):
        q = encoder.encode([query])[0]
        order = np.argsort(-(mat @ (q / np.linalg.norm(q))), kind="stable")
        want = [rows[i]["id"] for i in order[:3]][::-1]  # nearest last
        assert [r.id for r in cached.nearest(query)] == want
        assert [r.id for r in plain.nearest(query)] == want
    # the bank went to the embedding cache once; the requests did not add a file each
    assert len(list((tmp_path / "embeddings").rglob("part-*.parquet"))) == 1
    again = Retriever(rs, encoder=encoder, cache_root=tmp_path / "embeddings")
    assert [r.id for r in again.nearest("Compose a limerick about a cat.")] == \
        [r.id for r in plain.nearest("Compose a limerick about a cat.")]
    assert len(list((tmp_path / "embeddings").rglob("part-*.parquet"))) == 1  # a later run reads the bank back


def test_the_rows_shown_are_in_the_meta_and_rebuild_the_same_prompt(tmp_path, encoder):
    rows = [bank_row(i, q) for i, q in enumerate(TOPICS)]
    rs = load_spec(spec_with_bank(tmp_path, rows))
    inputs = {"query": "Berechne 18 mal 4.", "lang": "de"}
    rid = record_id(rs.hash, inputs)
    prompt = Retriever(rs, encoder=encoder).prompt(inputs, rid)
    meta = json.loads(json.dumps(prompt.meta()))  # as the store keeps it
    shown = meta["examples"]
    assert shown["bank_sha256"] == rs.files["examples.bank"] and len(shown["ids"]) == 3
    system = prompt.teacher_messages[0]["content"]
    by_id = {r["id"]: r for r in rows}
    positions = [system.index(f"Request: {by_id[i]['query']}\nPlan: ") for i in shown["ids"]]
    assert positions == sorted(positions)  # in the stored order
    assert "{{" not in system and "Divide 9600 by 32" not in system  # the fixed examples are gone
    again = rebuild_prompt(rs, inputs, rid, meta)
    assert again.teacher_messages == prompt.teacher_messages
    assert again.training_messages == prompt.training_messages
    write_bank(tmp_path / "bank@1.jsonl", rows[:-1])  # a changed bank cannot rebuild an older record's prompt
    with pytest.raises(MashbillError, match="bank"):
        rebuild_prompt(load_spec(rs.path), inputs, rid, meta)
