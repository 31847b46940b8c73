"""The quick start's last step: freeze every spec and write the report, idempotently."""

from __future__ import annotations

from mashbill.curation.pipeline import freeze_and_report
from mashbill.curation.snapshots.snapshot import ls, verify
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.curation.conftest import SEEDS, add_records


def test_freeze_and_report_is_idempotent(lib, tmp_path):
    store = tmp_path / "store"
    a = lib.write("plan-a", seeds=SEEDS[:12])
    b = lib.write("plan-b", seeds=SEEDS[12:])
    empty = lib.write("plan-c", seeds=SEEDS[:2])
    with Store.open(store) as s:
        add_records(s, load_spec(a))
        add_records(s, load_spec(b))
        add_records(s, load_spec(empty), rejected_by_validation={q: "HR001" for q, *_ in SEEDS[:2]})
    first = freeze_and_report(store, [a, b, empty], tokens=False)
    assert [r.manifest["ref"] for r in first.snapshots] == ["plan-a@1", "plan-b@1"]
    assert list(first.skipped) == ["plan-c@1"] and "selection is empty" in first.skipped["plan-c@1"]
    assert first.report == store / "report.html" and 'data-plot="labels"' in first.report.read_text()
    assert any(line.startswith("snapshot plan-a@1: id ") for line in first.summary)
    # running the quick start again adds no snapshot: identical content reuses the latest version
    again = freeze_and_report(store, [a, b, empty], tokens=False)
    assert [r.snapshot_id for r in again.snapshots] == [r.snapshot_id for r in first.snapshots]
    assert sorted(x["ref"] for x in ls(store / "snapshots")) == ["plan-a@1", "plan-b@1"]
    # new records make a new version
    with Store.open(store) as s:
        from mashbill.factory.records import Verdict

        rec = s.records(spec_hash=load_spec(a).hash)[0]
        s.record_validation(spec_hash=None, source="store", results={rec.id: [Verdict("HR003", "reject", "x")]},
                            counts={})
    third = freeze_and_report(store, [a], tokens=False)
    assert third.snapshots[0].manifest["ref"] == "plan-a@2" and verify(third.snapshots[0].path)
