"""The generate stage: seed inputs -> teacher -> parsed, checked records -> store.

Every requested input ends as exactly one stored record: accepted, rejected (with verdicts
carrying reason codes) or failed (the teacher never answered; retried by the next run).
Nothing is dropped and nothing is stored twice: record ids are content hashes and the set
of finished ids is read from the store at the start of every run.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import jsonschema

from mashbill.factory.records import Record, SpecRef, TeacherCall, Verdict, record_id
from mashbill.factory.store import Store
from mashbill.factory.teachers.base import Teacher, TeacherRequest, TeacherResult
from mashbill.specs import ResolvedSpec, render_prompt

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
    accepted: int = 0
    rejected: int = 0
    failed: int = 0
    codes: Counter = field(default_factory=Counter)
    tokens_in: int = 0
    tokens_cached: int = 0
    tokens_out: int = 0
    teacher_s: float = 0.0
    wall_s: float = 0.0
    status: str = "running"

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("run_id", "spec", "spec_hash", "store", "status", "selected", "skipped",
                                              "requested", "accepted", "rejected", "failed", "tokens_in",
                                              "tokens_cached", "tokens_out")}
        d["teacher_s"] = round(self.teacher_s, 3)
        d["wall_s"] = round(self.wall_s, 3)
        d["reject_codes"] = dict(sorted(self.codes.items()))
        return d


def select_inputs(rs: ResolvedSpec, *, limit: int | None = None, shard: tuple[int, int] | None = None
                  ) -> list[tuple[str, dict]]:
    """(record id, input) in seed order, duplicates (same id) removed, then sharded, then limited."""
    seen: set[str] = set()
    out = []
    for inputs in rs.seeds:
        rid = record_id(rs.hash, inputs)
        if rid in seen:
            continue
        seen.add(rid)
        if shard is not None and int(rid[:16], 16) % shard[1] != shard[0]:
            continue
        out.append((rid, inputs))
    return out[:limit] if limit is not None else out


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
        value = json.loads(stripped)
    except json.JSONDecodeError as exc:
        return None, verdicts + [Verdict("PARSE001", "reject", f"not JSON: {exc.msg} at char {exc.pos}")]
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    for err in errors[:3]:
        where = "/".join(map(str, err.absolute_path)) or "(root)"
        verdicts.append(Verdict("SCHEMA001", "reject", f"{where}: {err.message[:200]}"))
    return value, verdicts


def _batches(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def generate(rs: ResolvedSpec, store: Store, teacher: Teacher, *, limit: int | None = None,
             shard: tuple[int, int] | None = None, checks: Sequence[Check] = (), batch_size: int | None = None,
             on_progress: Callable[[RunSummary, int], None] | None = None, args: dict | None = None,
             stop_after: Callable[[RunSummary], str | None] | None = None) -> RunSummary:
    """Run the spec's pending inputs through the teacher and store every outcome."""
    t0 = time.perf_counter()
    spec = rs.spec
    selected = select_inputs(rs, limit=limit, shard=shard)
    done = store.finished_ids(rs.hash)
    todo = [(rid, inp) for rid, inp in selected if rid not in done]
    info = teacher.info()
    run_id = store.begin_run(spec_name=spec.name, spec_version=spec.version, spec_hash=rs.hash, kind=spec.kind,
                             backend=teacher.backend, model=teacher.model, model_sha256=info.get("sha256"),
                             model_info=info, sampling=spec.teacher.sampling.model_dump(),
                             shard=f"{shard[0]}/{shard[1]}" if shard else None, args=args)
    summary = RunSummary(run_id, spec.ref, rs.hash, str(store.root), selected=len(selected),
                         skipped=len(selected) - len(todo), requested=len(todo))
    validator = jsonschema.validators.validator_for(rs.output_schema)(rs.output_schema)
    ref = SpecRef(spec.name, spec.version, rs.hash)
    sampling = spec.teacher.sampling.model_dump()
    schema = rs.output_schema if spec.teacher.constrained else None
    if on_progress:
        on_progress(summary, 0)
    status = "completed"
    try:
        for batch in _batches(todo, batch_size or spec.runtime.batch_size):
            prompts = {rid: render_prompt(rs, inp, rid) for rid, inp in batch}
            inputs = dict(batch)
            requests = [TeacherRequest(rid, prompts[rid].teacher_messages, schema, sampling) for rid, _ in batch]
            records, verdicts, calls = [], {}, []
            for result in teacher.generate(requests):
                rec, vs = _to_record(result, rs, ref, inputs[result.request.record_id],
                                     prompts[result.request.record_id], validator, checks)
                records.append(rec)
                verdicts[rec.id] = vs
                calls.extend(_calls(result, teacher))
                _count(summary, rec, vs, result)
            store.write_batch(run_id, records, verdicts, calls)
            if on_progress:
                on_progress(summary, len(records))
            if stop_after is not None:
                reason = stop_after(summary)
                if reason:
                    store.add_event(run_id, "stopped", {"reason": reason})
                    status = "aborted"
                    break
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException:
        status = "failed"
        raise
    finally:
        summary.status = status
        summary.wall_s = time.perf_counter() - t0
        store.finish_run(run_id, status, {**summary.as_dict(), "wall_s": summary.wall_s,
                                          "teacher_s": summary.teacher_s})
        if status == "completed":
            store.export_parquet(spec.name, spec.version, rs.hash)
    return summary


def _to_record(result: TeacherResult, rs: ResolvedSpec, ref: SpecRef, inputs: dict, prompt, validator,
               checks: Sequence[Check]) -> tuple[Record, list[Verdict]]:
    meta = {**prompt.meta(), "lang": inputs.get("lang"), "finish_reason": result.finish_reason}
    if result.text is None:
        verdicts = [Verdict("TEACHER001", "reject", f"teacher failed after {len(result.attempts)} attempt(s): "
                                                    f"{(result.error or '')[:300]}")]
        rec = Record(result.request.record_id, rs.spec.kind, inputs, None, None, ref, "failed",
                     prompt.training_messages, meta)
        return rec, verdicts
    output, verdicts = parse_output(result.text, result.finish_reason, validator)
    status = "rejected" if any(v.severity == "reject" for v in verdicts) else "accepted"
    rec = Record(result.request.record_id, rs.spec.kind, inputs, output, result.text, ref, status,
                 prompt.training_messages, meta)
    if status == "accepted" and checks:
        for check in checks:
            verdicts.extend(check(rec))
        if any(v.severity == "reject" for v in verdicts):
            rec = Record(rec.id, rec.kind, rec.input, rec.output, rec.raw, ref, "rejected", rec.messages, rec.meta)
    return rec, verdicts


def _calls(result: TeacherResult, teacher: Teacher) -> list[TeacherCall]:
    return [TeacherCall(result.request.record_id, result.request.payload_hash, i + 1, teacher.backend, teacher.model,
                        a.latency_s, a.prompt_tokens, a.cached_tokens, a.completion_tokens, a.finish_reason, a.error)
            for i, a in enumerate(result.attempts)]


def _count(summary: RunSummary, rec: Record, verdicts: Sequence[Verdict], result: TeacherResult) -> None:
    if rec.status == "accepted":
        summary.accepted += 1
    elif rec.status == "rejected":
        summary.rejected += 1
    else:
        summary.failed += 1
    for v in verdicts:
        if v.severity == "reject":
            summary.codes[v.code] += 1
    summary.tokens_in += result.prompt_tokens
    summary.tokens_cached += sum(a.cached_tokens or 0 for a in result.attempts)
    summary.tokens_out += result.completion_tokens
    summary.teacher_s += result.latency_s
