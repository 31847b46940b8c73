"""Repair with the verdict: a record rejected with a code its spec's `repair` section names is asked again.

The conversation goes on (the prompt, the teacher's answer, then a user turn stating each reject verdict in plain
words, code and detail, in the request's language: ``factory.repair_text``) and the teacher answers under the same
schema constraint, up to `max_attempts` repairs. It runs inside the one generate loop (``factory.generate``), right
after the answer it repairs, so an embedded teacher still holds the shared prefix in its KV cache.

Every attempt is a ``record_attempts`` row (attempt number, the attempt it repairs, its verdicts, feedback, tokens,
seconds); the record row holds the last attempt, the one that counts, and nothing is overwritten. An attempt is
committed before its repair is asked, and a chain's last attempt together with its record, so a run killed in the
middle of a chain resumes it from the last stored attempt: no attempt is lost and none is asked twice (only the one
in flight at the kill is asked again).

A guard watches each code's fix rate over its last `guard.window` repairs; below `guard.min_fix_rate` it stops the
run (exit 3) or, with `action: skip`, stops asking repairs for that code.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Callable

from mashbill.errors import SpecError
from mashbill.factory.codes import not_repairable
from mashbill.factory.guards import GuardEvent
from mashbill.factory.records import Record, Verdict
from mashbill.factory.repair_text import feedback
from mashbill.factory.teachers.base import TeacherRequest, TeacherResult


def check_repair(rs) -> None:
    """A repair section naming an unknown or non-repairable code: SpecError with the spec's file, line and field."""
    repair = rs.spec.repair
    if repair is None:
        return
    for i, code in enumerate(repair.codes):
        why = not_repairable(code)
        if why:
            from mashbill.specs.yamlio import line_for, load_yaml

            _, lines = load_yaml(rs.path)
            raise SpecError(str(rs.path), why, line=line_for(lines, ("repair", "codes", i)), field=f"repair.codes.{i}")


def reject_codes(verdicts) -> list[str]:
    return [v.code for v in verdicts if v.severity == "reject"]


def verdict_dicts(verdicts) -> list[dict]:
    return [{"code": v.code, "severity": v.severity, "detail": v.detail, "stage": v.stage} for v in verdicts]


@dataclass
class Chain:
    """Where a record's conversation stands: the teacher messages sent for the attempt now being answered."""

    messages: list[dict]
    attempt: int = 1  # the attempt the next answer is
    feedback: str | None = None  # the user turn that asked for it
    prev_codes: tuple[str, ...] = ()  # reject codes of the attempt it repairs


class RepairGuard:
    """Per code, the fixes of its last `window` repairs; trips once per code below `min_fix_rate`."""

    def __init__(self, cfg, codes):
        self.cfg = cfg
        self.active = set(codes)
        self.recent: dict[str, deque] = {}
        self.stopped: str | None = None

    def observe(self, code: str, fixed: bool) -> GuardEvent | None:
        window = self.recent.setdefault(code, deque(maxlen=self.cfg.window))
        window.append(fixed)
        if code not in self.active or len(window) < self.cfg.window:
            return None
        rate = sum(window) / len(window)
        if rate >= self.cfg.min_fix_rate:
            return None
        self.active.discard(code)
        detail = {"code": code, "fix_rate": round(rate, 4), "window": self.cfg.window,
                  "min_fix_rate": self.cfg.min_fix_rate, "action": self.cfg.action}
        if self.cfg.action == "skip":
            return GuardEvent("repair_guard", detail)
        self.stopped = (f"repair guard: the teacher fixed {code} in {rate:.0%} of its last {self.cfg.window} repairs, "
                        f"below repair.guard.min_fix_rate {self.cfg.min_fix_rate:.0%}; it is not asked again")
        return GuardEvent("repair_guard", detail, stop=self.stopped)


@dataclass
class Settled:
    record: Record
    verdicts: list[Verdict]
    calls: list = field(default_factory=list)
    attempts: list[dict] = field(default_factory=list)  # rows still to write with the record
    stored: bool = False  # written already (a chain's last attempt goes in with its record at once)
    events: list[GuardEvent] = field(default_factory=list)
    result: TeacherResult | None = None  # the last turn's teacher result (the record's own accounting)


class Repairer:
    """The repair chains of one generate run."""

    def __init__(self, cfg, *, store, run_id: str, teacher, schema, acct, to_record: Callable):
        self.cfg = cfg
        self.store = store
        self.run_id = run_id
        self.teacher = teacher
        self.schema = schema
        self.acct = acct
        self.to_record = to_record  # (result, job, prompt) -> (Record, verdicts)
        self.guard = RepairGuard(cfg.guard, cfg.codes)

    def resume(self, rids) -> dict[str, list[dict]]:
        """Stored attempts of chains a killed run left open (records not yet stored), by record id."""
        return self.store.attempt_chains(rids)

    @staticmethod
    def chain_from(prompt, rows: list[dict], lang: str | None, max_attempts: int) -> Chain:
        """The conversation of a stored chain, with the repair of its last attempt asked next."""
        msgs = list(prompt.teacher_messages)
        for row in rows:
            if row["feedback"]:
                msgs.append({"role": "user", "content": row["feedback"]})
            msgs.append({"role": "assistant", "content": row["raw"]})
        last = rows[-1]
        vs = [Verdict(v["code"], v["severity"], v.get("detail") or "", v.get("stage") or "generate")
              for v in last["verdicts"]]
        text = feedback(vs, lang, last["attempt"], max_attempts)
        msgs.append({"role": "user", "content": text})
        return Chain(msgs, last["attempt"] + 1, text, tuple(reject_codes(vs)))

    def wants(self, rec: Record, verdicts, attempt: int) -> bool:
        codes = set(reject_codes(verdicts))
        return (rec.status == "rejected" and self.guard.stopped is None and attempt <= self.cfg.max_attempts
                and bool(codes & self.guard.active))

    def settle(self, result: TeacherResult, rec: Record, verdicts: list[Verdict], job, prompt,
               chain: Chain | None) -> Settled:
        """Run the record's chain from this answer to its last attempt; store what is asked along the way."""
        chain = chain or Chain(list(prompt.teacher_messages))
        lang = (job.inputs or {}).get("lang")
        events: list[GuardEvent] = []
        while True:
            calls = [replace(c, turn=chain.attempt) for c in result.attempts]
            if rec.status == "failed":  # the teacher never answered this turn: the next run asks it again
                return Settled(rec, verdicts, calls, [], False, events, result)
            codes = reject_codes(verdicts)
            for code in chain.prev_codes:
                self.acct.observe_repair(code, code not in codes)
                event = self.guard.observe(code, code not in codes)
                if event is not None:
                    events.append(event)
            row = {"record_id": rec.id, "attempt": chain.attempt, "repairs": chain.attempt - 1 or None,
                   "status": rec.status, "output": rec.output, "raw": rec.raw, "verdicts": verdict_dicts(verdicts),
                   "feedback": chain.feedback, "tokens_in": result.prompt_tokens,
                   "tokens_cached": sum(a.cached_tokens or 0 for a in result.attempts),
                   "tokens_out": result.completion_tokens, "teacher_s": result.latency_s,
                   "calls": len(result.attempts)}
            if not self.wants(rec, verdicts, chain.attempt):
                rec = replace(rec, meta={**rec.meta, "attempt": chain.attempt})
                if chain.attempt == 1:
                    return Settled(rec, verdicts, calls, [row], False, events, result)
                if rec.status == "accepted":
                    self.acct.repaired += 1
                self.store.write_batch(self.run_id, [rec], {rec.id: verdicts}, calls, [row])
                return Settled(rec, verdicts, calls, [], True, events, result)
            self.store.write_batch(self.run_id, [], {}, calls, [row])  # stored before its repair is asked
            self.acct.observe_turn(result)
            text = feedback(verdicts, lang, chain.attempt, self.cfg.max_attempts)
            msgs = chain.messages + [{"role": "assistant", "content": rec.raw or ""}, {"role": "user", "content": text}]
            chain = Chain(msgs, chain.attempt + 1, text, tuple(codes))
            request = TeacherRequest(rec.id, tuple(msgs), self.schema, result.request.sampling)
            result = list(self.teacher.generate([request]))[0]
            rec, verdicts = self.to_record(result, job, prompt)
