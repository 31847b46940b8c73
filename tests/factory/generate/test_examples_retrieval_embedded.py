"""quickstart-plan@8 (retrieved examples) with the real embedded teacher (SmolLM2-135M through llama.cpp): every
record stores the bank rows it was shown, never its own request, and the prompt rebuilt from the record alone is the
one it was trained on (docs/yield.md)."""

from __future__ import annotations

import json

import pytest

from mashbill.factory.generate.examples import normalize, rebuild_prompt
from mashbill.specs import find_spec, load_spec
from tests.factory.teacher_helpers import run_cli, sql


@pytest.mark.slow
def test_quickstart_plan_8_generates_with_retrieved_examples(tmp_path):
    store = tmp_path / "store"
    out = run_cli("generate", "quickstart-plan@8", "--limit", "3", "--store", store, "--threads", "1",
                  "--no-progress", "--json", check=True, timeout=1200)
    summary = json.loads(out.stdout)
    assert summary["accepted"] + summary["rejected"] == 3
    rs = load_spec(find_spec("quickstart-plan@8"))
    by_id = {r.id: r for r in rs.bank}
    rows = sql(store, "SELECT record_id, input, messages, meta FROM records")
    assert len(rows) == 3
    for rid, inputs, messages, meta in rows:
        inputs, messages, meta = json.loads(inputs), json.loads(messages), json.loads(meta)
        shown = meta["examples"]
        assert shown["bank_sha256"] == rs.files["examples.bank"] and len(shown["ids"]) == rs.spec.examples.k
        assert all(normalize(by_id[i].query) != normalize(inputs["query"]) for i in shown["ids"])
        again = rebuild_prompt(rs, inputs, rid, meta)
        assert list(again.training_messages) == messages
        system = again.teacher_messages[0]["content"]
        assert all(f"Request: {by_id[i].query}\nPlan: " in system for i in shown["ids"])
    assert list((store / "embeddings").rglob("part-*.parquet"))  # the bank went to the store's embedding cache
