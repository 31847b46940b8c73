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
            winners, replaced = _decide(con, paths, aliases, report)
            _write(out, aliases, winners, replaced, report)
            _summarise(con, report)
        finally:
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
        rows = con.execute(
            f"SELECT r.record_id, u.shard, r.spec_hash, r.spec_name, r.spec_version FROM {alias}.records r "
            f"JOIN {alias}.runs u USING (run_id)").fetchall()
        labels = set()
        for rid, label, spec_hash, name, version in rows:
            names[spec_hash] = f"{name}@{version}"
            shard = parse_shard(label)
            if shard is None:
                continue
            labels.add(label)
            seen[spec_hash].add(shard)
            if shard_of(rid, shard[1]) != shard[0]:
                raise MergeConflict(f"{p}: record {rid[:16]}... was written by a run labelled shard {label} but "
                                    f"belongs to shard {shard_of(rid, shard[1])}/{shard[1]}; was the store reused "
                                    "with a different --shard?")
        report.sources.append({"path": str(p), "records": len(rows), "shards": sorted(labels),
                               "inserted": 0, "identical": 0, "replaced": 0})
    for spec_hash, shards in seen.items():
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
    for spec_hash, ref in names.items():
        report.specs.setdefault(ref, {"hash": spec_hash, "shards": None, "missing": []})


def _decide(con, paths, aliases, report: MergeReport) -> tuple[dict[int, list[str]], list[str]]:
    """Per record id, the one copy to keep; raise on two different finished copies."""
    existing = {rid: (status, h) for rid, status, h in
                con.execute(f"SELECT record_id, status, {_CONTENT} FROM records").fetchall()}
    candidates: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for i, alias in enumerate(aliases):
        for rid, status, h in con.execute(f"SELECT record_id, status, {_CONTENT} FROM {alias}.records").fetchall():
            candidates[rid].append((i, status, h))
    winners: dict[int, list[str]] = defaultdict(list)
    replaced: list[str] = []
    conflicts = []
    for rid, copies in candidates.items():
        have = existing.get(rid)
        finished = {h for _, status, h in copies if status != "failed"}
        if have is not None and have[0] != "failed":
            finished.add(have[1])
        if len(finished) > 1:
            where = [str(paths[i]) for i, status, _ in copies] + (["(output store)"] if have else [])
            conflicts.append(f"{rid[:16]}... in {', '.join(where)}")
            continue
        if have is not None and (have[0] != "failed" or not finished):
            for i, _, _ in copies:  # already there (or nothing better than the failed copy there)
                report.sources[i]["identical"] += 1
                report.identical += 1
            continue
        pick = next((c for c in copies if c[1] != "failed"), copies[0])
        for c in copies:
            if c is not pick:  # an identical copy, or a failed one the finished copy supersedes
                report.sources[c[0]]["identical"] += 1
                report.identical += 1
        winners[pick[0]].append(rid)
        if have is not None:
            replaced.append(rid)
            report.sources[pick[0]]["replaced"] += 1
        else:
            report.sources[pick[0]]["inserted"] += 1
    if conflicts:
        raise MergeConflict(f"{len(conflicts)} record id(s) are stored with different content in more than one "
                            f"store (nothing was merged): " + "; ".join(conflicts[:5]) +
                            (" ..." if len(conflicts) > 5 else ""))
    report.replaced = len(replaced)
    report.inserted = sum(len(v) for v in winners.values()) - len(replaced)
    return winners, replaced


def _write(store: Store, aliases, winners: dict[int, list[str]], replaced: list[str], report: MergeReport) -> None:
    with store.transaction() as con:
        if replaced:
            con.register("_replaced", pa.table({"record_id": replaced}))
            con.execute("DELETE FROM verdicts WHERE stage = 'generate' AND record_id IN (SELECT record_id FROM _replaced)")
            con.execute("DELETE FROM records WHERE record_id IN (SELECT record_id FROM _replaced)")
            con.unregister("_replaced")
        before_runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        for i, alias in enumerate(aliases):
            con.execute(f"INSERT INTO runs BY NAME SELECT * FROM {alias}.runs "
                        "WHERE run_id NOT IN (SELECT run_id FROM runs)")
            ids = winners.get(i)
            if ids:
                con.register("_win", pa.table({"record_id": ids}))
                con.execute(f"INSERT INTO records BY NAME SELECT r.* FROM {alias}.records r "
                            "JOIN _win USING (record_id)")
                con.execute(f"INSERT INTO verdicts BY NAME SELECT v.* FROM {alias}.verdicts v "
                            "JOIN _win USING (record_id)")
                con.execute(f"INSERT INTO record_attempts BY NAME SELECT a.* FROM {alias}.record_attempts a "
                            "JOIN _win USING (record_id) WHERE NOT EXISTS (SELECT 1 FROM record_attempts b "
                            "WHERE b.record_id = a.record_id AND b.attempt = a.attempt)")
                con.unregister("_win")
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
