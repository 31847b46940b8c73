"""The accept-rate series, computed per run from columns, gives the points the row-by-row walk gave."""

from __future__ import annotations

from mashbill.curation.reports.run_stats import _downsample, store_series
from mashbill.factory.records import Record, SpecRef
from mashbill.factory.store import Store


def _row_walk(store, spec_hashes):
    """The series as it was computed before issue 29: one record at a time in timeline order."""
    runs: dict[str, dict] = {}
    for run_id, spec, status in store.record_timeline(spec_hashes):
        run = runs.setdefault(run_id, {"run_id": run_id, "spec": spec, "n": 0, "accepted": 0, "points": []})
        run["n"] += 1
        run["accepted"] += status == "accepted"
        run["points"].append([run["n"], round(run["accepted"] / run["n"], 4)])
    for run in runs.values():
        run["points"] = _downsample(run["points"])
    return list(runs.values())


def test_accept_rate_points_match_the_row_walk(tmp_path):
    ref = SpecRef("s", 1, "h" * 64)
    with Store.open(tmp_path / "s") as s:
        for r, (n, every) in enumerate(((7, 2), (300, 3), (121, 7))):  # under, over and just over 120 points
            run = s.begin_run(spec_name="s", spec_version=1, spec_hash=ref.hash, kind="plan", backend="t", model="m",
                              model_sha256=None, model_info=None, sampling={})
            for start in range(0, n, 50):  # several batches: created_at differs between them
                s.write_batch(run, [Record(f"r{r}-{i:04d}", "plan", {"query": str(i)}, [], None, ref,
                                           "rejected" if i % every == 0 else "accepted", (), {})
                                    for i in range(start, min(n, start + 50))], {}, [])
        got = store_series(s, [ref.hash], {"reviewed": 0})["accept_rate"]
        want = _row_walk(s, [ref.hash])
    assert got == want
    assert sorted(len(r["points"]) for r in got) == [7, 120, 120]
    assert sum(r["n"] for r in got) == 428
