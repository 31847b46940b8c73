"""How a store's records were made, as plotted by the report and kept in a snapshot's stats.json:
accept rate over each run, teacher latency, status counts and review progress."""

from __future__ import annotations

from collections import Counter

from mashbill.factory.stats import percentiles
from mashbill.factory.store import Store

MAX_POINTS = 120


def _downsample(points: list, limit: int = MAX_POINTS) -> list:
    if len(points) <= limit:
        return points
    step = len(points) / limit
    out = [points[int(i * step)] for i in range(limit)]
    out[-1] = points[-1]
    return out


def store_series(store: Store, spec_hashes: list[str] | None, review: dict | None) -> dict:
    """Accept rate over each run, teacher latency, status counts and review progress."""
    import numpy as np

    runs: dict[str, dict] = {}
    timeline = store.run_timeline(spec_hashes).to_pydict()
    for run_id, spec, accepted in zip(timeline["run_id"], timeline["spec"], timeline["accepted"]):
        n = len(accepted)
        cum = np.cumsum(np.array(accepted, dtype=np.int64)).tolist()
        # the points _downsample keeps, each [records so far, accept rate so far] as the row-by-row walk gave it
        at = _downsample(range(n))
        runs[run_id] = {"run_id": run_id, "spec": spec, "n": n, "accepted": cum[-1] if n else 0,
                        "points": [[i + 1, round(cum[i] / (i + 1), 4)] for i in at]}
    lat = store.call_latencies(spec_hashes)
    status = store.status_counts(spec_hashes)
    if review is None:
        review = review_progress(store, spec_hashes)
    return {"accept_rate": list(runs.values()), "latency": {**percentiles(lat, (50, 95)), "values": _downsample(sorted(lat), 400)},
            "status": status, "review": review}


def review_progress(store: Store, spec_hashes: list[str] | None) -> dict | None:
    """Review outcomes per record, decided as selection decides them (factory.usable.resolve_decisions)."""
    from mashbill.factory.usable import resolve_decisions

    total = sum(store.status_counts(spec_hashes).values())
    rows = store.review_rows(spec_hashes=spec_hashes)
    if not rows:
        return None
    per: dict[str, list[dict]] = {}
    for r in rows:
        per.setdefault(r["record_id"], []).append(r)
    outputs = {rec.id: rec.output for rec in store.records(ids=sorted(per))}
    c = Counter(resolve_decisions(rs_, outputs.get(rid)).state for rid, rs_ in per.items())
    reviewed = sum(n for state, n in c.items() if state != "none")
    return {"records": total, "reviewed": reviewed, "accepted": c["accepted"], "corrected": c["corrected"],
            "rejected": c["rejected"], "disagreements": c["disagreement"], "unreviewed": total - reviewed}
