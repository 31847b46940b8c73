"""The store's named reads (and the review write) that curation, review, reports, trainers and benches use.

`Store` inherits these, so the store stays the one door to the data: no code outside `factory/` runs SQL on
the store's connection (tests/test_layers.py enforces it). Each method answers one question and returns plain
Python rows or an Arrow table; none takes SQL from its caller.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator, Sequence

import pyarrow as pa

from mashbill.errors import StoreError
from mashbill.jsontext import storable

REVIEW_COLUMNS = ("record_id", "reviewer", "status", "decision", "corrected_output", "correction_valid",
                  "correction_issues", "response_values", "responded_at", "pulled_at", "dataset")


def _in(values: Sequence) -> str:
    return ", ".join("?" for _ in values)


class StoreQueries:
    con: object  # the DuckDB connection Store holds
    root: object  # the store folder (pathlib.Path)

    @contextmanager
    def _ids(self, name: str, ids: Sequence[str]) -> Iterator[None]:
        """Register a one-column table of record ids for a join (far faster than a long IN list)."""
        self.con.register(name, pa.table({"record_id": pa.array(list(ids), pa.string())}))
        try:
            yield
        finally:
            self.con.unregister(name)

    # ------------------------------------------------------------ records and specs

    _ATTEMPT_COLS = ("record_id", "attempt", "sample", "repairs", "run_id", "status", "output", "raw", "verdicts", "feedback",
                     "tokens_in", "tokens_cached", "tokens_out", "teacher_s", "calls")

    def attempts(self, record_ids: Sequence[str] | None = None, *, spec_hash: str | None = None) -> list[dict]:
        """Repair attempts (factory.generate.repair), by record id and attempt number: of the given records, or of every
        record of a spec hash; `output` and `verdicts` parsed."""
        cols = ", ".join(f"a.{c}" for c in self._ATTEMPT_COLS)
        if record_ids is not None:
            with self._ids("_att_ids", record_ids):
                rows = self.con.execute(f"SELECT {cols} FROM record_attempts a JOIN _att_ids USING (record_id) "
                                        "ORDER BY a.record_id, a.attempt").fetchall()
        else:
            rows = self.con.execute(f"SELECT {cols} FROM record_attempts a JOIN records r USING (record_id) "
                                    "WHERE r.spec_hash = ? ORDER BY a.record_id, a.attempt", [spec_hash]).fetchall()
        out = []
        for row in rows:
            d = dict(zip(self._ATTEMPT_COLS, row))
            d["output"] = None if d["output"] is None else json.loads(d["output"])
            d["verdicts"] = json.loads(d["verdicts"])
            out.append(d)
        return out

    def attempt_chains(self, record_ids: Sequence[str]) -> dict[str, list[dict]]:
        """The stored attempts of each given record that has any, in order (a repair chain to resume)."""
        chains: dict[str, list[dict]] = {}
        for row in self.attempts(record_ids):
            chains.setdefault(row["record_id"], []).append(row)
        return chains

    def spec_status_counts(self, spec_name: str, spec_version: int) -> list[tuple[str, str, int]]:
        """(spec hash, status, records) of every content hash a spec name@version was generated under."""
        return self.con.execute(
            "SELECT spec_hash, status, count(*) FROM records WHERE spec_name = ? AND spec_version = ? "
            "GROUP BY ALL ORDER BY ALL", [spec_name, spec_version]).fetchall()

    def status_counts(self, spec_hashes: Sequence[str] | None = None) -> dict[str, int]:
        """Records per status, over some spec hashes (None: the whole store)."""
        where, params = self._hash_filter(spec_hashes)
        return dict(self.con.execute(f"SELECT status, count(*) FROM records {where} GROUP BY status "
                                     "ORDER BY status", params).fetchall())

    def failed_count(self, spec_name: str, kinds: Sequence[str]) -> int:
        return self.con.execute(f"SELECT count(*) FROM records WHERE spec_name = ? AND status = 'failed' AND "
                                f"kind IN ({_in(kinds)})", [spec_name, *kinds]).fetchone()[0]

    def stored_specs(self, kinds: Sequence[str] | None = None,
                     exclude_kinds: Sequence[str] | None = None) -> list[tuple[str, int, str, str]]:
        """(name, version, hash, kind) of every spec with records, optionally only / not some kinds."""
        where, params = [], []
        if kinds:
            where.append(f"kind IN ({_in(kinds)})")
            params += list(kinds)
        if exclude_kinds:
            where.append(f"kind NOT IN ({_in(exclude_kinds)})")
            params += list(exclude_kinds)
        return self.con.execute("SELECT DISTINCT spec_name, spec_version, spec_hash, kind FROM records" +
                                (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY ALL",
                                params).fetchall()

    def spec_paths(self) -> dict[str, list[str]]:
        """spec hash -> the spec file paths its runs recorded (`args.spec_path`)."""
        out: dict[str, list[str]] = {}
        for shash, path in self.con.execute(
                "SELECT DISTINCT spec_hash, json_extract_string(args, '$.spec_path') FROM runs "
                "WHERE args IS NOT NULL ORDER BY ALL").fetchall():
            if path:
                out.setdefault(shash, []).append(path)
        return out

    def record_runs(self, record_ids: Sequence[str]) -> dict[str, str]:
        """record id -> the run that produced it."""
        if not record_ids:
            return {}
        with self._ids("_q_ids", record_ids):
            return dict(self.con.execute("SELECT record_id, run_id FROM records JOIN _q_ids USING (record_id)")
                        .fetchall())

    def run_ids(self, spec_hash: str, *, answered: bool = True) -> list[str]:
        """Runs that stored records of a spec hash (with `answered`, only records that are not 'failed')."""
        extra = " AND status <> 'failed'" if answered else ""
        return [r[0] for r in self.con.execute(f"SELECT DISTINCT run_id FROM records WHERE spec_hash = ?{extra} "
                                               "ORDER BY run_id", [spec_hash]).fetchall()]

    def record_models(self, spec_hash: str) -> dict[str, str]:
        """record id -> the teacher model of its run ('unknown' when the run is gone)."""
        return dict(self.con.execute(
            "SELECT r.record_id, coalesce(u.model, 'unknown') FROM records r LEFT JOIN runs u USING (run_id) "
            "WHERE r.spec_hash = ?", [spec_hash]).fetchall())

    def runs_info(self, run_ids: Sequence[str]) -> list[dict]:
        """Provenance of some runs: spec, backend, model, its hash, model info and sampling (JSON decoded)."""
        if not run_ids:
            return []
        rows = self.con.execute(
            "SELECT run_id, spec_name, spec_version, backend, model, model_sha256, model_info, sampling FROM runs "
            f"WHERE run_id IN ({_in(run_ids)}) ORDER BY run_id", list(run_ids)).fetchall()
        return [{"run_id": r[0], "spec_name": r[1], "spec_version": r[2], "backend": r[3], "model": r[4],
                 "model_sha256": r[5], "model_info": json.loads(r[6]) if r[6] else {},
                 "sampling": json.loads(r[7]) if r[7] else {}} for r in rows]

    def record_timeline(self, spec_hashes: Sequence[str] | None = None) -> list[tuple[str, str, str]]:
        """(run id, spec name@version, status) of each record, in the order each run stored them."""
        where, params = self._hash_filter(spec_hashes)
        return self.con.execute(
            f"SELECT run_id, spec_name || '@' || spec_version, status FROM records {where} "
            "ORDER BY run_id, created_at, record_id", params).fetchall()

    def run_timeline(self, spec_hashes: Sequence[str] | None = None) -> pa.Table:
        """Per run (run_id, spec name@version, accepted: bool list of its records' status == 'accepted', in the
        order `record_timeline` gives), as columns."""
        where, params = self._hash_filter(spec_hashes)
        return self.con.sql(
            "SELECT run_id, list(spec ORDER BY created_at, record_id)[1] AS spec, list(accepted ORDER BY created_at, record_id) AS accepted FROM "
            f"(SELECT run_id, spec_name || '@' || spec_version AS spec, status = 'accepted' AS accepted, created_at, "
            f"record_id FROM records {where}) GROUP BY run_id ORDER BY run_id", params=params or None).to_arrow_table()

    def call_latencies(self, spec_hashes: Sequence[str] | None = None) -> list[float]:
        """Latency of every teacher call for records of some spec hashes, in call order."""
        where, params = self._hash_filter(spec_hashes)
        return [r[0] for r in self.con.execute(
            f"SELECT c.latency_s FROM teacher_calls c WHERE c.record_id IN (SELECT record_id FROM records {where}) "
            "ORDER BY c.created_at, c.call_id", params).fetchall()]

    def call_totals(self) -> tuple[int | None, int | None, int | None]:
        """(prompt, prefix-cached, completion) tokens over all teacher calls without an error."""
        return self.con.execute("SELECT sum(prompt_tokens), sum(cached_tokens), sum(completion_tokens) "
                                "FROM teacher_calls WHERE error IS NULL").fetchone()

    def _hash_filter(self, spec_hashes: Sequence[str] | None) -> tuple[str, list]:
        if not spec_hashes:
            return "", []
        return f"WHERE spec_hash IN ({_in(spec_hashes)})", list(spec_hashes)

    # ------------------------------------------------------------ verdicts and validation marks

    def verdict_rows(self, spec_hash: str, record_ids: Sequence[str] | None = None
                     ) -> list[tuple[str, str, str, str, str | None]]:
        """(record id, stage, code, severity, detail) of every verdict on a spec hash's records (of `record_ids`
        only, when given), by record, stage, code and detail."""
        sql = ("SELECT v.record_id, v.stage, v.code, v.severity, v.detail FROM verdicts v JOIN records r "
               "USING (record_id) WHERE r.spec_hash = ? {} ORDER BY v.record_id, v.stage, v.code, v.detail")
        if record_ids is None:
            return self.con.execute(sql.format(""), [spec_hash]).fetchall()
        with self._ids("_q_verdicts", record_ids):
            return self.con.execute(sql.format("AND v.record_id IN (SELECT record_id FROM _q_verdicts)"),
                                    [spec_hash]).fetchall()

    def record_checks_held(self, spec_hash: str) -> dict[str, int]:
        """Records with kept own checks under this spec hash, per checks profile."""
        return dict(self.con.execute("SELECT checks_profile, count(*) FROM record_checks WHERE spec_hash = ? "
                                     "GROUP BY ALL", [spec_hash]).fetchall())

    def stage_verdicts(self, spec_hash: str, stage: str, code: str) -> list[tuple[str, str]]:
        """(record id, detail) of one spec hash's verdicts of one stage and code, in record id order."""
        return self.con.execute(
            "SELECT record_id, detail FROM verdicts WHERE stage = ? AND code = ? AND record_id IN "
            "(SELECT record_id FROM records WHERE spec_hash = ?) ORDER BY ALL", [stage, code, spec_hash]).fetchall()

    def verdict_counts(self, spec_hash: str | None = None) -> dict[str, int]:
        """Verdicts per code, on one spec hash's records (None: the whole store), sorted by code."""
        if spec_hash is None:
            rows = self.con.execute("SELECT code, count(*) FROM verdicts GROUP BY code ORDER BY code").fetchall()
        else:
            rows = self.con.execute(
                "SELECT code, count(*) FROM verdicts WHERE record_id IN (SELECT record_id FROM records WHERE "
                "spec_hash = ?) GROUP BY code ORDER BY code", [spec_hash]).fetchall()
        return dict(rows)

    def verdict_record_counts(self) -> dict[str, int]:
        """Records per verdict code (a record with two verdicts of one code, or one from generate and one from
        validate, counts once), sorted by code."""
        return dict(self.con.execute("SELECT code, count(DISTINCT record_id) FROM verdicts GROUP BY code "
                                     "ORDER BY code").fetchall())

    def records_with_codes(self, codes: Sequence[str]) -> int:
        """How many records carry a verdict with one of these codes."""
        return self.con.execute(f"SELECT count(DISTINCT record_id) FROM verdicts WHERE code IN ({_in(codes)})",
                                list(codes)).fetchone()[0]

    def latest_marks(self, spec_hash: str, record_ids: Sequence[str] | None = None) -> dict[str, tuple[bool, str]]:
        """record id -> (passed, validation id) of the latest validation pass that covered it (of `record_ids`
        only, when given)."""
        sql = ("SELECT record_id, arg_max(passed, validated_at), arg_max(validation_id, validated_at) "
               "FROM record_validations WHERE record_id IN (SELECT record_id FROM records WHERE spec_hash = ?) "
               "{} GROUP BY record_id")
        if record_ids is None:
            return {r[0]: (r[1], r[2]) for r in self.con.execute(sql.format(""), [spec_hash]).fetchall()}
        with self._ids("_q_marks", record_ids):
            return {r[0]: (r[1], r[2]) for r in self.con.execute(
                sql.format("AND record_id IN (SELECT record_id FROM _q_marks)"), [spec_hash]).fetchall()}

    def validation_ids(self, spec_hash: str) -> list[str]:
        """Every validation run that covered some record of a spec hash."""
        return [r[0] for r in self.con.execute(
            "SELECT DISTINCT validation_id FROM record_validations WHERE record_id IN "
            "(SELECT record_id FROM records WHERE spec_hash = ?) ORDER BY 1", [spec_hash]).fetchall()]

    def near_groups(self, validation_id: str, profile: str) -> pa.Table | None:
        """The near-duplicate clusters one validation run found (record_id, near_group: the record id its cluster
        keeps) for the records its duplicate check covered, or None where that run found none under `profile`
        (another threshold or method, or no duplicate check)."""
        found = self.con.execute("SELECT near_groups_profile FROM validation_runs WHERE validation_id = ?",
                                 [validation_id]).fetchall()
        if not found or found[0][0] != profile:
            return None
        return self.con.sql("SELECT record_id, near_group FROM record_validations WHERE validation_id = ? "
                            "AND near_group IS NOT NULL", params=[validation_id]).to_arrow_table()

    # ------------------------------------------------------------ review decisions

    def review_rows(self, *, spec_hashes: Sequence[str] | None = None, record_ids: Sequence[str] | None = None,
                    submitted: bool = False) -> list[dict]:
        """Review decisions as dicts (REVIEW_COLUMNS), for records of some spec hashes or some record ids."""
        cols = ", ".join(f"d.{c}" for c in REVIEW_COLUMNS)
        where, params = [], []
        if spec_hashes:
            where.append(f"d.record_id IN (SELECT record_id FROM records WHERE spec_hash IN ({_in(spec_hashes)}))")
            params += list(spec_hashes)
        if submitted:
            where.append("d.status = 'submitted'")
        sql = f"SELECT {cols} FROM review_decisions d"
        if record_ids is not None:
            if not record_ids:
                return []
            sql += " JOIN _q_rev USING (record_id)"
        sql += (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY d.record_id, d.reviewer"
        if record_ids is None:
            rows = self.con.execute(sql, params).fetchall()
        else:
            with self._ids("_q_rev", record_ids):
                rows = self.con.execute(sql, params).fetchall()
        return [dict(zip(REVIEW_COLUMNS, r)) for r in rows]

    def write_review_decisions(self, rows: Sequence[dict]) -> tuple[int, int]:
        """Insert review rows (dicts of REVIEW_COLUMNS), replacing each (record, reviewer)'s earlier row; one
        transaction. Returns (stored, replaced)."""
        if not rows:
            return 0, 0
        types = {"correction_valid": pa.bool_(), "responded_at": pa.timestamp("us"), "pulled_at": pa.timestamp("us")}
        # what a reviewer typed may hold a lone surrogate (an escape the review server passed on): kept as U+FFFD
        table = pa.table({c: pa.array([storable(r[c]) if c not in types else r[c] for r in rows],
                                      types.get(c, pa.string())) for c in REVIEW_COLUMNS})
        with self.transaction() as con:
            con.register("_new", table)
            replaced = con.execute("SELECT count(*) FROM review_decisions d JOIN _new n "
                                   "ON d.record_id = n.record_id AND d.reviewer = n.reviewer").fetchone()[0]
            con.execute("DELETE FROM review_decisions USING _new n "
                        "WHERE review_decisions.record_id = n.record_id AND review_decisions.reviewer = n.reviewer")
            con.execute(f"INSERT INTO review_decisions ({', '.join(REVIEW_COLUMNS)}) "
                        f"SELECT {', '.join(REVIEW_COLUMNS)} FROM _new")
            con.unregister("_new")
        return len(rows), replaced

    # A stored JSON column (written by `_json`: sorted keys, ", " and ": " separators, no indent) as its canonical
    # text (`specs.canonical_json` of the decoded value): the same text without the spaces outside string literals.
    _MINIFY = r"""regexp_replace({col}, '("[^"\\]*(?:\\.[^"\\]*)*")| ', '\1', 'g')"""
    # Messages (long system prompts) the cheaper way where it gives the same text: DuckDB's own minified JSON
    # writes strings as Python does except for the upper-case hex of \u00XX escapes, so only lists of {content,
    # role} strings with no such escape take it (about 3.5x less CPU than the expression above on 2.5 KB prompts).
    _MINIFY_MESSAGES = ("CASE WHEN json_structure({col}) = '[{{\"content\":\"VARCHAR\",\"role\":\"VARCHAR\"}}]' "
                        "AND NOT contains({col}, '\\u00') THEN json({col})::VARCHAR ELSE " + _MINIFY + " END")

    def plain_usable(self, spec_hash: str, paths: Sequence[tuple[str, str, str]] = (), key_label: str | None = None,
                     tokens_profile: str | None = None) -> tuple[pa.Table, list[str]]:
        """The records of a spec hash that are usable without the rules' walk (`factory.usable.record_states`'s
        common case: accepted, the latest validation mark passed, no review row, no judge's reject; flags and
        penalties do not change usability) as one Arrow table in record id order, and the ids of every other record
        of the hash (for `record_states(ids=...)`).

        Columns: record_id, run_id, validation_id, n_tokens; input and meta as stored (JSON text); output and
        messages as canonical JSON text (what `canonical_json` gives for the decoded value); output_type and
        output_len (the output's JSON type and array length); and
        per (name, column, JSON path) in `paths` that path's JSON text (NULL when absent; a path with `*` gives the
        list of what it matched). With `key_label`, a `key` column (the sha256 hex of the canonical JSON array
        [key_label, messages, the output's canonical JSON as a string]) instead of `messages`: for "sft" the key kept
        when the record was written (`records.sft_key`), else the long prompts hashed where they are, not copied out
        (issue 29). The prompts stay in the store: `prompts_of` reads them when a snapshot's split is written.
        `n_tokens`: the training example's token count that the record's latest validation kept, where that
        validation counted under `tokens_profile` (else NULL)."""
        for name, col, path in paths:  # names and paths come from code, never from a spec; refuse anything else
            if not (name.isidentifier() and col in ("input", "output", "meta") and "'" not in path):
                raise ValueError(f"plain_usable: bad path {(name, col, path)!r}")
        if key_label is not None and not key_label.isidentifier():
            raise ValueError(f"plain_usable: bad key label {key_label!r}")
        m = self._MINIFY
        extra = "".join(f", json_extract(r.{col}, '{path}')::VARCHAR AS {name}" for name, col, path in paths)
        messages = self._MINIFY_MESSAGES.format(col="r.messages")
        if key_label is None:
            messages = f"{messages} AS messages"
        else:  # a canonical JSON text holds no control character: as a JSON string only \ and " are escaped
            output = f"replace(replace(coalesce({m.format(col='r.output')}, 'null'), '\\', '\\\\'), '\"', '\\\"')"
            messages = f"""sha256('["{key_label}",' || {messages} || ',"' || {output} || '"]')"""
            if key_label == "sft":  # kept when the record was written (migration 13); computed for older records
                messages = f"CASE WHEN r.sft_key IS NOT NULL THEN r.sft_key ELSE {messages} END"
            messages += " AS key"
        # the latest mark as one struct: arg_max skips a NULL argument, so a count left out by the latest
        # validation would come from an earlier one
        plain = self.con.sql(
            "WITH l AS (SELECT record_id, arg_max({'p': passed, 'v': validation_id, 'n': n_tokens}, validated_at) "
            "AS m FROM record_validations WHERE record_id IN (SELECT record_id FROM records WHERE spec_hash = ?) "
            "GROUP BY record_id), "
            "m AS (SELECT record_id, l.m.p AS passed, l.m.v AS validation_id, "
            "CASE WHEN vr.tokens_profile = ? THEN l.m.n END AS n_tokens "
            "FROM l LEFT JOIN validation_runs vr ON vr.validation_id = l.m.v) "
            f"SELECT r.record_id, r.run_id, m.validation_id, m.n_tokens, r.input, r.meta, "
            f"{m.format(col='r.output')} AS output, {messages}, "
            "json_type(r.output) AS output_type, json_array_length(r.output) AS output_len"
            f"{extra} FROM records r JOIN m USING (record_id) "
            "WHERE r.spec_hash = ? AND r.status = 'accepted' AND m.passed "
            "AND NOT EXISTS (SELECT 1 FROM verdicts v WHERE v.record_id = r.record_id AND v.stage = 'judge' "
            "AND v.severity = 'reject') "
            "AND NOT EXISTS (SELECT 1 FROM review_decisions d WHERE d.record_id = r.record_id) "
            "ORDER BY r.record_id", params=[spec_hash, tokens_profile, spec_hash]).to_arrow_table()
        self.con.register("_q_plain", plain.select(["record_id"]))
        try:
            others = [r[0] for r in self.con.execute(
                "SELECT record_id FROM records WHERE spec_hash = ? AND record_id NOT IN (SELECT record_id FROM "
                "_q_plain) ORDER BY record_id", [spec_hash]).fetchall()]
        finally:
            self.con.unregister("_q_plain")
        return plain, others

    def plain_left_out(self, spec_hash: str, ids: Sequence[str]) -> tuple[list[tuple], list[str]]:
        """Of `ids` (records of a spec hash), those that `factory.usable.record_states` leaves out without the
        rules' walk (no review row, so no correction can take them back: not accepted at generation, or accepted
        and failed by their latest validation), decided here from columns without reading the records whole; and
        the ids of the rest (for `record_states(ids=...)`). A million-record store has tens of thousands of these.

        Each row: (record_id, stage, codes, detail, query, output): the stage, codes and detail `usable.usability`
        gives from the record's status, latest mark and verdicts (in `verdict_rows` order); `query` the input's query
        when it is a string, `output` the output's canonical JSON, else the raw text. In record id order."""
        from mashbill.factory.usable import Decision, usability

        if not ids:
            return [], []
        m = self._MINIFY
        with self._ids("_q_left", ids):
            rows = self.con.execute(
                "WITH w AS (SELECT r.record_id, r.status, r.input, r.output, r.raw FROM records r "
                "JOIN _q_left USING (record_id) WHERE r.spec_hash = ? "
                "AND NOT EXISTS (SELECT 1 FROM review_decisions d WHERE d.record_id = r.record_id)), "
                "l AS (SELECT record_id, arg_max(passed, validated_at) AS passed FROM record_validations "
                "WHERE record_id IN (SELECT record_id FROM w) GROUP BY record_id), "
                "v AS (SELECT record_id, list(stage ORDER BY stage, code, detail) AS stages, "
                "list(code ORDER BY stage, code, detail) AS codes, "
                "list(severity ORDER BY stage, code, detail) AS severities, "
                "list(coalesce(detail, '') ORDER BY stage, code, detail) AS details "
                "FROM verdicts WHERE record_id IN (SELECT record_id FROM w) GROUP BY record_id) "
                "SELECT w.record_id, w.status, l.passed, v.stages, v.codes, v.severities, v.details, "
                "CASE WHEN json_type(w.input, '$.query') = 'VARCHAR' THEN json_extract_string(w.input, '$.query') END, "
                f"CASE WHEN w.output IS NULL OR w.output = 'null' THEN w.raw ELSE {m.format(col='w.output')} END "
                "FROM w LEFT JOIN l USING (record_id) LEFT JOIN v USING (record_id) "
                "WHERE w.status <> 'accepted' OR l.passed = false ORDER BY w.record_id", [spec_hash]).fetchall()
        out = []
        undecided = Decision("none")  # no review row
        for rid, status, passed, stages, codes, severities, details, query, output in rows:
            verdicts = tuple(zip(stages, codes, severities, details)) if stages else ()
            u = usability(status, passed, verdicts, undecided)
            out.append((rid, u.stage, u.codes, u.detail, query, output))
        decided = {r[0] for r in out}
        return out, [i for i in ids if i not in decided]

    _PROMPT = """from_json(r.messages, '[{"role":"VARCHAR","content":"VARCHAR"}]')"""

    def prompts_of(self, record_ids: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
        """The messages of these records as list<struct<role, content>> (the fields a snapshot keeps), in the order
        given (an id may repeat). Read where they lie, straight into the order a snapshot's split is written in: at
        a million records the prompts are most of the freeze's memory, and on a machine that charges for every page
        it touches afresh, most of its time (issue 29, bench/RESULTS.md)."""
        import numpy as np

        order = pa.table({"record_id": record_ids, "pos": pa.array(np.arange(len(record_ids), dtype=np.int64))})
        self.con.register("_q_prompts", order)
        try:
            got = self.con.sql(f"SELECT {self._PROMPT} AS prompt FROM _q_prompts o JOIN records r USING (record_id) "
                               "ORDER BY o.pos").to_arrow_table()
        finally:
            self.con.unregister("_q_prompts")
        if got.num_rows != len(record_ids):
            raise StoreError(f"store {self.root}: {len(record_ids) - got.num_rows} of {len(record_ids)} records asked "
                             "for their prompts are not in the store")
        return got.column("prompt")

    def usable(self, spec_hash: str, *, require_review: bool = False, validator=None, recheck_for=None,
               ids: Sequence[str] | None = None, messages: bool = True) -> list:
        """Every record of a spec hash (or those of `ids`) with the one answer to "is it usable?"
        (factory.usable.record_states; without `messages`, records without their prompts)."""
        from mashbill.factory.usable import record_states

        return record_states(self, spec_hash, require_review=require_review, validator=validator,
                             recheck_for=recheck_for, ids=ids, messages=messages)

    # ------------------------------------------------------------ events

    def events_of(self, kind: str) -> list[tuple]:
        """(timestamp, decoded detail) of every event of a kind, oldest first."""
        return [(ts, json.loads(d) if d else {}) for ts, d in self.con.execute(
            "SELECT ts, detail FROM events WHERE kind = ? ORDER BY ts", [kind]).fetchall()]

    # ------------------------------------------------------------ router datasets

    def router_outcomes(self, sources: Sequence[str] | None = None) -> pa.Table:
        """Outcome rows (optionally of some sources), ordered by query, model and source."""
        where = f"WHERE source IN ({_in(sources)})" if sources else ""
        return self.con.sql(
            "SELECT query_id, model, source, correct, score, judge, cost, latency_s, tokens_in, tokens_out "
            f"FROM router_outcomes {where} ORDER BY query_id, model, source",
            params=list(sources) if sources else None).to_arrow_table()

    def router_texts(self) -> dict[str, str]:
        """query id -> query text of every stored router query."""
        return dict(self.con.execute("SELECT query_id, text FROM router_queries ORDER BY query_id").fetchall())
