"""The numbers behind `mashbill report`, from a store or from a snapshot (which keeps them in stats.json)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from mashbill.curation.reports.run_stats import store_series
from mashbill.curation.selection.labels import cell_name, dims_for, labels_of
from mashbill.factory.store import Store

log = logging.getLogger(__name__)

TOKEN_SAMPLE = 20000


# ---------------------------------------------------------------- whole reports


def from_snapshot(path: Path) -> dict:
    from mashbill.curation.reports.report_synth import snapshot_judge_figures
    from mashbill.curation.snapshots.snapshot import SPLITS, verify

    m = verify(path)
    stats = json.loads((path / "stats.json").read_text(encoding="utf-8"))
    cells, langs, tokens = {}, {}, []
    for s in SPLITS:
        t = pq.read_table(path / "data" / f"{s}.parquet", columns=["cell", "lang", "n_tokens"]).to_pydict()
        cells[s] = dict(sorted(Counter(t["cell"]).items()))
        langs[s] = dict(sorted(Counter(t["lang"]).items()))
        tokens += [n for n in t["n_tokens"] if n is not None]
    tp = m["trainer_profile"]
    return {
        "title": f"Snapshot {m['ref']}", "source": "snapshot", "path": str(path), "kind": m["kind"],
        "summary": {"snapshot id": m["snapshot_id"][:16], "examples": m["selection"]["examples"],
                    **{f"{s} examples": m["splits"]["counts"][s] for s in SPLITS},
                    "left out": m["rejects"]["total"], "cells below quota": len(m["cells"]["below_quota"]),
                    "specs": ", ".join(f"{s['name']}@{s['version']}" for s in m["specs"]),
                    "teacher": ", ".join(sorted({t["model"] for t in m["teacher"]})) or "n/a"},
        "dims": m["cells"]["dims"], "labels": cells, "languages": langs,
        "tokens": {"values": tokens, "max_seq_len": tp["max_seq_len"], "tokenizer": tp["tokenizer"]} if tokens else None,
        "verdicts": m["verdicts"], "rejects": m["rejects"]["by_code"], "below_quota": m["cells"]["below_quota"],
        "accept_rate": stats["accept_rate"], "latency": stats["latency"], "review": stats.get("review"),
        "preference": m.get("preference"), "judge": snapshot_judge_figures(m, path),
    }


def from_store(path: Path) -> dict:
    from mashbill.specs import find_spec, load_spec
    from mashbill.specs.model import TrainerProfile

    with Store.open(path, read_only=True) as store:
        specs = store.stored_specs()
        cells: dict[str, dict] = {}
        langs: dict[str, dict] = {}
        convs: dict[tuple, list] = {}
        profiles: dict[tuple, tuple] = {}
        dims_used = None
        for name, version, shash, kind in specs:
            if kind in ("judge", "judge_pair", "queries"):
                continue  # judgments and synthesized queries have their own figures (report_synth)
            group = f"{name}@{version}"
            resolved = None
            try:
                cand = load_spec(find_spec(f"{name}@{version}"))
                resolved = cand if cand.hash == shash else None
            except Exception:  # a spec that is not in the library: fall back to the default profile
                resolved = None
            dims = dims_for(kind, resolved.spec.curation.quotas.dims if resolved else [])
            dims_used = dims_used or dims
            c, lg = Counter(), Counter()
            profile = resolved.spec.trainer_profile if resolved else TrainerProfile()
            key = (profile.model_dump_json(), str(resolved.home) if resolved else "")
            profiles[key] = (profile, resolved.home if resolved else None)
            for rec in store.records(spec_hash=shash, status="accepted"):
                labels = labels_of(dims, kind, rec.input, rec.output, rec.meta)
                c[f"{cell_name(labels, dims)}"] += 1
                lg[rec.input.get("lang") or rec.meta.get("lang") or "none"] += 1
                convs.setdefault(key, []).append((rec.id, rec.training_messages))
            cells[group] = dict(sorted(c.items()))
            langs[group] = dict(sorted(lg.items()))
        series = store_series(store, None, None)
        from mashbill.curation.reports.report_synth import judge_figures, synthesis_figures

        synthesis, judge = synthesis_figures(store), judge_figures(store)
        verdicts = store.verdict_counts()
        verdict_records = store.verdict_record_counts()
        examples = store.verdict_examples()
    tokens, max_len, tokenizer, sampled = [], None, None, False
    from mashbill.curation.snapshots.tokens import token_lengths

    for key, items in convs.items():
        profile, base = profiles[key]
        if len(items) > TOKEN_SAMPLE:
            items = sorted(items, key=lambda t: hashlib.sha256(t[0].encode()).hexdigest())[:TOKEN_SAMPLE]
            sampled = True
        lengths = token_lengths(profile, base, [m for _, m in items])
        if lengths:
            tokens += lengths
            max_len = profile.max_seq_len if max_len is None else min(max_len, profile.max_seq_len)
            tokenizer = profile.tokenizer
    total = sum(series["status"].values())
    return {
        "title": f"Store {path}", "source": "store", "path": str(path), "kind": ", ".join(sorted({s[3] for s in specs})),
        "summary": {"records": total, **{k: v for k, v in series["status"].items()},
                    "accept rate": f"{series['status'].get('accepted', 0) / total:.1%}" if total else "n/a",
                    "specs": ", ".join(f"{s[0]}@{s[1]}" for s in specs),
                    "teacher calls": series["latency"].get("n", 0)},
        "dims": dims_used or [], "labels": cells, "languages": langs,
        "tokens": ({"values": tokens, "max_seq_len": max_len, "tokenizer": tokenizer, "sampled": sampled}
                   if tokens else None),
        "verdicts": verdicts, "verdict_records": verdict_records, "rejects": None, "below_quota": {},
        "accept_rate": series["accept_rate"],
        "latency": series["latency"], "review": series["review"], "preference": None,
        "synthesis": synthesis, "judge": judge, "examples": examples,
    }
