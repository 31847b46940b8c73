"""A spec's inputs: its file and inline seeds, plus the accepted queries of the `queries` specs it names
(`seeds: {from_spec: NAME@V}`), read from the store with their lineage (source spec, record, position)."""

from __future__ import annotations

from mashbill.errors import MashbillError
from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec

CARRIED = ("query", "lang", "type", "trap", "rule", "source", "licence", "lineage")


def spec_inputs(rs: ResolvedSpec, store: Store) -> list[dict]:
    """File and inline seeds first, then each `from_spec` source's pool in a stable order."""
    if not rs.seed_specs:
        return list(rs.seeds)
    from mashbill.factory.generate.synth import pool_items

    out = list(rs.seeds)
    for i, qs in rs.seed_specs:
        items = pool_items(store, qs)
        if not items:
            raise MashbillError(f"{rs.path}: seeds.{i} takes its queries from {qs.ref}, which has no accepted "
                                f"queries in store {store.root}; run `mashbill generate {qs.ref}` first")
        limit = rs.spec.seeds[i].limit
        for item in items[:limit] if limit else items:
            row = {k: item[k] for k in CARRIED if item.get(k) is not None}
            row["lineage"] = {**item.get("lineage", {}), "spec": qs.ref, "spec_hash": qs.hash}
            out.append(row)
    return out
