"""Repair with the real embedded teacher (SmolLM2-135M through llama.cpp), end to end on four quick-start requests:
rejected labels are asked again with their verdicts, the repair turns reuse the conversation's prefix from the KV
cache, and every attempt is stored with the record holding the last one. Whether the 135M teacher fixes a label is
what bench/yield.py measures; here only that the path is real."""

from __future__ import annotations

import json

from teacher_helpers import run_cli, sql


def test_the_embedded_teacher_repairs_through_the_one_loop(tmp_path):
    store = tmp_path / "store"
    out = run_cli("generate", "quickstart-complexity@5", "--limit", "4", "--store", store, "--threads", "1",
                  "--no-progress", "--json", check=True, timeout=900)
    summary = json.loads(out.stdout)
    rows = sql(store, "SELECT record_id, attempt, status, raw, feedback, tokens_in, tokens_cached "
                      "FROM record_attempts ORDER BY record_id, attempt")
    chains: dict[str, list[tuple]] = {}
    for rid, *rest in rows:
        chains.setdefault(rid, []).append(tuple(rest))
    assert len(chains) == 4 and any(len(c) > 1 for c in chains.values()), chains
    records = {rid: (status, raw) for rid, status, raw in sql(store, "SELECT record_id, status, raw FROM records")}
    langs = dict(sql(store, "SELECT record_id, json_extract_string(input, '$.lang') FROM records"))
    for rid, chain in chains.items():
        assert [a for a, *_ in chain] == list(range(1, len(chain) + 1))
        assert records[rid] == chain[-1][1:3]  # the record is the last attempt
        for attempt, status, raw, feedback, tokens_in, cached in chain[1:]:
            # the verdicts, in the request's language
            assert "- CPLX" in feedback and ("wurde abgelehnt (Korrektur" if langs[rid] == "de"
                                             else "was rejected (repair") in feedback
            # the repair continues the conversation: its prompt starts with the one before, still in the KV cache
            assert cached > 0.8 * chain[attempt - 2][4]
        assert len(chain) == 3 or chain[-1][1] == "accepted" or "CPLX" not in json.dumps(chain[-1])
    assert summary["accepted"] + summary["rejected"] == 4
    assert sum(len(c) - 1 for c in chains.values()) == json.loads(
        sql(store, "SELECT stats FROM runs")[0][0])["repair"]["turns"]
