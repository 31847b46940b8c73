"""The store: one DuckDB file (runs, records, verdicts, teacher calls, events) plus Parquet exports.

Every batch of records is written in one transaction from Arrow tables (bulk inserts run ~500x
faster than executemany here), so a crash never leaves half a batch visible. Resume reads the
set of finished record ids from the database itself, never from a side file: a kill can land
between a commit and any acknowledgement written elsewhere.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import uuid
from collections import deque
from contextlib import closing, contextmanager, suppress
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import duckdb
import pyarrow as pa

from mashbill.factory.records import Record, SpecRef, TeacherCall, Verdict, sft_key
from mashbill.factory.store_queries import StoreQueries
from mashbill import __version__
from mashbill.errors import StoreError
from mashbill.jsontext import storable
from mashbill.hashing import canonical_json

DB_NAME = "mashbill.duckdb"
EXPORT_TMP_PREFIX = ".records.parquet.tmp-"
EXPORT_PART_ROWS = 50_000  # records a Parquet export sorts at a time (export_parquet)
EXPORT_RANGE_PARTS = 12  # parts an export reads by ranges of record ids (a scan each); beyond, it routes them in one
EXPORT_ROUTE_ROWS = 16_384  # rows of each Arrow batch that one scan routes to its parts
EXPORT_BATCH_BYTES = 16 << 20  # decoded bytes of a Parquet export's row group, about (_write_row_groups)
EXPORT_READ_ROWS = 2048  # rows of each Arrow batch an export reads from DuckDB (its vector size)
_TEMP_NAMES = itertools.count()  # temporary tables of readers open at once on one connection keep apart


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _json(value) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _sft_keys(records: Sequence[Record]) -> list[str]:
    """Each record's example key (`sft_key`; the batch's shared system prompt encoded once)."""
    shared: dict[tuple[str, str], str] = {}
    return [sft_key(r.messages, canonical_json(r.output), shared) for r in records]


def _verdict_table(rows: Sequence[tuple[str, Verdict]], run_id: str, now: datetime,
                   stage: str | None = None) -> pa.Table:
    """Arrow rows for the verdicts table; `stage` overrides each verdict's own."""
    return pa.table({
        "record_id": [rid for rid, _ in rows],
        "run_id": [run_id] * len(rows),
        "stage": [stage or v.stage for _, v in rows],
        "code": [v.code for _, v in rows],
        "severity": [v.severity for _, v in rows],
        "detail": [storable(v.detail) for _, v in rows],
        "created_at": pa.array([now] * len(rows), pa.timestamp("us")),
    })


def _attempt_table(run_id: str, rows: Sequence[dict], now: datetime) -> pa.Table:
    """Arrow rows for record_attempts from factory.generate.repair's attempt dicts."""
    ints = ("attempt", "sample", "repairs", "tokens_in", "tokens_cached", "tokens_out", "calls")
    return pa.table({
        **{k: pa.array([r.get(k) for r in rows], pa.int32()) for k in ints},
        "record_id": [r["record_id"] for r in rows],
        "run_id": [run_id] * len(rows),
        "status": [r["status"] for r in rows],
        "output": [_json(r.get("output")) for r in rows],
        "raw": pa.array([storable(r.get("raw")) for r in rows], pa.string()),
        "verdicts": [_json(r["verdicts"]) for r in rows],
        "feedback": pa.array([r.get("feedback") for r in rows], pa.string()),
        "teacher_s": pa.array([r.get("teacher_s") for r in rows], pa.float64()),
        "created_at": pa.array([now] * len(rows), pa.timestamp("us")),
    })


_JOINED_MAX_CHARS = 1024  # mean characters a value up to which a chunk is decoded as one array


def loads_many(texts: list[str | None], chunk: int = 20_000) -> list:
    """json.loads of each text (None stays None), decoded as one JSON array per chunk: one parser call instead
    of one per value, about twice as fast for hundreds of thousands of small values. Long values (a record's ~2 KB
    prompt) are decoded one by one: joining them costs more than the calls it saves (2.7 s against 1.5 s for
    200,000 prompts of the 1M rehearsal, bench/RESULTS.md)."""
    out: list = []
    for i in range(0, len(texts), chunk):
        part = texts[i:i + chunk]
        if sum(len(t) for t in part if t is not None) > _JOINED_MAX_CHARS * len(part):
            out += [None if t is None else json.loads(t) for t in part]
        else:
            out += json.loads("[" + ",".join("null" if t is None else t for t in part) + "]")
    return out


MEMORY_ENV = "MASHBILL_STORE_MEMORY"  # e.g. "1GB": the most memory DuckDB takes for one store connection

_RECORD_COLUMNS = ("SELECT record_id, kind, input, output, raw, spec_name, spec_version, spec_hash, status, {}, meta "
                   "FROM records")
_RECORD_SELECT = _RECORD_COLUMNS.format("messages")
_EXPORTED = "* EXCLUDE (sft_key)"  # a record export holds the records as generated, not the freeze's keys
_RECORD_SELECT_NO_PROMPTS = _RECORD_COLUMNS.format("'[]'")  # the prompts (~2 KB a record) not read


def decode_records(rows: list[tuple]) -> list[Record]:
    """The records of rows as read by ``_RECORD_SELECT`` (``Store.record_batches(decoded=False)`` gives them)."""
    inputs, outputs = loads_many([r[2] for r in rows]), loads_many([r[3] for r in rows])
    messages, metas = loads_many([r[9] for r in rows]), loads_many([r[10] for r in rows])
    return [Record(id=row[0], kind=row[1], input=inp, output=out, raw=row[4], spec=SpecRef(row[5], row[6], row[7]),
                   status=row[8], messages=tuple(msgs), meta=meta)
            for row, inp, out, msgs, meta in zip(rows, inputs, outputs, messages, metas)]


def migrations() -> list[tuple[int, str, str]]:
    out = []
    for f in sorted(resources.files("mashbill.factory.migrations").iterdir(), key=lambda p: p.name):
        if f.name.endswith(".sql"):
            num, _, name = f.name.removesuffix(".sql").partition("_")
            out.append((int(num), name, f.read_text(encoding="utf-8")))
    return out


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass  # the failed statement or COMMIT already ended the transaction


_OPENED: deque[Path] = deque(maxlen=16)  # store files this process opened, so a late failure can name one


def storage_failure(exc: BaseException) -> str | None:
    """One line for a DuckDB error that means the store file is damaged or cannot be written (found while
    reading a block long after the store opened, or after a failed write); None for anything else."""
    text = str(exc)
    damaged = isinstance(exc, (duckdb.FatalException, duckdb.SerializationException)) or any(
        word in text for word in ("Corrupt database file", "checksum", "database has been invalidated",
                                  "No space left", "File too large"))
    if isinstance(exc, duckdb.IOException) and any(str(db) in text for db in _OPENED):
        damaged = True
    if not damaged:
        return None
    db = _OPENED[-1] if _OPENED else Path("the store")
    return damaged_message(db, exc)


def damaged_message(db: Path, exc: BaseException) -> str:
    """One line for a store DuckDB cannot read (truncated, a flipped byte, a full disk)."""
    return (f"store {db} is damaged or unreadable ({_first_line(exc)}); restore it from a copy, or re-merge "
            "it from its shard stores")


# DuckDB's own switches for a connection that runs a user's SQL (`mashbill sql`)
SANDBOX_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
SANDBOX_SETTINGS = ("SET enable_external_access = false", "SET allow_community_extensions = false",
                    "SET lock_configuration = true")

# Every record's `messages` holds its prompt, ~4 KB that differ little from record to record. DuckDB's automatic
# choice (dictionary + FSST) took 10 s of each commit of 100,000 records to write them in 198 MB; zstd writes them
# in 0.3 s and 3 MB, and reads no slower (bench/RESULTS.md, "Merge in DuckDB, and zstd in the store"). For the
# connection that writes.
WRITER_SETTING = "SET force_compression = 'zstd'"


class Store(StoreQueries):
    """A store folder. Open it with `Store.open(path)`; use as a context manager. Named reads: StoreQueries."""

    def __init__(self, root: Path, con: duckdb.DuckDBPyConnection, read_only: bool):
        self.root = root
        self.con = con
        self.read_only = read_only
        self.reaped: list[str] = []  # runs of dead processes this open marked 'interrupted'

    # ------------------------------------------------------------ opening

    @classmethod
    def open(cls, root: str | Path, *, read_only: bool = False, create: bool = True,
             sandbox: bool = False) -> "Store":
        """`sandbox` (read-only only; `mashbill sql`): the connection can read the store's tables and nothing
        else: no file reads or writes (COPY, read_csv, ATTACH), no extension install or load, settings locked."""
        if sandbox and not read_only:
            raise ValueError("a sandboxed store is opened read-only")
        root = Path(root)
        db = root / DB_NAME
        if read_only or not create:
            if not db.is_file():
                raise StoreError(f"no store at {root} (expected {db}); run `mashbill generate` first")
        else:
            try:
                root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create store folder {root}: {exc.strerror}") from None
            if not os.access(root, os.W_OK) or (db.exists() and not os.access(db, os.W_OK)):
                raise StoreError(f"store {root} is not writable")
        config = dict(SANDBOX_CONFIG) if sandbox else {}
        limit = os.environ.get(MEMORY_ENV, "").strip()
        if limit:  # DuckDB's own default is 80% of RAM; it spills to <store>.tmp beyond the limit
            if not re.fullmatch(r"(?i)\d+(?:\.\d+)?\s*(?:[kmgt]i?b|b|bytes)", limit):
                raise StoreError(f"{MEMORY_ENV}={limit!r} is not a size (for example 1GB or 512MB)")
            config["memory_limit"] = limit
        try:
            con = duckdb.connect(str(db), read_only=read_only, config=config)
        except duckdb.IOException as exc:
            msg = str(exc)
            if "lock" in msg.lower():
                raise StoreError(f"store {db} is locked by another process (one writer at a time): "
                                 f"{msg.splitlines()[0]}") from None
            raise StoreError(damaged_message(db, exc)) from None
        except duckdb.Error as exc:
            raise StoreError(damaged_message(db, exc)) from None
        _OPENED.append(db)
        store = cls(root, con, read_only)
        try:
            if not read_only:
                con.execute(WRITER_SETTING)
            store._migrate()
            if sandbox:
                for setting in SANDBOX_SETTINGS:  # the lock last: nothing after it can undo the others
                    con.execute(setting)
            if not read_only:
                # Holding the write lock proves no other process is writing: clear what dead ones left.
                store.reaped = reap_dead_runs(store)
                remove_stale_exports(root)
        except duckdb.Error as exc:
            con.close()
            raise StoreError(damaged_message(db, exc)) from None
        except BaseException:
            con.close()
            raise
        return store

    def _migrate(self) -> None:
        known = migrations()
        latest = max(n for n, _, _ in known)
        has_table = self.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_migrations'").fetchone()[0]
        applied = set()
        if has_table:
            applied = {r[0] for r in self.con.execute("SELECT version FROM schema_migrations").fetchall()}
        if applied and max(applied) > latest:
            raise StoreError(f"store {self.root} has schema version {max(applied)}, newer than this mashbill "
                             f"({__version__}) understands ({latest}); upgrade mashbill. The store was not touched.")
        lost = sorted(n for n, _, _ in known if applied and n < max(applied) and n not in applied)
        if lost:
            raise StoreError(f"store {self.root}: schema_migrations lacks version(s) {lost} although "
                             f"{max(applied)} is applied (the table was edited); re-insert the missing row(s) "
                             "or restore the store. The store was not touched.")
        pending = [m for m in known if m[0] not in applied]
        if not pending:
            return
        if self.read_only:
            raise StoreError(f"store {self.root} needs schema migrations {[m[0] for m in pending]}; "
                             "open it once for writing")
        for num, name, sql in pending:
            with self.transaction() as con:
                if not has_table:
                    con.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR, "
                                "applied_at TIMESTAMP)")
                    has_table = True
                con.execute(sql)
                con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", [num, name, _now()])

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """BEGIN; COMMIT when the block ends, ROLLBACK when it raises: all of it is stored or none.

        A COMMIT that fails (disk full, I/O error) has already ended the transaction, so there is nothing
        to roll back; it becomes a StoreError saying nothing of the block was stored.
        """
        con = self.con
        con.execute("BEGIN")
        try:
            yield con
        except BaseException:
            _rollback(con)
            raise
        try:
            con.execute("COMMIT")
        except duckdb.Error as exc:
            _rollback(con)
            raise StoreError(f"store {self.root / DB_NAME}: the commit failed, nothing of it was stored: "
                             f"{_first_line(exc)}") from None

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return self.con.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]

    # ------------------------------------------------------------ runs

    def begin_run(self, *, spec_name: str, spec_version: int, spec_hash: str, kind: str, backend: str,
                  model: str, model_sha256: str | None, model_info: dict | None, sampling: dict,
                  shard: str | None = None, args: dict | None = None) -> str:
        run_id = _now().strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]
        self.con.execute(
            "INSERT INTO runs (run_id, spec_name, spec_version, spec_hash, kind, backend, model, model_sha256, "
            "model_info, sampling, shard, status, started_at, tool_version, hostname, args, pid) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)",
            [run_id, spec_name, spec_version, spec_hash, kind, backend, model, model_sha256, _json(model_info),
             _json(sampling), shard, _now(), __version__, socket.gethostname(), _json(args), os.getpid()])
        return run_id

    def finish_run(self, run_id: str, status: str, stats: dict) -> None:
        cols = ["requested", "skipped", "accepted", "rejected", "failed", "tokens_in", "tokens_out",
                "teacher_s", "wall_s", "cost", "calls", "retries", "tokens_cached"]
        sets = ", ".join(f"{c} = ?" for c in cols)
        self.con.execute(f"UPDATE runs SET status = ?, finished_at = ?, {sets}, stats = ? WHERE run_id = ?",
                         [status, _now(), *[stats.get(c) for c in cols], _json(stats.get("stats")), run_id])

    def add_event(self, run_id: str, kind: str, detail: dict | None = None) -> None:
        self.con.execute("INSERT INTO events VALUES (?, ?, ?, ?)", [run_id, _now(), kind, _json(detail)])

    # ------------------------------------------------------------ records

    def finished_ids(self, spec_hash: str) -> set[str]:
        """Ids that need no more work: accepted or rejected. Failed ones are retried on the next run."""
        rows = self.con.execute("SELECT record_id FROM records WHERE spec_hash = ? AND status <> 'failed'",
                                [spec_hash]).fetchall()
        return {r[0] for r in rows}

    def validated_ids(self, spec_hash: str) -> set[str]:
        """Ids of this spec's records that some validation pass covered."""
        rows = self.con.execute("SELECT DISTINCT record_id FROM record_validations WHERE record_id IN "
                                "(SELECT record_id FROM records WHERE spec_hash = ?)", [spec_hash]).fetchall()
        return {r[0] for r in rows}

    def write_batch(self, run_id: str, records: Sequence[Record], verdicts: dict[str, Sequence[Verdict]],
                    calls: Sequence[TeacherCall], attempts: Sequence[dict] = ()) -> None:
        """Write records, their verdicts, teacher calls and repair attempts (`record_attempts` rows, as
        factory.generate.repair makes them) in one transaction (all or nothing)."""
        if not records and not attempts:
            return
        now = _now()
        ids = [r.id for r in records]
        rec_table = pa.table({
            "record_id": ids,
            "run_id": [run_id] * len(records),
            "spec_name": [r.spec.name for r in records],
            "spec_version": pa.array([r.spec.version for r in records], pa.int32()),
            "spec_hash": [r.spec.hash for r in records],
            "kind": [r.kind for r in records],
            "status": [r.status for r in records],
            "input": [_json(r.input) for r in records],
            "output": [_json(r.output) for r in records],
            "raw": [storable(r.raw) for r in records],
            "messages": [_json(list(r.messages)) for r in records],
            "meta": [_json(r.meta) for r in records],
            "created_at": pa.array([now] * len(records), pa.timestamp("us")),
            "sft_key": _sft_keys(records),
        })
        vrows = [(rid, v) for rid in ids for v in verdicts.get(rid, ())]
        ver_table = _verdict_table(vrows, run_id, now)
        call_table = pa.table({
            "call_id": [uuid.uuid4().hex for _ in calls],
            "record_id": [c.record_id for c in calls],
            "run_id": [run_id] * len(calls),
            "payload_hash": [c.payload_hash for c in calls],
            "attempt": pa.array([c.attempt for c in calls], pa.int32()),
            "backend": [c.backend for c in calls],
            "model": [c.model for c in calls],
            "latency_s": pa.array([c.latency_s for c in calls], pa.float64()),
            "prompt_tokens": pa.array([c.prompt_tokens for c in calls], pa.int32()),
            "cached_tokens": pa.array([c.cached_tokens for c in calls], pa.int32()),
            "completion_tokens": pa.array([c.completion_tokens for c in calls], pa.int32()),
            "finish_reason": pa.array([c.finish_reason for c in calls], pa.string()),
            "error": pa.array([storable(c.error) for c in calls], pa.string()),
            "created_at": pa.array([now] * len(calls), pa.timestamp("us")),
            "turn": pa.array([c.turn for c in calls], pa.int32()),
        })
        with self.transaction() as con:
            id_table = pa.table({"record_id": ids})
            con.register("_ids", id_table)
            # A failed record being retried is replaced; a finished one never is (the caller skips those).
            con.execute("DELETE FROM verdicts WHERE stage = 'generate' AND record_id IN "
                        "(SELECT r.record_id FROM records r JOIN _ids USING (record_id) WHERE r.status = 'failed')")
            # (and any own checks kept of the failed copy: they checked other content)
            con.execute("DELETE FROM record_checks WHERE record_id IN "
                        "(SELECT r.record_id FROM records r JOIN _ids USING (record_id) WHERE r.status = 'failed')")
            con.execute("DELETE FROM records WHERE status = 'failed' AND record_id IN (SELECT record_id FROM _ids)")
            for name, table, target in (("_rec", rec_table, "records"), ("_ver", ver_table, "verdicts"),
                                        ("_calls", call_table, "teacher_calls")):
                if table.num_rows:
                    con.register(name, table)
                    con.execute(f"INSERT INTO {target} BY NAME SELECT * FROM {name}")
                    con.unregister(name)
            con.unregister("_ids")
            if attempts:
                con.register("_att", _attempt_table(run_id, attempts, now))
                con.execute("INSERT INTO record_attempts BY NAME SELECT * FROM _att")
                con.unregister("_att")

    def add_verdicts(self, run_id: str, verdicts: Iterable[tuple[str, Verdict]]) -> int:
        rows = list(verdicts)
        if not rows:
            return 0
        table = _verdict_table(rows, run_id, _now())
        self.con.register("_ver", table)
        self.con.execute("INSERT INTO verdicts SELECT * FROM _ver")
        self.con.unregister("_ver")
        return len(rows)

    def replace_verdicts(self, stage: str, run_id: str, rows: Sequence[tuple[str, Verdict]],
                         record_ids: Sequence[str]) -> None:
        """Replace the `stage` verdicts of `record_ids` with `rows`, in one transaction (the judge's threshold)."""
        con = self.con
        con.execute("BEGIN")
        try:
            if record_ids:
                con.register("_ids", pa.table({"record_id": list(record_ids)}))
                con.execute("DELETE FROM verdicts WHERE stage = ? AND record_id IN (SELECT record_id FROM _ids)",
                            [stage])
                con.unregister("_ids")
            if rows:
                con.register("_ver", _verdict_table(list(rows), run_id, _now(), stage=stage))
                con.execute("INSERT INTO verdicts SELECT * FROM _ver")
                con.unregister("_ver")
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def keep_record_checks(self, spec_hash: str, checks_profile: str, checked: Sequence[tuple[str, str]]) -> None:
        """Keep records' own checks (record id, the checks as JSON text) made under `checks_profile`, replacing any
        this store held for those records under the spec hash; one transaction (`validate --per-record`)."""
        if not checked:
            return
        table = pa.table({"record_id": pa.array([rid for rid, _ in checked], pa.string()),
                          "spec_hash": pa.array([spec_hash] * len(checked), pa.string()),
                          "checks_profile": pa.array([checks_profile] * len(checked), pa.string()),
                          "checked": pa.array([text for _, text in checked], pa.string()),
                          "checked_at": pa.array([_now()] * len(checked), pa.timestamp("us"))})
        with self.transaction() as con:
            con.register("_checks", table)
            try:
                con.execute("DELETE FROM record_checks WHERE spec_hash = ? AND record_id IN "
                            "(SELECT record_id FROM _checks)", [spec_hash])
                con.execute("INSERT INTO record_checks BY NAME SELECT * FROM _checks")
            finally:
                con.unregister("_checks")

    def record_validation(self, *, spec_hash: str | None, source: str, results: dict[str, Sequence[Verdict]],
                          counts: dict, report: dict | None = None, n_tokens: dict[str, int] | None = None,
                          tokens_profile: str | None = None, near_groups: dict[str, str] | None = None,
                          near_groups_profile: str | None = None) -> str:
        """Store one validation pass: replace earlier 'validate' verdicts of these records, add the new
        ones, and mark every record as validated (passed = no reject-severity verdict). One transaction.

        `n_tokens`: each record's training example counted under `tokens_profile` (the span check's totals), kept
        with the mark so that a freeze under the same tokenizer and template reads them (`plain_usable`).
        `near_groups`: each record's near-duplicate cluster (the record id it keeps) as found under
        `near_groups_profile`, for a freeze that groups the same way (`near_groups`)."""
        validation_id = _now().strftime("%Y%m%dT%H%M%S") + "-v" + uuid.uuid4().hex[:8]
        now = _now()
        ids = list(results)
        n_tokens = n_tokens or {}
        near_groups = near_groups or {}
        with self.transaction() as con:
            con.execute("INSERT INTO validation_runs (validation_id, spec_hash, source, started_at, finished_at, "
                        "records, counts, report, tokens_profile, near_groups_profile) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [validation_id, spec_hash, source, now, now, len(ids), _json(counts), _json(report),
                         tokens_profile if n_tokens else None, near_groups_profile if near_groups else None])
            if ids:
                con.register("_ids", pa.table({"record_id": ids}))
                con.execute("DELETE FROM verdicts WHERE stage = 'validate' AND record_id IN (SELECT record_id FROM _ids)")
                con.unregister("_ids")
                rows = [(rid, v) for rid in ids for v in results[rid]]
                if rows:
                    table = _verdict_table(rows, validation_id, now, stage="validate")
                    con.register("_ver", table)
                    con.execute("INSERT INTO verdicts SELECT * FROM _ver")
                    con.unregister("_ver")
                marks = pa.table({
                    "record_id": ids, "validation_id": [validation_id] * len(ids),
                    "validated_at": pa.array([now] * len(ids), pa.timestamp("us")),
                    "passed": [not any(v.severity == "reject" for v in results[rid]) for rid in ids],
                    "n_tokens": pa.array([n_tokens.get(rid) for rid in ids], pa.int32()),
                    "near_group": pa.array([near_groups.get(rid) for rid in ids], pa.string()),
                })
                con.register("_marks", marks)
                con.execute("INSERT INTO record_validations BY NAME SELECT * FROM _marks")
                con.unregister("_marks")
        return validation_id

    def records(self, spec_hash: str | None = None, status: str | None = None,
                ids: Sequence[str] | None = None, *, messages: bool = True) -> list[Record]:
        """Stored records, ordered by id; filtered by spec hash, status and/or a list of ids. Without `messages`
        their prompts are not read (`messages` is empty): for callers that decide on records and show none."""
        where, params = self._record_filter(spec_hash, status)
        if ids is not None:
            if not ids:
                return []
            where.append("record_id IN (SELECT record_id FROM _want)")
            self.con.register("_want", pa.table({"record_id": list(ids)}))
        try:
            select = _RECORD_SELECT if messages else _RECORD_SELECT_NO_PROMPTS
            rows = self.con.execute(select + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY record_id",
                                    params).fetchall()
        finally:
            if ids is not None:
                self.con.unregister("_want")
        return decode_records(rows)

    def record_batches(self, spec_hash: str | None = None, status: str | None = None,
                       batch_size: int = 20_000, *, decoded: bool = True) -> Iterator[list]:
        """The records ``records`` reads, a batch at a time, so that a pass over a million records holds one batch,
        in the order the table keeps them (each batch sorted by id, the batches not): a caller that needs id order
        sorts what it keeps. Each batch is one window of row ids, which DuckDB reads from the row groups that hold it
        alone; a window of record ids (the reader until issue 29's 1M run) scanned every row group for each batch, a
        cost that grew with the square of the store. With ``decoded=False`` a batch is its rows as read (tuples of
        ids and JSON texts), for ``decode_records`` to make records of in another process: they are cheaper to send
        than records. No cursor is held open between batches."""
        for rows, _ in self._record_windows(spec_hash, status, batch_size):
            yield decode_records(rows) if decoded else rows

    def record_batches_with_checks(self, spec_hash: str, checks_profile: str, status: str | None = None,
                                   batch_size: int = 20_000) -> Iterator[tuple[list, dict[str, str]]]:
        """``record_batches``' rows as read, each batch with the own checks the store kept for its records under this
        spec hash and checks profile (record id -> JSON text, ``keep_record_checks``). The kept checks are joined to
        their records' row ids once, in a temporary table in row-id order, so each batch's come from the row groups
        of its window: looking each batch's ids up in all of ``record_checks`` cost a scan of it per batch (0.17
        CPU-s a batch at 1,000,000 kept checks, bench/RESULTS.md), again a square."""
        where, params = self._record_filter(spec_hash, status)
        table = f"_kept_checks_{next(_TEMP_NAMES)}"
        self.con.execute(
            f"CREATE TEMP TABLE {table} AS SELECT r.row_at, r.record_id, c.checked FROM (SELECT rowid AS row_at, "
            f"record_id FROM records WHERE {' AND '.join(where)}) r JOIN record_checks c USING (record_id) "
            "WHERE c.spec_hash = ? AND c.checks_profile = ? ORDER BY r.row_at", params + [spec_hash, checks_profile])
        try:
            for rows, (first, last) in self._record_windows(spec_hash, status, batch_size):
                yield rows, dict(self.con.execute(f"SELECT record_id, checked FROM {table} WHERE row_at BETWEEN ? "
                                                  "AND ?", [first, last]).fetchall())
        finally:
            with suppress(duckdb.Error):  # a connection closed first took its temporary tables with it
                self.con.execute(f"DROP TABLE IF EXISTS {table}")

    def _record_windows(self, spec_hash: str | None, status: str | None,
                        batch_size: int) -> Iterator[tuple[list, tuple[int, int]]]:
        """Rows as read, a window of row ids at a time, each with its first and last row id."""
        where, params = self._record_filter(spec_hash, status)
        cond = " AND ".join(where) if where else "true"
        rowids = self.con.execute(f"SELECT rowid FROM records WHERE {cond} ORDER BY rowid", params).fetchnumpy()
        rowids = rowids["rowid"]
        for at in range(0, len(rowids), batch_size):
            window = rowids[at:at + batch_size]
            first, last = int(window[0]), int(window[-1])
            rows = sorted(self.con.execute(_RECORD_SELECT + f" WHERE {cond} AND rowid BETWEEN ? AND ?",
                                           params + [first, last]).fetchall())
            if len(rows) != len(window):  # row ids move only when a writer compacts the table, as none does here
                raise StoreError(f"{self.root}: the records table changed while it was read (a window of row ids "
                                 f"held {len(rows)} of the {len(window)} records it held at the start); read again")
            yield rows, (first, last)

    @staticmethod
    def _record_filter(spec_hash: str | None, status: str | None) -> tuple[list[str], list]:
        where, params = [], []
        if spec_hash:
            where.append("spec_hash = ?")
            params.append(spec_hash)
        if status:
            where.append("status = ?")
            params.append(status)
        return where, params

    def sql(self, query: str, params: list | None = None) -> pa.Table:
        return self.con.sql(query, params=params or None).to_arrow_table()

    # ------------------------------------------------------------ parquet

    def export_parquet(self, spec_name: str, spec_version: int, spec_hash: str) -> Path:
        """Write this spec's records to Parquet atomically (temp file, then rename), in record id order.

        One sort of every whole record needs DuckDB memory for all of them at once: under MASHBILL_STORE_MEMORY=1GB
        the 1M rehearsal's merge failed there (issue 29). So the records are written in parts of at most
        EXPORT_PART_ROWS consecutive ids, each sorted on its own and streamed as Arrow batches into the one file in
        row groups of about EXPORT_BATCH_BYTES. Up to EXPORT_RANGE_PARTS parts, DuckDB reads each part by a range
        of record ids and sorts it; since sha256 ids leave no row group to skip, each is a scan of the whole table,
        a cost that grows with the square of the store. Beyond, one scan routes every record to its part in a
        spill file beside the export (Arrow IPC, lz4), and DuckDB sorts each part as it is read back from there (at
        3M records 3.1x less CPU than the ranges, bench/RESULTS.md). The file's schema is the table's
        (`_export_schema`)."""
        import pyarrow.parquet as pq

        out_dir = self.root / "parquet" / f"{spec_name}@{spec_version}"
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {out_dir}: {exc.strerror}") from None
        final = out_dir / "records.parquet"
        tmp = out_dir / f"{EXPORT_TMP_PREFIX}{os.getpid()}"
        spill = out_dir / f"{EXPORT_TMP_PREFIX}{os.getpid()}.parts"
        try:
            (n,) = self.con.execute("SELECT count(*) FROM records WHERE spec_hash = ?", [spec_hash]).fetchone()
            schema = self._export_schema()
            parts = (self._export_parts_by_ranges(spec_hash) if n <= EXPORT_PART_ROWS * EXPORT_RANGE_PARTS
                     else self._export_parts_routed(spec_hash, spill))
            # DuckDB's own level (the store's exports were DuckDB's COPY before)
            with closing(parts), pq.ParquetWriter(tmp, schema, compression="zstd", compression_level=3) as writer:
                for reader in parts:
                    try:
                        _write_row_groups(reader, writer, schema)
                    finally:  # a reader left open holds the connection: no other statement would run on it
                        reader.close()
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            tmp.replace(final)
        except (OSError, duckdb.Error, pa.ArrowException) as exc:
            tmp.unlink(missing_ok=True)
            spill.unlink(missing_ok=True)
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else _first_line(exc)
            raise StoreError(f"cannot write the Parquet export {final}: {why}; the records are safe in "
                             f"{self.root / DB_NAME}, and the next completed run exports them") from None
        return final

    def _export_parts_by_ranges(self, spec_hash: str) -> Iterator[pa.RecordBatchReader]:
        """Each part of the export sorted by DuckDB, read by a range of record ids (a scan of the table each)."""
        # the first id of each part (DuckDB sorts the narrow id column within the memory limit)
        starts = [r for (r,) in self.con.execute(
            "SELECT record_id FROM (SELECT record_id, row_number() OVER (ORDER BY record_id) - 1 AS i "
            "FROM records WHERE spec_hash = ?) WHERE i % ? = 0 ORDER BY record_id",
            [spec_hash, EXPORT_PART_ROWS]).fetchall()]
        for k, start in enumerate(starts or [None]):
            end = starts[k + 1] if k + 1 < len(starts) else None
            query = (f"SELECT {_EXPORTED} FROM records WHERE spec_hash = ?"
                     + (" AND record_id >= ?" if start is not None else "")
                     + (" AND record_id < ?" if end is not None else "") + " ORDER BY record_id")
            params = [spec_hash] + [v for v in (start, end) if v is not None]
            yield self.con.sql(query, params=params).to_arrow_reader(EXPORT_READ_ROWS)

    def _export_parts_routed(self, spec_hash: str, spill: Path) -> Iterator[pa.RecordBatchReader]:
        """Each part of the export sorted by DuckDB, read back from `spill`, which one scan of the table wrote every
        record to in runs of one part each (removed at the end)."""
        import numpy as np

        # each record's part by its row id (DuckDB sorts the narrow id column within the memory limit)
        got = self.con.execute("SELECT rowid, ((row_number() OVER (ORDER BY record_id) - 1) // ?)::INTEGER AS part "
                               "FROM records WHERE spec_hash = ?", [EXPORT_PART_ROWS, spec_hash]).fetchnumpy()
        part_of = np.full(int(got["rowid"].max()) + 1, -1, np.int32)
        part_of[got["rowid"]] = got["part"]
        runs: list[list[int]] = [[] for _ in range(int(got["part"].max()) + 1)]  # each part's runs in the spill
        del got
        reader = self.con.sql(f"SELECT rowid AS row_at, {_EXPORTED} FROM records WHERE spec_hash = ?",
                              params=[spec_hash]).to_arrow_reader(EXPORT_ROUTE_ROWS)
        try:
            written = reader.schema.remove(0)
            # lz4: a tenth of the bytes on disk (1.2 GB -> 125 MB for 500,000 complexity records), about as fast
            options = pa.ipc.IpcWriteOptions(compression="lz4")
            with pa.OSFile(str(spill), "wb") as sink, pa.ipc.new_file(sink, written, options=options) as out:
                for batch in reader:
                    part = part_of[batch.column(0).to_numpy()]
                    order = np.argsort(part, kind="stable")
                    part = part[order]
                    batch = batch.drop_columns(["row_at"]).take(pa.array(order))
                    cuts = np.flatnonzero(part[1:] != part[:-1]) + 1
                    for lo, hi in zip([0, *cuts], [*cuts, len(part)]):
                        runs[part[lo]].append(out.stats.num_record_batches)  # the index of the batch written next
                        out.write_batch(batch.slice(lo, hi - lo))
        finally:  # a reader left open holds the connection: no other statement would run on it
            reader.close()
        try:
            with pa.OSFile(str(spill), "rb") as source:
                read = pa.ipc.open_file(source)
                for run in runs:
                    self.con.register("_export_part", pa.Table.from_batches([read.get_batch(i) for i in run],
                                                                            schema=written))
                    try:
                        yield self.con.sql("SELECT * FROM _export_part ORDER BY record_id").to_arrow_reader(
                            EXPORT_READ_ROWS)
                    finally:
                        self.con.unregister("_export_part")
        finally:
            spill.unlink(missing_ok=True)

    def _export_schema(self) -> pa.Schema:
        """The exported columns as the records table declares them: NOT NULL where the table says so, JSON columns as
        Arrow's JSON type (what DuckDB's own Parquet writer marks them), the rest as DuckDB hands them to Arrow."""
        declared = {name: (kind, nullable) for name, kind, nullable in self.con.execute(
            "SELECT column_name, data_type, is_nullable FROM duckdb_columns() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND table_name = 'records'").fetchall()}
        arrow = self.con.sql(f"SELECT {_EXPORTED} FROM records LIMIT 0").to_arrow_table().schema
        return pa.schema([pa.field(f.name, pa.json_() if declared[f.name][0] == "JSON" else f.type,
                                   nullable=declared[f.name][1]) for f in arrow])

    def verdict_examples(self, per_code: int = 3) -> dict[str, dict]:
        """A few records per verdict code with the verdict's detail, input and output (factory.verdict_examples)."""
        from mashbill.factory.verdict_examples import verdict_examples

        return verdict_examples(self.con, per_code)


def reap_dead_runs(store: Store) -> list[str]:
    """Mark runs left 'running' by a process that is gone as 'interrupted'; returns their ids.

    Called with the write lock held: DuckDB lets one process write a store at a time, so a 'running' run of
    any other process has lost its writer (kill -9, a crash, a power cut). Its counts are filled from what
    it committed; teacher calls of the batch it had in progress were never stored and are not counted.
    """
    rows = store.con.execute("SELECT run_id, pid, hostname FROM runs WHERE status = 'running'").fetchall()
    me = (os.getpid(), socket.gethostname())
    dead = [r for r in rows if (r[1], r[2]) != me]
    for run_id, pid, host in dead:
        with store.transaction() as con:
            con.execute(
                "UPDATE runs SET status = 'interrupted', "
                "finished_at = coalesce((SELECT max(created_at) FROM records r WHERE r.run_id = runs.run_id), "
                "started_at), "
                "accepted = (SELECT count(*) FROM records r WHERE r.run_id = runs.run_id AND status = 'accepted'), "
                "rejected = (SELECT count(*) FROM records r WHERE r.run_id = runs.run_id AND status = 'rejected'), "
                "failed = (SELECT count(*) FROM records r WHERE r.run_id = runs.run_id AND status = 'failed'), "
                "calls = (SELECT count(*) FROM teacher_calls c WHERE c.run_id = runs.run_id), "
                "tokens_in = (SELECT coalesce(sum(prompt_tokens), 0) FROM teacher_calls c "
                "             WHERE c.run_id = runs.run_id), "
                "tokens_out = (SELECT coalesce(sum(completion_tokens), 0) FROM teacher_calls c "
                "              WHERE c.run_id = runs.run_id), "
                "tokens_cached = (SELECT coalesce(sum(cached_tokens), 0) FROM teacher_calls c "
                "                 WHERE c.run_id = runs.run_id), "
                "retries = (SELECT count(*) FROM teacher_calls c WHERE c.run_id = runs.run_id AND attempt > 1) "
                "WHERE run_id = ?", [run_id])
            con.execute("INSERT INTO events VALUES (?, ?, 'interrupted', ?)", [run_id, _now(), _json({
                "reason": f"process {pid} on {host} ended without finishing the run (killed or crashed)",
                "figures": "committed batches only: teacher calls of the batch in progress were lost"})])
    return [r[0] for r in dead]


def _write_row_groups(reader: pa.RecordBatchReader, writer, schema: pa.Schema) -> None:
    """The reader's batches into the writer as `schema`, a row group per about EXPORT_BATCH_BYTES decoded: one per
    DuckDB batch would be ~1 MB for small records (and compress worse), one per part ~430 MB for plans."""
    held: list[pa.RecordBatch] = []
    size = 0
    for batch in reader:
        columns = [pa.ExtensionArray.from_storage(f.type, col.cast(f.type.storage_type))
                   if isinstance(f.type, pa.ExtensionType) else col for f, col in zip(schema, batch.columns)]
        held.append(pa.RecordBatch.from_arrays(columns, schema=schema))
        size += batch.nbytes
        if size >= EXPORT_BATCH_BYTES:
            writer.write_table(pa.Table.from_batches(held, schema=schema), row_group_size=sum(map(len, held)))
            held, size = [], 0
    if held:
        writer.write_table(pa.Table.from_batches(held, schema=schema), row_group_size=sum(map(len, held)))


def remove_stale_exports(root: Path) -> None:
    """Remove Parquet export temporaries a killed run left (called with the write lock held)."""
    for tmp in (root / "parquet").glob(f"*/{EXPORT_TMP_PREFIX}*"):
        tmp.unlink(missing_ok=True)
