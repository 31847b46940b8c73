"""Sharded runs: which shard a record belongs to, and merging shard stores into one.

`mashbill generate SPEC --shard i/n --store shard_i` keeps the records whose id falls in slice i
of n (`shard_of`), so shards never overlap by construction and each can run on its own node.
`merge_stores` combines them and verifies that: the same record id in two stores is an error
unless both hold the identical record; a record that failed in one place and finished in another
takes the finished one (a failed record is only "not done yet"); every record of a run labelled
i/n must belong to slice i.
"""

from __future__ import annotations

import re
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from mashbill.errors import StoreError
from mashbill.factory.store import Store

_SHARD_RE = re.compile(r"^(\d+)/(\d+)$")

# What makes two copies of a record "identical": everything but the run that wrote it and when.
_CONTENT = ("md5(concat_ws(chr(31), spec_hash, kind, status, coalesce(CAST(input AS VARCHAR), chr(0)), "
            "coalesce(CAST(output AS VARCHAR), chr(0)), coalesce(raw, chr(0)), CAST(messages AS VARCHAR), "
            "CAST(meta AS VARCHAR)))")


def shard_of(record_id: str, n: int) -> int:
    """The shard (0..n-1) a record id belongs to: its first 64 bits modulo n."""
    return int(record_id[:16], 16) % n


def parse_shard(label: str | None, *, strict: bool = False) -> tuple[int, int] | None:
    """`"i/n"` -> (i, n) with 0 <= i < n. A label that is not one gives None, or ValueError when `strict`."""
    m = _SHARD_RE.fullmatch(label or "")
    if m and int(m.group(2)) >= 1 and int(m.group(1)) < int(m.group(2)):
        return int(m.group(1)), int(m.group(2))
    if strict and label is not None:
        raise ValueError(f"expected i/n with 0 <= i < n, found {label!r}")
    return None


class MergeConflict(StoreError):
    """Two stores hold different records under the same id."""


@dataclass
class MergeReport:
    out: str
    sources: list[dict] = field(default_factory=list)  # per shard store: path, records, inserted, ...
    inserted: int = 0  # records new to the output store
    replaced: int = 0  # failed records in the output store replaced by a finished copy
    identical: int = 0  # copies skipped: already in the output store, or a duplicate of the copy kept
    runs: int = 0
    specs: dict[str, dict] = field(default_factory=dict)  # spec ref -> {hash, shards seen, missing, statuses}
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("out", "sources", "inserted", "replaced", "identical", "runs",
                                               "specs", "warnings")}


def merge_stores(out_path: str | Path, shard_paths: list[str | Path], *, require_complete: bool = False
                 ) -> MergeReport:
    """Merge shard stores into `out_path` (created if needed) in one transaction; idempotent."""
    out_path = Path(out_path)
    paths = [Path(p) for p in shard_paths]
    if not paths:
        raise StoreError("merge needs at least one shard store")
    resolved = [p.resolve() for p in paths]
    if len(set(resolved)) != len(resolved):
        raise StoreError("the same shard store is given twice")
    if out_path.resolve() in resolved:
        raise StoreError(f"the output store {out_path} is also given as a shard; merge into a new folder")
    for p in paths:  # existence and schema version, with the store's own messages
        Store.open(p, read_only=True).close()
    _check_target(out_path)
    fresh = not out_path.exists()
    try:
        return _merge(out_path, paths, require_complete)
    except BaseException:
        if fresh:  # a refused or failed merge into a new folder leaves no half-made store behind
            shutil.rmtree(out_path, ignore_errors=True)
        raise


def _check_target(out_path: Path) -> None:
    """The output is a new folder, an empty one, or a store (an earlier merge's: merging again adds what is new)."""
    if out_path.is_dir() and not (out_path / "mashbill.duckdb").exists():
        other = sorted(p.name for p in out_path.iterdir())
        if other:
            raise StoreError(f"merge target {out_path} exists and is not a mashbill store (it holds "
                             f"{', '.join(other[:3])}{' ...' if len(other) > 3 else ''}); nothing was written: "
                             "merge into a new folder or an earlier merge's store")


def _merge(out_path: Path, paths: list[Path], require_complete: bool) -> MergeReport:
    report = MergeReport(str(out_path))
    with Store.open(out_path) as out:
        con = out.con
        aliases = []
        try:
            for i, p in enumerate(paths):
                alias = f"shard{i}"
                con.execute(f"ATTACH '{(p / 'mashbill.duckdb').as_posix()}' AS {alias} (READ_ONLY)")
                aliases.append(alias)
            _check_labels(con, paths, aliases, report, require_complete)
            _decide(con, paths, aliases, report)
            _write(out, aliases, report)
            _summarise(con, report)
        finally:
            for table in (_COPIES, _HASHES, _DECIDED):
                con.execute(f"DROP TABLE IF EXISTS {table}")
            for alias in aliases:
                con.execute(f"DETACH {alias}")
        for ref, info in report.specs.items():
            name, _, version = ref.partition("@")
            out.export_parquet(name, int(version), info["hash"])
    return report


def _check_runs(con, paths, aliases) -> None:
    """No shard's run is still `running`, and one spec name@version has one hash across the stores."""
    hashes: dict[str, tuple[str, Path | str]] = {
        f"{name}@{version}": (spec_hash, "the output store") for name, version, spec_hash in
        con.execute("SELECT DISTINCT spec_name, spec_version, spec_hash FROM records").fetchall()}
    for p, alias in zip(paths, aliases):
        live = con.execute(f"SELECT run_id, spec_name, spec_version, shard FROM {alias}.runs "
                           "WHERE status = 'running' ORDER BY started_at LIMIT 1").fetchone()
        if live:
            run_id, name, version, shard = live
            raise StoreError(f"{p}: run {run_id} of {name}@{version}{f' (shard {shard})' if shard else ''} is "
                             "still running (or was killed and never resumed); nothing was merged: wait for it to end, "
                             "or re-run its generate command, which marks a killed run interrupted and resumes it")
        for name, version, spec_hash in con.execute(
                f"SELECT DISTINCT spec_name, spec_version, spec_hash FROM {alias}.records").fetchall():
            ref = f"{name}@{version}"
            first = hashes.setdefault(ref, (spec_hash, p))
            if first[0] != spec_hash:
                raise MergeConflict(f"{p}: {ref} has spec hash {spec_hash[:12]} but {first[1]} has "
                                    f"{first[0][:12]}: shards of another spec under the same name; nothing was "
                                    "merged")


def _check_labels(con, paths, aliases, report: MergeReport, require_complete: bool) -> None:
    """Every record written by a run labelled i/n belongs to slice i; report shards missing per spec."""
    _check_runs(con, paths, aliases)
    seen: dict[str, set] = defaultdict(set)
    names: dict[str, str] = {}
    for p, alias in zip(paths, aliases):
        joined = f"{alias}.records r JOIN {alias}.runs u USING (run_id)"
        labels = {}  # the run labels that are i/n, parsed
        for spec_hash, name, version, label in con.execute(
                f"SELECT DISTINCT r.spec_hash, r.spec_name, r.spec_version, u.shard FROM {joined}").fetchall():
            names[spec_hash] = f"{name}@{version}"
            shard = parse_shard(label)
            if shard is not None:
                labels[label] = shard
                seen[spec_hash].add(shard)
        if labels:  # the slice check as one scan: the first 64 bits of the id modulo n (shard_of)
            con.register("_merge_labels", pa.table({"label": list(labels), "i": [s[0] for s in labels.values()],
                                                    "n": [s[1] for s in labels.values()]}))
            try:
                bad = con.execute(
                    f"SELECT r.record_id, l.label, l.n FROM {joined} JOIN _merge_labels l ON l.label = u.shard "
                    "WHERE ('0x' || left(r.record_id, 16))::UBIGINT % l.n <> l.i "
                    "ORDER BY r.record_id LIMIT 1").fetchall()  # fetchone would leave the result open
            finally:
                con.unregister("_merge_labels")
            if bad:
                rid, label, n = bad[0]
                raise MergeConflict(f"{p}: record {rid[:16]}... was written by a run labelled shard {label} but "
                                    f"belongs to shard {shard_of(rid, n)}/{n}; was the store reused "
                                    "with a different --shard?")
        count = con.execute(f"SELECT count(*) FROM {joined}").fetchone()[0]
        report.sources.append({"path": str(p), "records": count, "shards": sorted(labels),
                               "inserted": 0, "identical": 0, "replaced": 0})
    for spec_hash, shards in sorted(seen.items(), key=lambda kv: names[kv[0]]):
        counts = {n for _, n in shards}
        ref = names[spec_hash]
        if len(counts) > 1:
            report.warnings.append(f"{ref}: shards of different counts {sorted(counts)} (overlap is checked per id)")
            continue
        n = counts.pop()
        missing = sorted(set(range(n)) - {i for i, _ in shards})
        report.specs[ref] = {"hash": spec_hash, "shards": n, "missing": [f"{i}/{n}" for i in missing]}
        if missing:
            msg = f"{ref}: shard(s) {', '.join(f'{i}/{n}' for i in missing)} of {n} not among the merged stores"
            if require_complete:
                raise StoreError(msg)
            report.warnings.append(msg)
    for spec_hash, ref in sorted(names.items(), key=lambda kv: kv[1]):
        report.specs.setdefault(ref, {"hash": spec_hash, "shards": None, "missing": []})


# Per record id, as columns (a million ids stay in DuckDB, not in Python dicts): every copy in the shard stores
# (src is the store's position) and the copy already in the output store (src -1), if any.
_COPIES = "_merge_copies"
_HASHES = "_merge_hashes"
_DECIDED = "_merge_decided"


def _decide(con, paths, aliases, report: MergeReport) -> None:
    """Per record id, the one copy to keep (table _merge_decided: record_id, pick, replaces, keep); raise on two
    different finished copies. A failed copy is only "not done yet": a finished one anywhere supersedes it."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_COPIES} AS " + " UNION ALL ".join(
        f"SELECT {i} AS src, record_id, status FROM {alias}.records" for i, alias in enumerate(aliases)))
    # contents are compared only where an id has another copy: disjoint shards hash nothing
    con.execute(f"""CREATE OR REPLACE TEMP TABLE {_HASHES} AS
        WITH several AS (SELECT record_id FROM {_COPIES} GROUP BY record_id HAVING count(*) > 1
                         UNION SELECT record_id FROM records WHERE record_id IN (SELECT record_id FROM {_COPIES}))
        """ + " UNION ALL ".join(
        f"SELECT {i} AS src, record_id, status, {_CONTENT} AS h FROM {table} "
        "WHERE record_id IN (SELECT record_id FROM several)"
        for i, table in [(-1, "records"), *enumerate(f"{alias}.records" for alias in aliases)]))
    con.execute(f"""CREATE OR REPLACE TEMP TABLE {_DECIDED} AS
        WITH per_id AS (
            SELECT c.record_id, any_value(x.status) AS have_status, any_value(x.h) AS have_h,
                   coalesce(list_distinct(list(h.h) FILTER (WHERE c.status <> 'failed')), []) AS finished,
                   count(*) FILTER (WHERE c.status <> 'failed') AS n_finished,
                   coalesce(min(c.src) FILTER (WHERE c.status <> 'failed'), min(c.src)) AS pick,
                   list(c.src ORDER BY c.src) AS srcs
            FROM {_COPIES} c LEFT JOIN {_HASHES} h ON h.src = c.src AND h.record_id = c.record_id
                 LEFT JOIN {_HASHES} x ON x.src = -1 AND x.record_id = c.record_id
            GROUP BY c.record_id)
        SELECT record_id, pick, srcs, have_status IS NOT NULL AS replaces,
               -- two finished copies that differ, here or against a finished copy in the output store
               len(CASE WHEN have_status IS NOT NULL AND have_status <> 'failed'
                        THEN list_distinct(list_append(finished, have_h)) ELSE finished END) > 1 AS conflict,
               -- written: nothing in the output store yet, or a failed copy there that a finished one replaces
               have_status IS NULL OR (have_status = 'failed' AND n_finished > 0) AS keep
        FROM per_id""")
    conflicts = con.execute(f"SELECT count(*) FROM {_DECIDED} WHERE conflict").fetchone()[0]
    if conflicts:
        shown = con.execute(f"SELECT record_id, srcs, replaces FROM {_DECIDED} WHERE conflict "
                            "ORDER BY srcs[1], record_id LIMIT 5").fetchall()
        where = [f"{rid[:16]}... in " + ", ".join([str(paths[i]) for i in srcs] + (["(output store)"] if have else []))
                 for rid, srcs, have in shown]
        raise MergeConflict(f"{conflicts} record id(s) are stored with different content in more than one "
                            f"store (nothing was merged): " + "; ".join(where) + (" ..." if conflicts > 5 else ""))
    for src, identical, inserted, replaced in con.execute(f"""
            SELECT c.src, count(*) FILTER (WHERE NOT d.keep OR c.src <> d.pick),
                   count(*) FILTER (WHERE d.keep AND c.src = d.pick AND NOT d.replaces),
                   count(*) FILTER (WHERE d.keep AND c.src = d.pick AND d.replaces)
            FROM {_COPIES} c JOIN {_DECIDED} d USING (record_id) GROUP BY c.src""").fetchall():
        source = report.sources[src]
        source["identical"], source["inserted"], source["replaced"] = identical, inserted, replaced
        report.identical += identical
        report.inserted += inserted
        report.replaced += replaced


def _write(store: Store, aliases, report: MergeReport) -> None:
    win = f"(SELECT record_id FROM {_DECIDED} WHERE keep AND pick = ?)"
    with store.transaction() as con:
        if report.replaced:
            replaced = f"(SELECT record_id FROM {_DECIDED} WHERE keep AND replaces)"
            con.execute(f"DELETE FROM verdicts WHERE stage = 'generate' AND record_id IN {replaced}")
            con.execute(f"DELETE FROM records WHERE record_id IN {replaced}")
            con.execute(f"DELETE FROM record_checks WHERE record_id IN {replaced}")
        before_runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        for i, alias in enumerate(aliases):
            con.execute(f"INSERT INTO runs BY NAME SELECT * FROM {alias}.runs "
                        "WHERE run_id NOT IN (SELECT run_id FROM runs)")
            source = report.sources[i]
            if source["inserted"] or source["replaced"]:
                # a store whose every record is written (a fresh merge of disjoint shards) needs no filter by id
                where, args = ("", []) if not source["identical"] else (f"WHERE record_id IN {win}", [i])
                con.execute(f"INSERT INTO records BY NAME SELECT * FROM {alias}.records {where}", args)
                con.execute(f"INSERT INTO verdicts BY NAME SELECT * FROM {alias}.verdicts WHERE record_id IN {win}",
                            [i])
                con.execute(f"INSERT INTO record_attempts BY NAME SELECT a.* FROM {alias}.record_attempts a "
                            f"WHERE a.record_id IN {win} AND NOT EXISTS (SELECT 1 FROM record_attempts b "
                            "WHERE b.record_id = a.record_id AND b.attempt = a.attempt)", [i])
            # the records' own checks, kept where they were made (`validate --per-record` on the shard): those of
            # the copy picked, also for a record an earlier merge brought (a shard checked after that merge)
            con.execute(f"INSERT INTO record_checks BY NAME SELECT k.* FROM {alias}.record_checks k "
                        f"WHERE k.record_id IN (SELECT record_id FROM {_DECIDED} WHERE pick = ? AND NOT conflict) "
                        "AND NOT EXISTS (SELECT 1 FROM record_checks o WHERE o.record_id = k.record_id AND "
                        "o.spec_hash = k.spec_hash AND o.checks_profile = k.checks_profile)", [i])
            con.execute(f"INSERT INTO teacher_calls BY NAME SELECT * FROM {alias}.teacher_calls "
                        "WHERE call_id NOT IN (SELECT call_id FROM teacher_calls)")
            con.execute(f"INSERT INTO events SELECT * FROM (SELECT * FROM {alias}.events "
                        "EXCEPT ALL SELECT * FROM events)")
        report.runs = con.execute("SELECT count(*) FROM runs").fetchone()[0] - before_runs


def _summarise(con, report: MergeReport) -> None:
    for ref, info in report.specs.items():
        rows = con.execute("SELECT status, count(*) FROM records WHERE spec_hash = ? GROUP BY ALL ORDER BY ALL",
                           [info["hash"]]).fetchall()
        info["records"] = dict(rows)
