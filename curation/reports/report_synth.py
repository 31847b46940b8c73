"""Report figures for query synthesis (diversity, quotas, filters) and the judge (scores, pairs, calibration).

Diversity of a queries spec's pool: kept queries per cell against the quota, distinct-1/distinct-2 (unique
word uni-/bigrams over all of them), the nearest-neighbour cosine distance of each pooled query to the seeds
(all-MiniLM-L6-v2, `curation.reports.minilm`; absent when the model package is not installed), the filter codes
and the holdout hits (re-checked here against the spec's holdout files, the same check as validation).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec, find_spec, load_spec

_WORD = re.compile(r"\w+", re.UNICODE)
SCREEN_CODES = ("SYN001", "SYN002", "SYN003", "SYN004", "SYN005", "SYN006", "SYN007", "SYN008", "SYN009", "SYN010",
                "SYN011", "SYN012", "SYN013", "SYN020", "LEAK001")
DUP_CODES = ("SYN003", "SYN004", "SYN005", "SYN020")


def distinct_n(texts: list[str], n: int) -> float:
    """Unique word n-grams / all word n-grams over the texts (lower-cased); 0.0 for none."""
    grams: list[tuple[str, ...]] = []
    for t in texts:
        words = _WORD.findall(t.casefold())
        grams += [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def stored_spec_resolver(store: Store):
    """(name, version, hash) -> the spec: the path its runs recorded, else the library; None if neither matches."""
    paths = store.spec_paths()

    def resolve(name: str, version: int, shash: str) -> ResolvedSpec | None:
        for cand in [*paths.get(shash, []), f"{name}@{version}"]:
            try:
                rs = load_spec(cand if cand.endswith(".yaml") else find_spec(cand))
            except Exception:  # moved, edited or not in this library
                continue
            if rs.hash == shash:
                return rs
        return None

    return resolve


def synthesis_figures(store: Store, resolve=None) -> list[dict]:
    resolve = resolve or stored_spec_resolver(store)
    from mashbill.curation.reports import minilm
    from mashbill.factory.generate.synth import plan_cells, pool_items
    from mashbill.validators.queries.queries import holdout_hits, holdout_items

    out = []
    for name, version, shash, _ in store.stored_specs(kinds=["queries"]):
        rs = resolve(name, version, shash)
        if rs is None:
            continue
        items = pool_items(store, rs)
        texts = [i["query"] for i in items]
        quotas = {c.name: c.quota for c in plan_cells(rs)}
        kept = Counter(i["cell"] for i in items)
        codes = store.verdict_counts(shash)
        calls = sum(store.status_counts([shash]).values())
        dropped = sum(n for c, n in codes.items() if c in SCREEN_CODES)
        dist = minilm.nearest_distance(texts, [r["query"] for r in rs.seeds])
        out.append({
            "spec": rs.ref, "queries": len(texts), "target": rs.spec.synthesis.target, "calls": calls,
            "cells": {c: {"kept": kept.get(c, 0), "quota": q} for c, q in sorted(quotas.items())},
            "cells_met": sum(kept.get(c, 0) >= q for c, q in quotas.items()), "cells_total": len(quotas),
            "traps": sum(bool(i.get("trap")) for i in items),
            "langs": dict(sorted(Counter(i["lang"] for i in items).items())),
            "distinct1": round(distinct_n(texts, 1), 4), "distinct2": round(distinct_n(texts, 2), 4),
            "seed_distinct2": round(distinct_n([r["query"] for r in rs.seeds], 2), 4),
            "nn_distance": dist, "filter_codes": codes, "offered": len(texts) + dropped,
            "dup_share": round(sum(codes.get(c, 0) for c in DUP_CODES) / max(1, len(texts) + dropped), 4),
            "holdout_hits": holdout_hits(texts, holdout_items(rs)),
            "cross_shard_dropped": codes.get("SYN020", 0),  # dropped by `mashbill merge` (validators.queries.pool_merge)
        })
    return out


def _human_decisions(store: Store, ids: list[str]) -> dict[str, str]:
    if not ids:
        return {}
    latest: dict[str, tuple] = {}
    for r in store.review_rows(record_ids=ids, submitted=True):
        when = r["responded_at"] or r["pulled_at"]
        if r["decision"] is not None and (r["record_id"] not in latest or when > latest[r["record_id"]][0]):
            latest[r["record_id"]] = (when, r["decision"])
    return {rid: d for rid, (_, d) in latest.items()}


def score_counts(scores) -> dict[str, int]:
    """judge score -> records, keyed alike whether the score came as 4 (the store) or 4.0 (a snapshot)."""
    return dict(sorted(Counter(f"{s:g}" if isinstance(s, (int, float)) else str(s) for s in scores).items()))


def snapshot_judge_figures(m: dict, path: Path) -> list[dict]:
    """The judge section of a snapshot's report: the scores it exports (`judge.parquet`, the manifest's summary)
    and its judge-ranked pairs (the manifest's preference counts: both orders, position bias, margin, errors)."""
    j, p = m.get("judge"), m.get("preference") or {}
    has_pairs = "judge" in p.get("sources", [])
    if not j and not has_pairs:
        return []
    fig: dict = {"spec": (j or {}).get("spec") or m["ref"], "judge_model": (j or {}).get("model")}
    if j:
        scores = pq.read_table(path / "judge.parquet", columns=["score"]).column("score").to_pylist()
        thr = j.get("threshold")
        fig.update(scored=len(scores), threshold=thr, mean_score=j.get("mean_score"), scores=score_counts(scores),
                   below_threshold=sum(thr is not None and s < thr for s in scores))
    if has_pairs:
        fig.update(pairs_judged_both_orders=p.get("judge_pairs_judged", 0),
                   pairs_inconsistent=p.get("judge_inconsistent", 0), pairs_below_margin=p.get("judge_below_margin", 0),
                   pair_judge_errors=p.get("judge_errors", 0), pairs=p.get("pairs", {}).get("judge", 0))
    return [fig]


def judge_figures(store: Store, resolve=None) -> list[dict]:
    resolve = resolve or stored_spec_resolver(store)
    from mashbill.curation.preference.judging import calibration
    from mashbill.curation.preference.preference import PairBuild, judge_pairs
    from mashbill.factory.generate.judge import judge_scores, pair_judgments

    out = []
    for name, version, shash, _ in store.stored_specs(exclude_kinds=["judge", "judge_pair", "queries"]):
        rs = resolve(name, version, shash)
        if rs is None or rs.spec.judge is None:
            continue
        scores = judge_scores(store, rs)
        pairs = pair_judgments(store, rs)
        if not scores and not pairs:
            continue
        failed = store.failed_count(f"{name}.judge", ["judge", "judge_pair"])
        records = store.records(spec_hash=shash, status="accepted")
        cal = calibration(rs, records, scores, _human_decisions(store, list(scores)))
        # the pairs as `snapshot freeze` would take them (both orders, margin, hard-rule judge errors)
        build = PairBuild()
        judge_pairs(rs, records, pairs, build, set())
        notes = build.notes
        out.append({"spec": rs.ref, "judge_model": rs.spec.judge.teacher.model, "scored": len(scores),
                    "failed_judgments": failed,
                    "scores": score_counts(s["score"] for s in scores.values()),
                    "below_threshold": sum(isinstance(s["score"], (int, float)) and rs.spec.judge.threshold is not None
                                           and s["score"] < rs.spec.judge.threshold for s in scores.values()),
                    "pairs_judged_both_orders": notes.get("judge_pairs_judged", 0),
                    "pairs_inconsistent": notes.get("judge_inconsistent", 0),
                    "pairs_below_margin": notes.get("judge_below_margin", 0),
                    "pair_judge_errors": notes.get("judge_errors", 0),
                    **{k: cal[k] for k in ("threshold", "with_human_decision", "kappa", "judge_errors",
                                           "judge_error_examples")}})
    return out


def summary_lines(synth: list[dict], judge: list[dict]) -> list[str]:
    """The terminal summary's lines for query synthesis and the judge (the HTML has the rest)."""
    out = [f"  queries {f['spec']}: {f['queries']} kept (target {f['target']}), cells at quota {f['cells_met']} of "
           f"{f['cells_total']}, holdout hits {f['holdout_hits']}, distinct-2 {f['distinct2']:.3f}"
           + (f", cross-shard duplicates dropped {f['cross_shard_dropped']}" if f.get("cross_shard_dropped") else "")
           for f in synth]
    for f in judge:
        parts = []
        if f.get("scored") is not None:
            parts.append(f"{f['scored']} scored")
        if f.get("failed_judgments"):
            parts.append(f"{f['failed_judgments']} unparseable (JUDGE001)")
        if f.get("kappa") is not None:
            parts.append(f"kappa {f['kappa']:.3f} over {f['with_human_decision']}")
        if f.get("judge_errors") is not None:
            parts.append(f"{f['judge_errors']} judge error(s)")
        if f.get("pairs_judged_both_orders") is not None:
            parts.append(f"pairs: {f['pairs_judged_both_orders']} judged in both orders, {f['pairs_inconsistent']} "
                         f"inconsistent, {f['pair_judge_errors']} judge error(s)")
        out.append(f"  judge {f['spec']}: " + ", ".join(parts))
    return out
