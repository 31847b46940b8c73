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
    if out[-1] is not points[-1]:
        out[-1] = points[-1]
    return out


def store_series(store: Store, spec_hashes: list[str] | None, review: dict | None) -> dict:
    """Accept rate over each run, teacher latency, status counts and review progress."""
    runs: dict[str, dict] = {}
    for run_id, spec, status in store.record_timeline(spec_hashes):
        run = runs.setdefault(run_id, {"run_id": run_id, "spec": spec, "n": 0, "accepted": 0, "points": []})
        run["n"] += 1
        run["accepted"] += status == "accepted"
        run["points"].append([run["n"], round(run["accepted"] / run["n"], 4)])
    for run in runs.values():
        run["points"] = _downsample(run["points"])
    lat = store.call_latencies(spec_hashes)
    status = store.status_counts(spec_hashes)
    if review is None:
        review = review_progress(store, spec_hashes)
    return {"accept_rate": list(runs.values()), "latency": {**percentiles(lat, (50, 95)), "values": _downsample(sorted(lat), 400)},
            "status": status, "review": review}


def review_progress(store: Store, spec_hashes: list[str] | None) -> dict | None:
    total = sum(store.status_counts(spec_hashes).values())
    rows = store.review_rows(spec_hashes=spec_hashes)
    if not rows:
        return None
    per: dict[str, set] = {}
    for rid, decision, corrected, st in ((r["record_id"], r["decision"],
                                          r["corrected_output"] is not None and bool(r["correction_valid"]),
                                          r["status"]) for r in rows):
        if st != "submitted":
            continue
        per.setdefault(rid, set()).add("corrected" if corrected else decision)
    c = Counter()
    for votes in per.values():
        if "corrected" in votes:
            c["corrected"] += 1
        elif votes >= {"accept", "reject"}:
            c["disagreements"] += 1
        elif "reject" in votes:
            c["rejected"] += 1
        elif "accept" in votes:
            c["accepted"] += 1
    return {"records": total, "reviewed": len(per), "accepted": c["accepted"], "corrected": c["corrected"],
            "rejected": c["rejected"], "disagreements": c["disagreements"], "unreviewed": total - len(per)}
