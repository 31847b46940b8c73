"""Query synthesis: a `queries` spec grows its seed queries into new ones, cell by cell, through the generate loop.

A cell is (type, language, trap): plain cells are the (type, language) pairs the seeds have; trap cells
are (trap rule, language) for every rule in `synthesis.traps`, shown seeds of the rule's types and told
which boundary to probe. The pool target is split over the cells (`trap_share` to the trap cells) and
every cell gets up to ceil(quota / per_call * calls_per_quota) jobs; a job is one teacher call showing
`shown` seeds of its cell and asking for `per_call` new queries. Jobs go round-robin over the cells and a
job whose cell is already full is not sent, so a run stops asking once every quota is met.

Each answered call is one record. Its output keeps only the queries that pass the screen (length,
language, exact and near duplicates of the seeds and the pool, holdout leakage; `validators.queries.queries`)
and fit the cell's quota, each tagged with its cell, trap rule and lineage; every dropped query is a
`flag` verdict with its code, and a call that adds nothing is rejected (`SYN000`). Resume rebuilds the
pool and the cell counts from the stored records, so a killed run goes on where it stopped. Under
`--shard i/n` a run fills its share of each quota with its slice of the calls; the merge drops cross-shard
duplicates (`factory.generate.synth_shards`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Protocol

from mashbill.errors import SpecError
from mashbill.factory.generate.synth_shards import dropped_positions, shard_calls, shard_quota
from mashbill.factory.generate.work import Job, Work, select_jobs
from mashbill.factory.records import Record, SpecRef, Verdict, record_id
from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec

LANGUAGE_NAMES = {"en": "English", "de": "German"}

SYN_NOTHING_NEW = "SYN000"
SYN_CELL_FULL = "SYN006"


class Screen(Protocol):
    """Decides whether a new query may join the pool (`validators.queries.queries.QueryScreen`)."""

    def check(self, text: str, lang: str, cell_type: str | None = None, trap: bool = False) -> tuple[str, str] | None:
        """(code, detail) when the query must be dropped, None when it may be kept; `cell_type` is the cell's type
        (or trap rule) for the checks that ask whether the query fits its cell."""

    def add(self, text: str) -> None:
        """Remember a kept query (later ones are checked against it)."""


@dataclass(frozen=True)
class Cell:
    type: str  # the seed type, or the trap rule for a trap cell
    lang: str
    trap: bool
    quota: int
    seeds: tuple[str, ...]
    hint: str

    @property
    def name(self) -> str:
        return f"{self.type}/{self.lang}/{'trap' if self.trap else 'plain'}"


def _split_by_share(total: int, shares: dict[str, float]) -> dict[str, int]:
    """total split by shares, rounded by largest remainder (the parts add up to total)."""
    weight = sum(shares.values()) or 1.0
    exact = {k: total * v / weight for k, v in shares.items()}
    out = {k: math.floor(v) for k, v in exact.items()}
    for k in sorted(exact, key=lambda k: (out[k] - exact[k], k))[:total - sum(out.values())]:
        out[k] += 1
    return out


def plan_cells(rs: ResolvedSpec) -> list[Cell]:
    """The cells and their quotas. A cell whose quota can never fill is an error before any teacher call."""
    syn = rs.spec.synthesis
    langs = [lang for lang in rs.spec.languages if lang in LANGUAGE_NAMES] or ["en"]
    by_cell: dict[tuple[str, str], list[str]] = {}
    for row in rs.seeds:
        if row.get("lang") in langs:
            by_cell.setdefault((str(row.get("type") or "general"), row["lang"]), []).append(row["query"])
    plain = {f"{t}/{lang}/plain": (t, lang) for t, lang in by_cell}
    traps = {f"{rule}/{lang}/trap": (rule, lang) for rule in syn.traps for lang in langs}
    known = {t for t, _ in by_cell} | set(syn.traps)
    unknown = sorted(k for k in syn.weights if k.split("/")[0] not in known or k.count("/") > 1
                     or ("/" in k and k.split("/")[1] not in langs))
    if unknown:
        raise SpecError(str(rs.path), f"synthesis.weights names no cell: {', '.join(unknown)} (a seed type or trap "
                        "rule, optionally /LANG)", field="synthesis")
    # a cell's weight: "TYPE/LANG", else "TYPE", else 1; a cell of weight 0 gets no quota
    weight = {n: syn.weights.get(f"{t}/{lang}", syn.weights.get(t, 1.0)) for n, (t, lang) in {**plain, **traps}.items()}

    def split(total: int, names) -> dict[str, int]:
        live = {n: weight[n] for n in names if weight[n] > 0}
        return _split_by_share(total, live) if live else {}

    def trap_part(total: int, names) -> int:  # no trap cell left (all weighed 0): the plain cells get it all
        return round(total * syn.trap_share) if any(weight[n] > 0 for n in names) else 0

    quotas: dict[str, int] = {}
    if syn.language_shares:  # each language's part of the target, then its cells by weight
        for lang, part in _split_by_share(syn.target, {lang: syn.language_shares.get(lang, 0.0) for lang in langs}).items():
            lang_traps = [n for n, (_, lg) in traps.items() if lg == lang]
            t_part = trap_part(part, lang_traps)
            quotas.update(split(part - t_part, [n for n, (_, lg) in plain.items() if lg == lang]))
            quotas.update(split(t_part, lang_traps))
    else:
        t_total = trap_part(syn.target, traps)
        quotas = {**split(syn.target - t_total, plain), **split(t_total, traps)}
    if syn.weights and sum(quotas.values()) < syn.target:
        raise SpecError(str(rs.path), f"synthesis.weights leave {syn.target - sum(quotas.values())} of the target "
                        "to no cell: give every language with a share a cell of weight above 0", field="synthesis")
    cells, problems = [], []
    for name, (t, lang) in sorted({**plain, **traps}.items()):
        trap = name in traps
        if trap:
            rule = syn.traps[t]
            seeds = [r["query"] for r in rs.seeds if r.get("lang") == lang and r.get("type") in rule.types]
            hint = rule.hint
        else:
            seeds = by_cell[(t, lang)]
            hint = syn.type_hints.get(t, f"requests of the type '{t}'")
        if len(seeds) < syn.min_seeds_per_cell and weight[name] > 0:
            problems.append(f"{name} has {len(seeds)} seed(s), synthesis.min_seeds_per_cell is "
                            f"{syn.min_seeds_per_cell}")
        if quotas.get(name, 0) > 0:
            cells.append(Cell(t, lang, trap, quotas[name], tuple(dict.fromkeys(seeds)), hint))
    if problems:
        raise SpecError(str(rs.path), "quota can never fill: " + "; ".join(problems) + ". Add seeds, lower "
                        "min_seeds_per_cell or drop the trap rule; no teacher call was made", field="synthesis")
    return cells


def cell_inputs(rs: ResolvedSpec, cell: Cell, call: int) -> dict:
    """The input of one synthesis call: its cell, the seeds shown (drawn per cell and call) and the count."""
    syn = rs.spec.synthesis
    rng = random.Random(f"{rs.spec.teacher.sampling.seed}:{cell.name}:{call}")
    shown = rng.sample(cell.seeds, min(syn.shown, len(cell.seeds)))
    return {"cell": cell.name, "call": call, "type": cell.type, "lang": cell.lang, "trap": cell.trap,
            "rule": cell.type if cell.trap else None, "language": LANGUAGE_NAMES[cell.lang],
            "n": syn.per_call, "cell_hint": cell.hint, "examples": "\n".join(f"- {q}" for q in shown)}


def pool_items(store: Store, rs: ResolvedSpec) -> list[dict]:
    """The kept queries of a `queries` spec in the store, in a stable order (record id, then position), less
    those a merge dropped as duplicates of another shard's (`factory.generate.synth_shards`)."""
    out = []
    dropped = dropped_positions(store, rs.hash)
    for rec in store.records(spec_hash=rs.hash, status="accepted"):
        gone = dropped.get(rec.id, ())
        for item in (rec.output or {}).get("queries", []):
            if (item.get("lineage") or {}).get("position") not in gone:
                out.append(item)
    return out


class SynthWork(Work):
    """The jobs of a queries spec; `finish` screens each call's queries and keeps what fits the quotas."""

    def __init__(self, rs: ResolvedSpec, store: Store, screen: Screen, *, calls_per_quota: float | None = None):
        super().__init__(rs, SpecRef(rs.spec.name, rs.spec.version, rs.hash), "queries")
        self.cells = {c.name: c for c in plan_cells(rs)}
        # a call budget, not part of the hash: calls are numbered per cell, so a larger budget only adds calls
        self.calls_per_quota = calls_per_quota or rs.spec.synthesis.calls_per_quota
        self.screen = screen
        self.quota = {name: c.quota for name, c in self.cells.items()}  # this run's quotas (a shard's share)
        self.kept: dict[str, int] = {name: 0 for name in self.cells}
        for item in pool_items(store, rs):  # resume: the pool and the counts come from the store
            screen.add(item["query"])
            if item.get("cell") in self.kept:
                self.kept[item["cell"]] += 1

    @property
    def full(self) -> bool:
        return all(self.kept[n] >= q for n, q in self.quota.items())

    def jobs(self, *, limit=None, shard=None) -> list[Job]:
        syn = self.rs.spec.synthesis
        # a shard fills its share of each quota with its own slice of the cell's calls (`factory.generate.synth_shards`)
        self.quota = {n: shard_quota(c.quota, k, shard) for k, (n, c) in enumerate(self.cells.items())}
        calls = {}
        for name, cell in self.cells.items():
            needed = math.ceil(self.quota[name] / syn.per_call * self.calls_per_quota)
            calls[name] = shard_calls(lambda call, cell=cell: record_id(self.rs.hash, cell_inputs(self.rs, cell, call)),
                                      needed, shard)
        items = []
        for k in range(max(map(len, calls.values()), default=0)):  # round-robin: every cell progresses together
            for name, cell in self.cells.items():
                if k < len(calls[name]):
                    inputs = cell_inputs(self.rs, cell, calls[name][k])
                    items.append((record_id(self.rs.hash, inputs), inputs))
        # each call its own sampling seed: calls of a cell with one seed have the same prompt, and one seed
        # would make them write the same answer again and again
        return [Job(rid, inputs, seed_offset=inputs["call"], meta={"cell": inputs["cell"]}) for rid, inputs in
                select_jobs(items, limit=limit, shard=shard)]

    def wanted(self, job: Job) -> bool:
        cell = job.inputs["cell"]
        return self.kept[cell] < self.quota[cell]

    def finish(self, rec: Record, verdicts: list[Verdict]) -> tuple[Record, list[Verdict]]:
        if rec.status != "accepted":
            return rec, verdicts
        inp = rec.input
        cell = self.cells[inp["cell"]]
        kept = []
        for i, item in enumerate(rec.output.get("queries", [])):
            text = " ".join(str(item.get("query", "")).split())
            found = self.screen.check(text, cell.lang, cell.type, cell.trap)
            if found is None and self.kept[cell.name] >= self.quota[cell.name]:
                found = (SYN_CELL_FULL, f"cell {cell.name} already holds its quota of {self.quota[cell.name]}")
            if found is not None:
                code, detail = found
                verdicts.append(Verdict(code, "flag", f"query {i + 1} {text[:80]!r}: {detail}"))
                continue
            self.screen.add(text)
            self.kept[cell.name] += 1
            kept.append({"query": text, "lang": cell.lang, "type": None if cell.trap else cell.type,
                         "trap": cell.trap, "rule": inp["rule"], "cell": cell.name,
                         "source": f"synth:{self.ref.name}@{self.ref.version}",
                         "lineage": {"record_id": rec.id, "position": i}})
        output = {"queries": kept}
        status = rec.status
        if not kept:
            status = "rejected"
            verdicts.append(Verdict(SYN_NOTHING_NEW, "reject", "no query of this call survived the filters"))
        return Record(rec.id, rec.kind, rec.input, output, rec.raw, rec.spec, status, rec.messages, rec.meta), verdicts
