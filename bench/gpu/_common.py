"""Shared pieces of the GPU checks: the spec with its teacher swapped, and the figures from a store."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec, load_spec

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SPEC = ROOT / "tests" / "fixtures" / "specs" / "tiny" / "tiny-plan@1.yaml"
SCHEMA_CODES = ("PARSE001", "PARSE002", "SCHEMA001", "TRUNC001")


def spec_with_teacher(path: str | Path, records: int, **teacher) -> ResolvedSpec:
    """The spec at `path` with teacher fields replaced and at least `records` inputs (its seeds, then
    variants of them). A bench, not a dataset: the hash stays the original's."""
    rs = load_spec(path)
    spec = rs.spec.model_copy(update={"teacher": rs.spec.teacher.model_copy(update=teacher)})
    seeds = list(rs.seeds)
    k = 0
    while len(seeds) < records:
        base = rs.seeds[k % len(rs.seeds)]
        seeds.append({**base, "query": f"{base['query']} (variant {k // len(rs.seeds) + 1})"})
        k += 1
    return dataclasses.replace(rs, spec=spec, seeds=tuple(seeds))


def figures(store_path: Path, wall_s: float) -> dict:
    """Throughput, prefix-cache hit rate and schema-valid rate of the (single) run in a store."""
    with Store.open(store_path, read_only=True) as store:
        status = store.status_counts()
        n, answered = sum(status.values()), sum(v for k, v in status.items() if k != "failed")
        invalid = store.records_with_codes(SCHEMA_CODES)
        prompt, cached, out = store.call_totals()
    return {"records": n, "answered": answered, "wall_s": round(wall_s, 2),
            "records_per_s": round(n / wall_s, 3) if wall_s else None,
            "tokens_out_per_s": round((out or 0) / wall_s, 1) if wall_s else None,
            "prefix_cache_hit_rate": round((cached or 0) / prompt, 4) if prompt and cached is not None else None,
            "schema_valid_rate": round((answered - invalid) / answered, 4) if answered else None}
