"""`mashbill validate quickstart-complexity --store DIR` (spec mode) applies the spec's complexity rules to the stored
labels: reject codes and the heuristic flag reach the report and the store."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mashbill.cli import main
from mashbill.factory.records import Record, SpecRef
from mashbill.factory.store import Store
from mashbill.specs import find_spec, load_spec, render_prompt

ROWS = [  # id, query, label, codes that must be reported for it
    ("c1", "Weißt du noch, welche IP-Adresse ich dir vorhin genannt habe?", "complex", {"CPLX001", "CPLX006"}),
    ("c2", "What is the capital of Canada?", "complex", {"CPLX005", "CPLX006"}),
    ("c3", "Implement the A* pathfinding algorithm on a grid in TypeScript.", "complex", set()),
    ("c4", "What did I say earlier about the port of the staging server?", "memory_recall", set()),
]


def test_spec_mode_applies_the_complexity_rules(tmp_path):
    rs = load_spec(find_spec("quickstart-complexity"))
    assert "rules" in rs.file_paths
    ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
    records = []
    for rid, query, label, _ in ROWS:
        prompt = render_prompt(rs, {"query": query, "lang": "en"}, rid)
        records.append(Record(rid, "complexity", {"query": query, "lang": "en"}, {"complexity": label},
                              json.dumps({"complexity": label}), ref, "accepted", prompt.training_messages,
                              {**prompt.meta(), "lang": "en"}))
    with Store.open(tmp_path) as store:
        run = store.begin_run(spec_name=rs.spec.name, spec_version=rs.spec.version, spec_hash=rs.hash,
                              kind="complexity", backend="test", model="test", model_sha256=None, model_info=None,
                              sampling={})
        store.write_batch(run, records, {}, [])
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["validate", "quickstart-complexity", "--store", str(tmp_path), "--report", str(out),
                                    "--no-spans", "--no-expectations"], catch_exceptions=False)
    assert res.exit_code == 1, res.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["rules"]["rule_set"] == rs.spec.rules.rsplit("/", 1)[-1].removesuffix(".yaml")
    assert report["rejected_records"] == 2
    for rid, _, _, codes in ROWS:
        got = {c for c, ex in report["examples"].items() for e in ex if e["record"] == rid}
        assert got == codes, (rid, got)
    with Store.open(tmp_path, read_only=True) as store:
        stored = store.sql("SELECT record_id, code FROM verdicts WHERE stage = 'validate' ORDER BY ALL").to_pylist()
    assert {(r["record_id"], r["code"]) for r in stored} == {(rid, c) for rid, _, _, cs in ROWS for c in cs}
