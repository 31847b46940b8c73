"""The generate stage: seed inputs -> teacher -> parsed, checked records -> store.

Every requested input ends as exactly one stored record: accepted, rejected (with verdicts
carrying reason codes) or failed (the teacher never answered; retried by the next run).
Nothing is dropped and nothing is stored twice: record ids are content hashes and the set
of finished ids is read from the store at the start of every run.

Requests stream into the teacher lazily and results stream out in any order; every
`batch_size` results are committed in one transaction. A pipelined teacher (the OpenAI
backend) keeps `concurrency` requests in flight across batch boundaries; a crash loses at
most the uncommitted results, which the next run simply asks for again. Guards
(`mashbill.factory.generate.guards`) watch the results and may stop the run after a committed batch.

What a run works on is a `Work` (`mashbill.factory.generate.work`): by default one record per seed input, or
`samples` records per input (one teacher seed each, one shared prompt); query synthesis
(`factory.generate.synth`) and the judge (`factory.generate.judge`) are other Works through this same loop.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from typing import Callable, Iterable, Sequence

import jsonschema

from mashbill import jsontext
from mashbill.errors import MashbillError
from mashbill.factory.generate.accounting import Accounting
from mashbill.factory.generate.chains import Chains
from mashbill.factory.generate.guards import GuardSet, probe_verdict
from mashbill.factory.generate.repair import check_repair
from mashbill.factory.generate.work import Job, SpecWork, Work, select_jobs
from mashbill.factory.records import Record, SpecRef, Verdict, parse_verdict, record_id, schema_verdicts
from mashbill.factory.store import Store
from mashbill.factory.teachers.base import Teacher, TeacherRequest, TeacherResult
from mashbill.specs import ResolvedSpec

log = logging.getLogger(__name__)

# A check sees the record as it will be stored and returns extra verdicts (validators plug in here).
Check = Callable[[Record], Sequence[Verdict]]


@dataclass
class RunSummary:
    run_id: str
    spec: str
    spec_hash: str
    store: str
    selected: int = 0
    skipped: int = 0
    requested: int = 0
    codes: Counter = field(default_factory=Counter)  # reject code -> this run's records that carry it
    verdicts: Counter = field(default_factory=Counter)  # reject code -> verdicts (a record can carry two)
    wall_s: float = 0.0
    status: str = "running"
    stop_reason: str | None = None  # why a guard stopped the run (status aborted / aborted_preflight)
    notes: list[str] = field(default_factory=list)
    not_needed: int = 0  # jobs the work no longer wanted when their turn came (a filled quota cell)
    findings: dict = field(default_factory=dict)  # verdicts a work put on other records (the judge's threshold)
    accounting: Accounting | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.accounting is None:
            self.accounting = Accounting(requested=self.requested)

    # the records' counts, tokens and teacher seconds are the run accounting's (probes are counted apart there)
    accepted = property(lambda self: self.accounting.accepted)
    rejected = property(lambda self: self.accounting.rejected)
    failed = property(lambda self: self.accounting.failed)
    tokens_in = property(lambda self: self.accounting.tokens_in)
    tokens_cached = property(lambda self: self.accounting.tokens_cached)
    tokens_out = property(lambda self: self.accounting.tokens_out)
    teacher_s = property(lambda self: self.accounting.teacher_s)

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("run_id", "spec", "spec_hash", "store", "status", "selected", "skipped",
                                              "requested", "accepted", "rejected", "failed", "tokens_in",
                                              "tokens_cached", "tokens_out", "not_needed")}
        d["teacher_s"] = round(self.teacher_s, 3)
        d["wall_s"] = round(self.wall_s, 3)
        d["reject_codes"] = dict(sorted(self.codes.items()))  # records per code
        d["reject_verdicts"] = dict(sorted(self.verdicts.items()))  # verdicts per code
        if self.stop_reason:
            d["stop_reason"] = self.stop_reason
        if self.notes:
            d["notes"] = list(self.notes)
        if self.findings:
            d["findings"] = dict(self.findings)
        if self.accounting is not None:
            snap = self.accounting.snapshot(self.wall_s or None)
            for k in ("calls", "retries", "errors", "probe_calls", "latency_s", "accept_rate", "records_per_s",
                      "cost", "teacher_s_per_accepted", "tokens_per_accepted"):
                d[k] = snap[k]
            for k in ("repair", "sample_turns"):  # chains (factory.generate.chains), when the run had any
                if k in snap:
                    d[k] = snap[k]
        return d


def select_inputs(rs: ResolvedSpec, *, limit: int | None = None, shard: tuple[int, int] | None = None
                  ) -> list[tuple[str, dict]]:
    """(record id, input) in seed order, duplicates (same id) removed, then sharded, then limited."""
    return select_jobs([(record_id(rs.hash, i), i) for i in rs.seeds], limit=limit, shard=shard)


def parse_output(text: str | None, finish_reason: str | None, validator) -> tuple[object, list[Verdict]]:
    """Parse and schema-check teacher text. Failures are verdicts with codes, never exceptions or None-drops."""
    if text is None:
        return None, []
    if finish_reason == "length":
        verdicts = [Verdict("TRUNC001", "reject", "output hit max_tokens before it finished")]
    else:
        verdicts = []
    stripped = text.strip()
    if not stripped:
        return None, verdicts + [Verdict("PARSE002", "reject", "empty output")]
    try:
        value = jsontext.loads(stripped)
    except json.JSONDecodeError as exc:
        return None, verdicts + [parse_verdict(exc)]
    return value, verdicts + schema_verdicts(validator, value, 3)


def generate(rs: ResolvedSpec, store: Store, teacher: Teacher, *, limit: int | None = None,
             shard: tuple[int, int] | None = None, checks: Sequence[Check] = (), batch_size: int | None = None,
             on_progress: Callable[[RunSummary, int], None] | None = None, args: dict | None = None,
             stop_after: Callable[[RunSummary], str | None] | None = None, samples: int = 1,
             work: Work | None = None) -> RunSummary:
    """Run the pending jobs of `work` (default: the spec's seed inputs, `samples` each) and store every outcome."""
    t0 = time.perf_counter()
    spec = rs.spec
    if work is None:
        work = _default_work(rs, store, samples)
    if work.repair is not None:
        check_repair(work.rs)  # a bad repair section stops here, before a run row exists
    work.use_store(store)
    jobs = work.jobs(limit=limit, shard=shard)
    done = store.finished_ids(work.ref.hash)
    todo = [job for job in jobs if job.rid not in done]
    info = teacher.info()
    sampling = work.sampling
    run_id = store.begin_run(spec_name=work.ref.name, spec_version=work.ref.version, spec_hash=work.ref.hash,
                             kind=work.kind, backend=teacher.backend, model=teacher.model,
                             model_sha256=info.get("sha256"), model_info=info, sampling=sampling,
                             shard=f"{shard[0]}/{shard[1]}" if shard else None,
                             args={**(args or {}), "spec_path": str(rs.path)})  # lets a report find the spec
    summary = RunSummary(run_id, f"{work.ref.name}@{work.ref.version}", work.ref.hash, str(store.root),
                         selected=len(jobs), skipped=len(jobs) - len(todo), requested=len(todo))
    if store.reaped:
        summary.notes.append(f"{len(store.reaped)} earlier run(s) of this store were killed and are now marked "
                             "interrupted; their token and cost figures count committed batches only (the teacher "
                             "calls of the batch in progress were lost)")
    acct = summary.accounting = Accounting(requested=len(todo), prices=dict(work.prices))
    ctx = _Context(rs, store, teacher, run_id, summary, acct, checks,
                   jsonschema.validators.validator_for(work.output_schema)(work.output_schema),
                   work.ref, work.output_schema if work.constrained else None, sampling, work)
    if work.repair is not None or work.pick is not None:
        ctx.chains = Chains(work, store=store, run_id=run_id, teacher=teacher, schema=ctx.schema, acct=acct,
                            to_record=lambda result, job, prompt: _to_record(result, work, ctx.ref, job, prompt,
                                                                             ctx.validator, checks))
    status = "completed"
    try:
        if on_progress:
            on_progress(summary, 0)  # the run row exists from here on (the CLI arms its SIGTERM handler here)
        if work.uses_probes and spec.guards.preflight.probes and todo:
            ok, rate = _probe_round(ctx, "preflight", spec.guards.preflight.min_pass_rate)
            if not ok:
                status = "aborted_preflight"
                summary.stop_reason = (f"preflight: {rate:.0%} of {len(spec.guards.preflight.probes)} gold probes "
                                       f"passed, below guards.preflight.min_pass_rate "
                                       f"{spec.guards.preflight.min_pass_rate:.0%}; no bulk work was started")
        if status == "completed":
            reason = _bulk(ctx, todo, batch_size or spec.runtime.batch_size, on_progress, stop_after)
            if reason:
                summary.stop_reason = reason
                store.add_event(run_id, "stopped", {"reason": reason})
                status = "aborted"
    except BaseException as exc:
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        try:
            _finish(ctx, status, t0)
        except Exception as again:  # the store itself may be what failed (disk full): keep the first error
            log.warning("could not mark run %s %s: %s", run_id, status, again)
        raise
    _finish(ctx, status, t0)
    return summary


def _finish(ctx: "_Context", status: str, t0: float) -> None:
    """Store the run's figures and status; a completed run's Parquet export is in place before it says so."""
    summary, store, ref = ctx.summary, ctx.store, ctx.work.ref
    summary.status = status
    summary.wall_s = time.perf_counter() - t0
    snap = ctx.acct.snapshot(summary.wall_s)
    stats = {**summary.as_dict(), "wall_s": summary.wall_s, "teacher_s": summary.teacher_s, "cost": snap["cost"],
             "calls": snap["calls"], "retries": snap["retries"], "stats": snap}
    if status == "completed":
        try:
            store.export_parquet(ref.name, ref.version, ref.hash)
        except BaseException:
            summary.status = stats["status"] = "failed"
            store.finish_run(ctx.run_id, "failed", stats)
            raise
    store.finish_run(ctx.run_id, status, stats)


def _default_work(rs: ResolvedSpec, store: Store, samples: int) -> Work:
    """The spec's own work: query synthesis for a `queries` spec, seed inputs (from files or specs) otherwise."""
    if rs.spec.kind == "queries":  # the screen lives in validators, a layer above: the caller brings it
        raise MashbillError(f"{rs.ref} is a queries spec: pass work=mashbill.validators.queries.queries.synth_work(rs, "
                            "store), as `mashbill generate` does")
    from mashbill.factory.generate.seeds import spec_inputs

    if rs.spec.kind == "preference" and samples == 1:  # a preference spec's records are its teacher samples
        samples = rs.spec.curation.preference.samples_per_query
    return SpecWork(rs, spec_inputs(rs, store), samples=samples)


@dataclass
class _Context:
    rs: ResolvedSpec
    store: Store
    teacher: Teacher
    run_id: str
    summary: RunSummary
    acct: Accounting
    checks: Sequence[Check]
    validator: object
    ref: SpecRef
    schema: dict | None
    sampling: dict
    work: Work
    chains: Chains | None = None


def _bulk(ctx: _Context, todo: list[Job], batch_size: int, on_progress, stop_after) -> str | None:
    """Stream the pending inputs through the teacher; commit every batch; return why a guard stopped, if one did."""
    rs, store, summary, acct = ctx.rs, ctx.store, ctx.summary, ctx.acct
    guards = GuardSet(rs.spec.guards)
    every_s = rs.spec.runtime.progress_every_s
    last_progress = time.monotonic()
    pending: dict[str, tuple[Job, object, object]] = {}
    work = ctx.work
    engine = ctx.chains
    stored = engine.resume([job.rid for job in todo]) if engine is not None else {}

    def requests() -> Iterable[TeacherRequest]:
        for job in todo:  # rendered lazily: a pipelined teacher pulls only what it can send
            if not work.wanted(job):
                summary.not_needed += 1  # e.g. its quota cell filled meanwhile; a later run may still ask
                continue
            prompt = work.prompt(job)
            rows = stored.get(job.rid)
            if rows:  # a killed run's chain (factory.generate.chains): ask what comes after its last stored attempt
                request = engine.first_request(rows, job, prompt)
                if request is None:
                    rec, vs = engine.finish_stored(rows, job, prompt, ctx.ref)
                    _count(summary, vs)
                    continue
                pending[job.rid] = (job, prompt, rows)
                yield request
                continue
            pending[job.rid] = (job, prompt, None)
            yield TeacherRequest(job.rid, prompt.teacher_messages, ctx.schema, work.job_sampling(job))

    results = iter(ctx.teacher.generate(requests()))
    try:
        while True:
            records, verdicts, calls, events, attempts, n = [], {}, [], [], [], 0
            unwritten = []  # counted once their batch is stored: a run's figures are what it committed

            def count(result, rec, vs):
                _count(summary, vs)
                acct.observe(result, rec.status)
                answered = result.attempts[-1].latency_s if result.attempts and result.text is not None else None
                events.extend(guards.observe(rec.status, answered))

            for result in islice(results, batch_size):  # each handled as it comes: a repair follows its answer
                n += 1
                job, prompt, rows = pending.pop(result.request.record_id)
                rec, vs = _to_record(result, work, ctx.ref, job, prompt, ctx.validator, ctx.checks)
                result_calls, written = result.attempts, False
                if engine is not None:
                    settled = engine.settle(result, rec, vs, job, prompt, rows)
                    rec, vs, result_calls, written = settled.record, settled.verdicts, settled.calls, settled.stored
                    attempts.extend(settled.attempts)
                    events.extend(settled.events)
                    result = settled.result
                if written:  # a chain's record, stored with its last attempts already
                    count(result, rec, vs)
                    continue
                records.append(rec)
                verdicts[rec.id] = vs
                calls.extend(result_calls)
                unwritten.append((result, rec, vs))
            if not n:
                return None
            store.write_batch(ctx.run_id, records, verdicts, calls, attempts)
            for result, rec, vs in unwritten:
                count(result, rec, vs)
            for event in events:
                store.add_event(ctx.run_id, event.kind, event.detail)
            if on_progress:
                on_progress(summary, n)
            if time.monotonic() - last_progress >= every_s:
                last_progress = time.monotonic()
                store.add_event(ctx.run_id, "progress", acct.snapshot())
            stop = next((e.stop for e in events if e.stop), None)
            if stop:
                return stop
            if stop_after is not None:
                reason = stop_after(summary)
                if reason:
                    return reason
            pause = max((e.pause_s for e in events), default=0.0)
            if guards.breaker.state == "open":
                log.warning("circuit breaker open: waiting %.3gs before sending more work", pause)
                time.sleep(pause)
                half = guards.breaker.half_open()
                store.add_event(ctx.run_id, half.kind, half.detail)
            if work.uses_probes and guards.recheck_due(summary.accepted):
                ok, rate = _probe_round(ctx, "probe_recheck", rs.spec.guards.probe_recheck.min_pass_rate)
                if not ok:
                    return (f"probe re-check at {summary.accepted} accepted records: {rate:.0%} of the gold probes "
                            f"passed, below guards.probe_recheck.min_pass_rate "
                            f"{rs.spec.guards.probe_recheck.min_pass_rate:.0%}")
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()  # cancels whatever a pipelined teacher still has in flight


def _probe_round(ctx: _Context, kind: str, min_pass_rate: float) -> tuple[bool, float]:
    """Run the spec's gold probes at temperature 0; store one event with every probe's outcome."""
    rs = ctx.rs
    probes = rs.spec.guards.preflight.probes
    sampling = {**ctx.sampling, "temperature": 0.0}
    requests, by_id = [], {}
    for i, probe in enumerate(probes):
        inputs = {"query": probe.query, **probe.input}
        rid = "probe-" + record_id(rs.hash, {"probe": i, **inputs})[:24]
        prompt = ctx.work.render(inputs, rid, rid)
        by_id[rid] = (i, probe, inputs, prompt)
        requests.append(TeacherRequest(rid, prompt.teacher_messages, ctx.schema, sampling))
    outcomes = [None] * len(probes)
    for result in ctx.teacher.generate(requests):
        i, probe, inputs, prompt = by_id[result.request.record_id]
        rec, vs = _to_record(result, ctx.work, ctx.ref, Job(rid=result.request.record_id, inputs=inputs), prompt,
                             ctx.validator, ctx.checks)
        ctx.acct.observe(result, None)
        passed, why = probe_verdict(probe, rec.status, rec.output, [v.code for v in vs if v.severity == "reject"])
        outcomes[i] = {"query": probe.query, "pass": passed, "why": why,
                       "raw": (result.text or "")[:300] if result.text is not None else None,
                       "error": result.error}
    rate = sum(o["pass"] for o in outcomes) / len(outcomes)
    ok = rate >= min_pass_rate
    if kind == "preflight":
        event = "preflight_passed" if ok else "preflight_failed"
    else:
        event = kind if ok else f"{kind}_failed"
    detail = {"pass_rate": round(rate, 4), "min_pass_rate": min_pass_rate, "probes": outcomes}
    if kind == "probe_recheck":
        detail["at_accepted"] = ctx.summary.accepted
    ctx.store.add_event(ctx.run_id, event, detail)
    log.info("%s: %d/%d probes passed", kind, sum(o["pass"] for o in outcomes), len(outcomes))
    return ok, rate


def _to_record(result: TeacherResult, work: Work, ref: SpecRef, job: Job, prompt, validator,
               checks: Sequence[Check]) -> tuple[Record, list[Verdict]]:
    inputs = job.inputs
    meta = {**prompt.meta(), "lang": inputs.get("lang"), **job.meta, "finish_reason": result.finish_reason}
    if result.text is None:
        verdicts = [Verdict("TEACHER001", "reject", f"teacher failed after {len(result.attempts)} attempt(s): "
                                                    f"{(result.error or '')[:300]}")]
        rec = Record(result.request.record_id, work.kind, inputs, None, None, ref, "failed",
                     prompt.training_messages, meta)
        return rec, verdicts
    output, verdicts = parse_output(result.text, result.finish_reason, validator)
    status = "rejected" if any(v.severity == "reject" for v in verdicts) else "accepted"
    # the text as kept and shown again (a repair turn): a lone surrogate has no UTF-8 form (parse_output names it)
    rec = Record(result.request.record_id, work.kind, inputs, output, jsontext.storable(result.text), ref, status,
                 prompt.training_messages, meta)
    if status == "accepted" and checks:
        for check in checks:
            verdicts.extend(check(rec))
        if any(v.severity == "reject" for v in verdicts):
            rec = Record(rec.id, rec.kind, rec.input, rec.output, rec.raw, ref, "rejected", rec.messages, rec.meta)
    return work.finish(rec, verdicts)


def _count(summary: RunSummary, verdicts: Sequence[Verdict]) -> None:
    """One record's reject verdicts: each code counts the record once (`codes`) and every verdict (`verdicts`)."""
    found = [v.code for v in verdicts if v.severity == "reject"]
    summary.codes.update(set(found))
    summary.verdicts.update(found)
