"""How a store's records were made, as plotted by the report and kept in a snapshot's stats.json:
accept rate over each run, teacher latency, status counts and review progress."""

from __future__ import annotations

from collections import Counter

from mashbill.factory.stats import percentiles
from mashbill.factory.store import Store

MAX_POINTS = 120


def _ph(values: list) -> str:
    return ", ".join("?" for _ in values)


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
    where = f"WHERE spec_hash IN ({_ph(spec_hashes)})" if spec_hashes else ""
    params = list(spec_hashes or [])
    rows = store.con.execute(
        f"SELECT r.run_id, r.spec_name || '@' || r.spec_version, r.status, r.created_at, r.record_id "
        f"FROM records r {where} ORDER BY r.run_id, r.created_at, r.record_id", params).fetchall()
    runs: dict[str, dict] = {}
    for run_id, spec, status, _, _ in rows:
        run = runs.setdefault(run_id, {"run_id": run_id, "spec": spec, "n": 0, "accepted": 0, "points": []})
        run["n"] += 1
        run["accepted"] += status == "accepted"
        run["points"].append([run["n"], round(run["accepted"] / run["n"], 4)])
    for run in runs.values():
        run["points"] = _downsample(run["points"])
    lat = [r[0] for r in store.con.execute(
        f"SELECT c.latency_s FROM teacher_calls c WHERE c.record_id IN (SELECT record_id FROM records {where}) "
        "ORDER BY c.created_at, c.call_id", params).fetchall()]
    status = dict(store.con.execute(f"SELECT status, count(*) FROM records {where} GROUP BY status ORDER BY status",
                                    params).fetchall())
    if review is None:
        review = review_progress(store, spec_hashes)
    return {"accept_rate": list(runs.values()), "latency": {**percentiles(lat, (50, 95)), "values": _downsample(sorted(lat), 400)},
            "status": status, "review": review}


def review_progress(store: Store, spec_hashes: list[str] | None) -> dict | None:
    where = f"WHERE spec_hash IN ({_ph(spec_hashes)})" if spec_hashes else ""
    params = list(spec_hashes or [])
    total = store.con.execute(f"SELECT count(*) FROM records {where}", params).fetchone()[0]
    rows = store.con.execute(
        "SELECT record_id, decision, corrected_output IS NOT NULL AND coalesce(correction_valid, false), status "
        f"FROM review_decisions WHERE record_id IN (SELECT record_id FROM records {where})", params).fetchall()
    if not rows:
        return None
    per: dict[str, set] = {}
    for rid, decision, corrected, st in rows:
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
