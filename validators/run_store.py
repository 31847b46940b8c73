"""Validating a spec's stored records: read from the store a batch at a time, each record's own checks (rules, token
spans, personal data) run here or in worker processes, then the checks that need every record (duplicates, leakage,
the span audit, the expectations) once over all, and the verdicts written back to the store."""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from dataclasses import dataclass, field

from mashbill.factory.records import Verdict
from mashbill.validators.data.inputs import Row, guess_lang
from mashbill.validators.errors import ValidationInputError
from mashbill.validators.plans.ruleset import load_rules
from mashbill.validators.run import (STAGE, Options, Report, SpanBatch, SpanPass, _progress, check_expectations,
                                     dedup_and_leaks, expectation_row, pii_found, pii_section)

log = logging.getLogger(__name__)

EVAL_SPLITS = {"eval", "test", "validation", "holdout"}


def _plan_meta(output) -> dict:
    tasks = output if isinstance(output, list) else output.get("tasks") if isinstance(output, dict) else None
    if not isinstance(tasks, list):
        return {}
    cats = [t.get("category") for t in tasks if isinstance(t, dict)]
    return {"n_tasks": len(tasks), "has_precision": float("precision_tools" in cats),
            "has_research": float("research" in cats), "single_task": float(len(tasks) == 1)}


BATCH = 20_000  # records held at once by a spec's validation (a million-record store in flat memory)
JOB_BATCH = 2_000  # records a worker process checks at a time


@dataclass
class _Checked:
    """One batch of stored records after the per-record checks (rules, token spans, personal data): what the rest of
    a validation needs of it. Made in this process or in a worker process (``--jobs``); small to send back."""

    verdicts: list[tuple[str, list[Verdict]]] = field(default_factory=list)  # per record, in order
    keys: dict[bool, list[str]] = field(default_factory=lambda: {False: [], True: []})  # train rows, eval rows
    queries: dict[bool, list[str | None]] = field(default_factory=lambda: {False: [], True: []})
    frame: dict[bool, list[dict]] = field(default_factory=lambda: {False: [], True: []})
    spans: dict[bool, SpanBatch] = field(default_factory=dict)
    pii: dict[str, list[Verdict]] = field(default_factory=dict)
    statuses: Counter = field(default_factory=Counter)
    rule_counts: Counter = field(default_factory=Counter)
    taxonomy_sources: Counter = field(default_factory=Counter)  # the checker's tallies for the rules section
    skipped: Counter = field(default_factory=Counter)


class _RecordChecks:
    """The per-record part of a spec's validation, one batch at a time: each record's rules, token spans and
    personal data depend on that record alone, so batches can be checked in any process and joined in order."""

    def __init__(self, rs, opts: Options, checker=None, spans: SpanPass | None = None):
        from mashbill.validators.checker import RecordChecker

        self.kind = rs.spec.kind
        self.opts = opts
        self.checker = checker or RecordChecker.for_spec(rs, opts.rules if rs.spec.rules else None)
        # measures only: the validation's own pass in this process, a pass of its own (whose report is never read)
        # in a worker process; the validation's pass takes what it measures
        if spans is None and opts.spans and opts.profile is not None:
            spans = SpanPass(opts, Report("", ""))
        self.spans = spans

    def check(self, records) -> _Checked:
        from mashbill.hashing import canonical_json

        out = _Checked()
        checker = self.checker
        rows: dict[bool, list[Row]] = {False: [], True: []}
        for rec in records:
            out.statuses[rec.status] += 1
            meta = rec.meta or {}
            query = rec.input.get("query") if isinstance(rec.input, dict) else None
            target = canonical_json(rec.output) if rec.output is not None else rec.raw
            row = Row(rec.id, query=query, target=target, n_messages=len(rec.messages) + 1)
            row.meta["lang"] = rec.input.get("lang") or guess_lang(query) if isinstance(rec.input, dict) else None
            verdicts: list[Verdict] = []
            if rec.output is None:
                verdicts.append(Verdict("SCHEMA002", "reject", "the output is missing or did not parse as JSON",
                                        STAGE))
            else:
                found = checker.check(rec.input if isinstance(rec.input, dict) else {}, rec.output, meta)
                out.rule_counts.update(v.code for v in found if v.code != "SCHEMA001")
                verdicts += found
                if self.kind == "plan":
                    row.meta.update(_plan_meta(rec.output))
                elif isinstance(rec.output, dict):
                    if "complexity" in rec.output:
                        row.meta["label"] = rec.output["complexity"]
                    if isinstance(rec.output.get("experts"), list):
                        row.meta["n_experts"] = len(rec.output["experts"])
            out.verdicts.append((rec.id, verdicts))
            row.examples.append(_example(rec))
            rows[str(meta.get("split", "")).lower() in EVAL_SPLITS].append(row)
        for part in (False, True):
            if self.spans is not None:
                out.spans[part] = self.spans.measure(rows[part])
            out.pii.update(pii_found(rows[part], self.opts))
            for r in rows[part]:
                out.keys[part].append(r.key)
                out.queries[part].append(r.query)
                line = expectation_row(r)
                if line is not None:
                    out.frame[part].append(line)
        # the checker's tallies, handed over and restarted so that each batch carries its own
        out.taxonomy_sources, checker.taxonomy_sources = checker.taxonomy_sources, Counter()
        out.skipped, checker.skipped = checker.skipped, Counter()
        return out


_WORKER: dict = {}


def _worker_check(spec_path: str, spec_hash: str, opts: Options, rows) -> _Checked:
    """Check one part of a batch in a worker process, its rows as read from the store (decoded here, not in the
    reading process); the spec, its rules and the tokenizer are loaded on the first part (a worker's start-up data
    stays small: a worker killed before it has read that data would leave its spawner writing to it for ever)."""
    from mashbill.factory.store import decode_records

    checks = _WORKER.get(spec_hash)
    if checks is None:
        from mashbill.specs import load_spec

        rs = load_spec(spec_path)
        if rs.hash != spec_hash:  # the spec or a file it names changed since the validation began
            raise ValidationInputError(f"{spec_path} changed during the validation (hash {rs.hash[:12]}, was "
                                       f"{spec_hash[:12]}); run it again")
        checks = _WORKER[spec_hash] = _RecordChecks(rs, opts)
    return checks.check(decode_records(rows))


def _checked_batches(rs, opts: Options, checks: _RecordChecks, batches, jobs: int):
    """Each batch checked, in the order read: here (a batch of records), or in parts spread over `jobs` worker
    processes (a batch of rows as read; spawned, so that no DuckDB or tokenizer thread of this process is forked), at
    most two parts a worker ahead of the reader."""
    if jobs <= 1:
        for records in batches:
            yield len(records), checks.check(records)
        return
    import multiprocessing
    from collections import deque
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    worker_opts = Options(**{**opts.__dict__, "progress": None})
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
    pending: deque = deque()
    broken = False
    try:
        for batch in batches:
            size = max(1, min(JOB_BATCH, -(-len(batch) // (4 * jobs))))  # every worker busy to the last batch
            for at in range(0, len(batch), size):
                part = batch[at:at + size]
                try:
                    fut = pool.submit(_worker_check, str(rs.path), rs.hash, worker_opts, part)
                except OSError as exc:  # Python 3.11: a pool that has just broken can fail on its closed wake-up pipe
                    raise BrokenProcessPool(str(exc)) from None
                pending.append((len(part), fut))
                if len(pending) >= 2 * jobs:
                    n, fut = pending.popleft()
                    yield n, fut.result()
        while pending:
            n, fut = pending.popleft()
            yield n, fut.result()
    except BrokenProcessPool:
        broken = True
        raise ValidationInputError(f"a worker process of --jobs {jobs} ended without a result (killed, or out of "
                                   "memory?); nothing was written: run it again, with fewer jobs") from None
    finally:
        if broken:  # Python 3.11's clean-up of a broken pool can wait for ever on a worker blocked sending a result
            for proc in multiprocessing.active_children():
                proc.kill()
        pool.shutdown(wait=not broken, cancel_futures=True)


def validate_spec_records(rs, store, opts: Options, *, include_all: bool = False, write: bool = True,
                          run_id: str | None = None, batch_size: int = BATCH, jobs: int = 1) -> Report:
    """Validate a spec's stored records and (by default) write the verdicts to the store.

    The records are read a batch at a time: the rules, token spans and PII run per batch (in `jobs` worker
    processes when jobs > 1); what the global checks need (each record's key and query, its line of the
    expectations frame, its audit stratum) is kept, the rest is dropped. Duplicates, leakage, the span audit and
    the expectations then run over the whole set, so the verdicts are those of one pass over every record, whatever
    the batch size or the number of processes."""
    from mashbill.validators.checker import RecordChecker

    status = None if include_all else "accepted"
    # rows as read when worker processes check them (they decode them), records otherwise
    batches = store.record_batches(spec_hash=rs.hash, status=status, batch_size=batch_size, decoded=jobs <= 1)
    first = next(batches, None)
    if not first:
        held = store.spec_status_counts(rs.spec.name, rs.spec.version)
        same = {status: n for h, status, n in held if h == rs.hash}
        other = sum(n for h, _, n in held if h != rs.hash)
        hint = ""
        if same:
            hint = ("; its records under this hash are all " +
                    ", ".join(f"{k} ({v})" for k, v in sorted(same.items())) +
                    " (--all validates those too)")
        elif other:
            hint = (f"; the store holds {other} record(s) of {rs.ref} under other content "
                    f"hashes (the spec or a file it references changed since they were generated)")
        raise ValidationInputError(f"no {'' if include_all else 'accepted '}records of {rs.ref} "
                                   f"(hash {rs.hash[:12]}) in {store.root}{hint}")
    report = Report(f"{rs.ref} in {store.root}", rs.spec.kind)
    if opts.rules is None and rs.spec.rules:
        opts.rules = load_rules(rs.file_paths["rules"])  # a routing or a complexity rule set
    checker = RecordChecker.for_spec(rs, opts.rules if rs.spec.rules else None)
    spans = SpanPass(opts, report) if opts.spans and opts.profile is not None else None
    checks = _RecordChecks(rs, opts, checker, spans)
    rule_counts: Counter = Counter()
    statuses: Counter = Counter()
    taxonomy_sources: Counter = Counter()
    skipped: Counter = Counter()
    # what the global checks need, train rows and eval rows apart (the checks see train rows first)
    keys: dict[bool, list[str]] = {False: [], True: []}
    queries: dict[bool, list[str | None]] = {False: [], True: []}
    frame: dict[bool, list[dict]] = {False: [], True: []}
    pii: dict[str, list[Verdict]] = {}
    done = 0
    for n, got in _checked_batches(rs, opts, checks, itertools.chain([first], batches), jobs):
        for key, verdicts in got.verdicts:
            report.add(key, verdicts)
        statuses.update(got.statuses)
        rule_counts.update(got.rule_counts)
        taxonomy_sources.update(got.taxonomy_sources)
        skipped.update(got.skipped)
        for part in (False, True):
            if spans is not None:
                spans.take(got.spans[part], eval_rows=part)
            keys[part] += got.keys[part]
            queries[part] += got.queries[part]
            frame[part] += got.frame[part]
        pii.update(got.pii)
        done += n
        _progress(opts, f"rules, token spans and personal data: {done:,} records")
    if checker.ruleset is not None:
        checker.taxonomy_sources, checker.skipped = taxonomy_sources, skipped
        report.sections["rules"] = {**checker.summary(), "counts": dict(rule_counts)}
    report.sections["records_by_status"] = dict(statuses)
    if keys[True]:
        report.sections["eval_split"] = len(keys[True])
    report.keys = keys[False] + keys[True]
    if spans is not None:
        order = report.keys

        def fetch(positions: list[int]) -> list:
            by_id = {rec.id: rec for rec in store.records(ids=[order[i] for i in positions])}
            return [_example(by_id[order[i]]) for i in positions]

        spans.finish(fetch)
    _progress(opts, "duplicates and leakage")
    part = bool(not keys[False])  # with no train rows, the eval rows are checked as the rows (nothing leaks into them)
    train = [(k, q) for k, q in zip(keys[part], queries[part]) if q is not None]
    held_out = list(zip(keys[True], queries[True])) if keys[False] else []
    dedup_and_leaks([k for k, _ in train], [q for _, q in train], held_out, opts, report)
    _progress(opts, "personal data")
    for key in report.keys:
        if key in pii:
            report.add(key, pii[key])
    pii_section(len(pii), opts, report)
    _progress(opts, "dataset expectations")
    check_expectations(frame[False] + frame[True], rs.spec.kind, opts, report)
    if write and not store.read_only:
        write_verdicts(store, report, spec_hash=rs.hash, n_tokens=spans.counts_by_key(report.keys) if spans else None,
                       tokens_profile=spans.tokens_profile if spans else None)
    return report


def _example(rec):
    """A stored record as the trainer sees it (its training messages), for the span checks."""
    from mashbill.validators.spans.spans import TrainingExample

    return TrainingExample(rec.id, tuple(rec.training_messages))


def write_verdicts(store, report: Report, spec_hash: str | None = None, source: str = "store",
                   n_tokens: dict[str, int] | None = None, tokens_profile: str | None = None) -> str:
    """Store this validation pass in one transaction: replace the records' earlier 'validate' verdicts, mark
    every record covered (snapshots only take validated records), and keep the summary, expectation results
    included, in validation_runs; with the records' token counts under `tokens_profile` and the duplicate check's
    clusters. Returns the validation id."""
    summary = report.to_dict()
    summary.pop("examples", None)
    results = {k: [v for v in report.verdicts.get(k, ()) if v.stage == STAGE] for k in report.keys}
    return store.record_validation(spec_hash=spec_hash, source=source, results=results, counts=report.counts(),
                                   report=summary, n_tokens=n_tokens, tokens_profile=tokens_profile,
                                   near_groups=report.near_groups, near_groups_profile=report.near_groups_profile)


def spec_options(rs, **overrides) -> Options:
    """Validation options from a spec: its trainer profile, holdout files and folder."""
    opts = Options(profile=rs.spec.trainer_profile,
                   holdout=[str(p) for k, p in rs.file_paths.items() if k.startswith("holdout.")],
                   base_dir=rs.home)
    for key, value in overrides.items():
        setattr(opts, key, value)
    return opts
