"""Validating a spec's stored records: read from the store a batch at a time, each record's own checks (rules, token
spans, personal data) run here or in worker processes, or read from those the store kept (`--per-record` on the
shard store that made the record), then the checks that need every record (duplicates, leakage, the span audit, the
expectations) once over all, and the verdicts written back to the store."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mashbill.factory.records import Verdict, verdict_dicts
from mashbill.memory import collected_between, fewer_collections
from mashbill.validators.data.inputs import Row, guess_lang
from mashbill.validators.errors import ValidationInputError
from mashbill.validators.plans.ruleset import load_rules
from mashbill.validators.run import (STAGE, ExampleSpan, Options, Report, SpanBatch, SpanPass, _progress,
                                     check_expectations, dedup_and_leaks, expectation_row, pii_found, pii_section)

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


def _verdicts(dicts) -> list[Verdict]:
    return [Verdict(**d) for d in dicts]


@dataclass
class _Checked:
    """One batch of stored records after the per-record checks (rules, token spans, personal data): what the rest of
    a validation needs of it. Made in this process or in a worker process (``--jobs``), or joined from the records'
    stored checks (``join``); small to send back. ``items``: each record's checks as stored, when asked to keep them."""

    verdicts: list[tuple[str, list[Verdict]]] = field(default_factory=list)  # per record, in order
    keys: dict[bool, list[str]] = field(default_factory=lambda: {False: [], True: []})  # train rows, eval rows
    queries: dict[bool, list[str | None]] = field(default_factory=lambda: {False: [], True: []})
    frame: dict[bool, list[dict | None]] = field(default_factory=lambda: {False: [], True: []})  # None: did not parse
    spans: dict[bool, SpanBatch] = field(default_factory=dict)
    pii: dict[str, list[Verdict]] = field(default_factory=dict)
    statuses: Counter = field(default_factory=Counter)
    rule_counts: Counter = field(default_factory=Counter)
    taxonomy_sources: Counter = field(default_factory=Counter)  # the checker's tallies for the rules section
    skipped: Counter = field(default_factory=Counter)
    items: list[dict] | None = None

    @classmethod
    def join(cls, items: list[dict], spans: bool) -> "_Checked":
        """A batch from its records' checks, one item each in the order read (see ``_RecordChecks.check``)."""
        out = cls()
        if spans:
            out.spans = {False: SpanBatch(), True: SpanBatch()}
        for it in items:
            key, part = it["id"], it["eval"]
            out.statuses[it["status"]] += 1
            if it["rules"]:  # (Counter.update costs a microsecond even for nothing)
                out.rule_counts.update(it["rules"])
            if it["taxonomy"]:
                out.taxonomy_sources.update(it["taxonomy"])
            for rule, need, n in it["skipped"]:
                out.skipped[(rule, need)] += n
            out.verdicts.append((key, _verdicts(it["verdicts"])))
            out.keys[part].append(key)
            out.queries[part].append(it["query"])
            out.frame[part].append(it["frame"])  # None for a row that did not parse: left out once in id order
            if it["pii"]:
                out.pii[key] = _verdicts(it["pii"])
            if spans:
                batch = out.spans[part]
                for verdicts, total, target, margin, cut, shape in it["spans"]["examples"]:
                    batch.examples.append(ExampleSpan(key, _verdicts(verdicts), total, target, margin, cut,
                                                      tuple(shape)))
                batch.counts.append(it["spans"]["count"])
        return out


class _RecordChecks:
    """The per-record part of a spec's validation, one batch at a time: each record's rules, token spans and
    personal data depend on that record alone, so batches can be checked in any process, or on the node that made
    the records (``--per-record``), and joined in order."""

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

    def check(self, records, *, keep_items: bool = False) -> _Checked:
        """The batch's checks. Each record's are first made an item of plain data (what a store keeps of it, and
        joins back into a batch the same way), so that checks read back are the checks made."""
        from mashbill.hashing import canonical_json

        checker = self.checker
        items: list[dict] = []
        rows: dict[bool, list[Row]] = {False: [], True: []}
        for rec in records:
            meta = rec.meta or {}
            query = rec.input.get("query") if isinstance(rec.input, dict) else None
            target = canonical_json(rec.output) if rec.output is not None else rec.raw
            row = Row(rec.id, query=query, target=target, n_messages=len(rec.messages) + 1)
            row.meta["lang"] = rec.input.get("lang") or guess_lang(query) if isinstance(rec.input, dict) else None
            verdicts: list[Verdict] = []
            counted: list[str] = []
            if checker.taxonomy_sources or checker.skipped:  # this record's tallies (most records make none)
                checker.taxonomy_sources, checker.skipped = Counter(), Counter()
            if rec.output is None:
                verdicts.append(Verdict("SCHEMA002", "reject", "the output is missing or did not parse as JSON",
                                        STAGE))
            else:
                found = checker.check(rec.input if isinstance(rec.input, dict) else {}, rec.output, meta)
                counted = [v.code for v in found if v.code != "SCHEMA001"]
                verdicts += found
                if self.kind == "plan":
                    row.meta.update(_plan_meta(rec.output))
                elif isinstance(rec.output, dict):
                    if "complexity" in rec.output:
                        row.meta["label"] = rec.output["complexity"]
                    if isinstance(rec.output.get("experts"), list):
                        row.meta["n_experts"] = len(rec.output["experts"])
            row.examples.append(_example(rec))
            part = str(meta.get("split", "")).lower() in EVAL_SPLITS
            rows[part].append(row)
            items.append({"id": rec.id, "status": rec.status, "eval": part, "verdicts": verdict_dicts(verdicts),
                          "rules": counted, "taxonomy": dict(checker.taxonomy_sources),
                          "skipped": [[rule, need, n] for (rule, need), n in checker.skipped.items()],
                          "query": query})
        checker.taxonomy_sources, checker.skipped = Counter(), Counter()
        by_id = {it["id"]: it for it in items}
        fast_s, pieces = 0.0, 0
        for part in (False, True):
            if self.spans is not None:
                measured = self.spans.measure(rows[part])
                fast_s += measured.fast_s
                pieces += measured.pieces
                per_key: dict[str, list] = {}
                for ex in measured.examples:
                    per_key.setdefault(ex.key, []).append([verdict_dicts(ex.verdicts), ex.total, ex.target,
                                                           ex.margin, ex.cut, list(ex.shape)])
                for r, count in zip(rows[part], measured.counts):
                    by_id[r.key]["spans"] = {"examples": per_key.get(r.key, []), "count": count}
            pii = pii_found(rows[part], self.opts)
            for r in rows[part]:
                it = by_id[r.key]
                it["pii"] = verdict_dicts(pii.get(r.key, ()))
                it["frame"] = expectation_row(r)
        out = _Checked.join(items, self.spans is not None)
        if self.spans is not None:
            out.spans[False].fast_s, out.spans[False].pieces = fast_s, pieces
        if keep_items:
            out.items = items
        return out


_WORKER: dict = {}


def _worker_check(spec_path: str, spec_hash: str, opts: Options, rows, keep_items: bool = False) -> _Checked:
    """Check one part of a batch in a worker process, its rows as read from the store (decoded here, not in the
    reading process); the spec, its rules and the tokenizer are loaded on the first part (a worker's start-up data
    stays small: a worker killed before it has read that data would leave its spawner writing to it for ever)."""
    from mashbill.factory.store import decode_records

    checks = _WORKER.get(spec_hash)
    if checks is None:
        from mashbill.specs import load_spec

        rs = load_spec(spec_path, seed_rows=False)
        if rs.hash != spec_hash:  # the spec or a file it names changed since the validation began
            raise ValidationInputError(f"{spec_path} changed during the validation (hash {rs.hash[:12]}, was "
                                       f"{spec_hash[:12]}); run it again")
        checks = _WORKER[spec_hash] = _RecordChecks(rs, opts)
    return checks.check(decode_records(rows), keep_items=keep_items)


@dataclass
class _Kept:
    """A run of records, in the order read, whose own checks the store kept (JSON texts): joined, not checked."""

    texts: list[str]

    def checked(self, spans: bool) -> _Checked:
        return _Checked.join([json.loads(t) for t in self.texts], spans)


def _checked_batches(rs, opts: Options, checks: _RecordChecks, batches, jobs: int, *, raw: bool = False,
                     keep_items: bool = False):
    """Each batch checked, in the order read: here (a batch of records, or of rows as read with `raw`), or in parts
    spread over `jobs` worker processes (a batch of rows as read; spawned, so that no DuckDB or tokenizer thread of
    this process is forked), at most two parts a worker ahead of the reader. A ``_Kept`` run is joined here."""
    spans = checks.spans is not None
    if jobs <= 1:
        from mashbill.factory.store import decode_records

        for batch in batches:
            if isinstance(batch, _Kept):
                n, checked = len(batch.texts), batch.checked(spans)
            else:
                n, checked = len(batch), checks.check(decode_records(batch) if raw else batch, keep_items=keep_items)
            del batch  # its records are not held while the reader collects cycles between batches
            yield n, checked
        return
    import multiprocessing
    from collections import deque
    from concurrent.futures import Future, ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    worker_opts = Options(**{**opts.__dict__, "progress": None})
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))

    def parts(batch):  # (records, future) per part: a kept run joined here, the rest sent to the workers
        if isinstance(batch, _Kept):
            fut = Future()
            fut.set_result(batch.checked(spans))
            yield len(batch.texts), fut
            return
        size = max(1, min(JOB_BATCH, -(-len(batch) // (4 * jobs))))  # every worker busy to the last batch
        for at in range(0, len(batch), size):
            part = batch[at:at + size]
            try:
                fut = pool.submit(_worker_check, str(rs.path), rs.hash, worker_opts, part, keep_items)
            except (OSError, ValueError) as exc:  # Python 3.11: a pool that has just broken can fail on its closed
                # wake-up pipe (OSError), or spawning a replacement worker with a closed fd (ValueError: fds_to_keep)
                raise BrokenProcessPool(str(exc)) from None
            yield len(part), fut

    pending: deque = deque()
    broken = False
    try:
        for batch in batches:
            for part in parts(batch):
                pending.append(part)
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


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """A hash of this Mashbill's code that a record's checks run through (the mashbill package's own modules, specs,
    factory and validators): checks kept by another version of it are not read back."""
    import mashbill
    from mashbill import factory, specs, validators

    h = hashlib.sha256()
    top = Path(mashbill.__file__).parent
    files = sorted(top.glob("*.py"))
    for pkg in (specs, factory, validators):
        files += sorted(Path(pkg.__file__).parent.rglob("*.py"))
    for f in files:
        h.update(f"{f.parent.name}/{f.name}\0".encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def checks_profile(rs, opts: Options, spans: SpanPass | None) -> str:
    """What a record's own checks depend on besides the record: the spec (its hash covers the files it names),
    Mashbill's code, the rule sets in force, the personal-data switch, and for token spans the trainer profile with
    the tokenizer's and template's bytes (loaded here). Kept checks are read back only under the same profile."""
    from mashbill.hashing import canonical_json, sha256_text

    def digest(rules) -> str | None:
        return None if rules is None else sha256_text(rules.model_dump_json())

    parts = {"spec": rs.hash, "code": code_digest(), "rules": digest(opts.rules if rs.spec.rules else None),
             "checks": digest(opts.ruleset()), "pii": opts.pii, "spans": None}
    if spans is not None:
        parts["spans"] = {**opts.profile.describe(), "tokens": spans.load_tokens_profile()}
    return sha256_text(canonical_json(parts))[:32]


def _with_kept(batches, kept: Counter):
    """The batches (rows as read, each with the own checks its records have kept, as
    ``Store.record_batches_with_checks`` gives them) with each run of records whose own checks were kept as a
    ``_Kept`` in its place, in the same order; `kept` counts them."""
    for batch, found in batches:
        if not found:
            yield batch
            continue
        run: list = []
        texts: list[str] = []
        for row in batch:
            text = found.get(row[0])
            if text is None:
                if texts:
                    yield _Kept(texts)
                    texts = []
                run.append(row)
            else:
                if run:
                    yield run
                    run = []
                texts.append(text)
        if run:
            yield run
        if texts:
            yield _Kept(texts)
        kept["kept"] += len(found)


@fewer_collections()
def validate_spec_records(rs, store, opts: Options, *, include_all: bool = False, write: bool = True,
                          run_id: str | None = None, batch_size: int = BATCH, jobs: int = 1, per_record: bool = False,
                          recheck: bool = False) -> Report:
    """Validate a spec's stored records and (by default) write the verdicts to the store.

    The records are read a batch at a time: the rules, token spans and PII run per batch (in `jobs` worker
    processes when jobs > 1); what the global checks need (each record's key and query, its line of the
    expectations frame, its audit stratum) is kept, the rest is dropped. Duplicates, leakage, the span audit and
    the expectations then run over the whole set, so the verdicts are those of one pass over every record, whatever
    the batch size or the number of processes.

    With `per_record`, only each record's own checks run, and (with `write`) the store keeps them
    (``keep_record_checks``) instead of any verdict: no record counts as validated. A validation of a store holding
    such kept checks (a shard store's, merged) reads them for the records they cover under the same
    ``checks_profile`` instead of checking those records again, unless `recheck`."""
    from mashbill.validators.checker import RecordChecker

    status = None if include_all else "accepted"
    profiles = {} if per_record or recheck else store.record_checks_held(rs.hash)  # kept checks per profile
    # rows as read when worker processes check them or kept checks may stand in for some (decoded where checked)
    raw = jobs > 1 or bool(profiles)
    held = store.spec_status_counts(rs.spec.name, rs.spec.version)
    if not any(h == rs.hash and (include_all or s == status) for h, s, _ in held):
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
    profile = checks_profile(rs, opts, spans) if per_record or profiles else None
    kept = Counter()
    if profiles and profile in profiles:
        batches = _with_kept(store.record_batches_with_checks(rs.hash, profile, status, batch_size), kept)
    else:
        batches = store.record_batches(spec_hash=rs.hash, status=status, batch_size=batch_size, decoded=not raw)
    if profiles:
        if profile in profiles:
            other = sum(n for p, n in profiles.items() if p != profile)
            if other:
                report.warnings.append(f"the own checks of {other:,} record(s) kept in this store under another "
                                       "checks profile (another Mashbill, rule set, tokenizer or options) were not "
                                       "read; those records were checked here")
        else:
            report.warnings.append(f"the own checks of {sum(profiles.values()):,} record(s) kept in this store (by "
                                   "`validate --per-record`) were made under another checks profile (another "
                                   "Mashbill, rule set, tokenizer or options); every record was checked here")
    rule_counts: Counter = Counter()
    statuses: Counter = Counter()
    taxonomy_sources: Counter = Counter()
    skipped: Counter = Counter()
    # what the global checks need, train rows and eval rows apart (the checks see train rows first)
    keys: dict[bool, list[str]] = {False: [], True: []}
    queries: dict[bool, list[str | None]] = {False: [], True: []}
    frame: dict[bool, list[dict | None]] = {False: [], True: []}
    pii: dict[str, list[Verdict]] = {}
    done = 0
    for n, got in collected_between(_checked_batches(rs, opts, checks, batches, jobs, raw=raw,
                                                     keep_items=per_record)):
        if per_record and write and not store.read_only:
            store.keep_record_checks(rs.hash, profile, [(it["id"], json.dumps(it, ensure_ascii=False))
                                                        for it in got.items])
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
        _progress(opts, f"rules, token spans and personal data: {done:,} records"
                        + (f" ({kept['kept']:,} of them from kept checks)" if kept else ""))
    # the store gives its batches in the order it keeps them: what the global checks read is put in id order here,
    # so that a validation's verdicts and report do not depend on how the store was written
    for part in (False, True):
        order = sorted(range(len(keys[part])), key=keys[part].__getitem__)
        keys[part] = [keys[part][i] for i in order]
        queries[part] = [queries[part][i] for i in order]
        frame[part] = [frame[part][i] for i in order if frame[part][i] is not None]
        if spans is not None:
            spans.reorder(order, eval_rows=part)
    if checker.ruleset is not None:
        checker.taxonomy_sources, checker.skipped = taxonomy_sources, skipped
        report.sections["rules"] = {**checker.summary(), "counts": dict(sorted(rule_counts.items()))}
    report.sections["records_by_status"] = dict(sorted(statuses.items()))
    if keys[True]:
        report.sections["eval_split"] = len(keys[True])
    report.keys = keys[False] + keys[True]
    if kept:
        report.sections["per_record"] = {"from_kept": kept["kept"], "checked_here": done - kept["kept"],
                                         "checks_profile": profile}
    if per_record:
        pii_section(len(pii), opts, report)
        for key in report.keys:
            if key in pii:
                report.add(key, pii[key])
        report.sections["per_record"] = {"kept": done if write and not store.read_only else 0, "checked_here": done,
                                         "checks_profile": profile}
        return report
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
