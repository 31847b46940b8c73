"""A record's chain of attempts: best-of-n samples, votes and repairs, inside the one generate loop.

A spec's `samples: {n, pick}` asks up to n fresh samples per record (sample k: the same prompt, sampling seed + k):
`first-accepted` stops at the first sample the record checker accepts; `vote` asks all n and keeps the majority
output (of `vote_on`, a field, or the whole output) among the accepted samples, stores the vote share as the record's
`meta.confidence` and its counts as `meta.votes`, and flags a tie or a share below `min_agreement` (VOTE001) so that
`review push --select flagged` or `low-confidence` picks it. A spec's `repair` section (factory.generate.repair) then asks
the record's rejected attempt again with its verdicts, continuing that sample's conversation.

Every answer is a `record_attempts` row (attempt, sample, the attempt it repairs, verdicts, feedback, tokens,
seconds). Rows are committed before the next ask, and the chain's record with its last rows, so a run killed
mid-chain resumes it from what is stored: the next ask is a pure function of the stored rows (`Chains.step`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

from mashbill.factory.generate.guards import GuardEvent
from mashbill.factory.generate.repair import RepairGuard, reject_codes
from mashbill.factory.generate.repair_text import feedback
from mashbill.factory.records import Record, Verdict, verdict_dicts
from mashbill.factory.teachers.base import TeacherRequest, TeacherResult
from mashbill.hashing import canonical_json

VOTE_FLAG = "VOTE001"


def _verdicts(row: dict) -> list[Verdict]:
    return [Verdict(v["code"], v["severity"], v.get("detail") or "", v.get("stage") or "generate")
            for v in row["verdicts"]]


def vote(samples: list[dict], cfg) -> tuple[dict, dict, list[Verdict]]:
    """The majority among the accepted samples: (its first row, meta with confidence and votes, flag verdicts).
    With no accepted sample, the last sample stands (rejected) and no confidence is given."""
    accepted = [r for r in samples if r["status"] == "accepted"]
    if not accepted:
        return samples[-1], {}, []

    def key(row):
        value = row["output"].get(cfg.vote_on) if cfg.vote_on and isinstance(row["output"], dict) else row["output"]
        return value if isinstance(value, str) else canonical_json(value)

    counts = Counter(key(r) for r in accepted)
    top = max(counts.values())
    winners = [k for k, c in counts.items() if c == top]
    winner = next(r for r in accepted if key(r) in winners)  # on a tie, the earliest sample's
    share = top / len(samples)
    meta = {"confidence": round(share, 4), "votes": dict(sorted(counts.items())), "samples": len(samples)}
    flags = []
    if len(winners) > 1 or share < cfg.min_agreement:
        why = "a tie" if len(winners) > 1 else f"vote share {share:.2f} below samples.min_agreement {cfg.min_agreement}"
        flags.append(Verdict(VOTE_FLAG, "flag", f"{why}: {dict(sorted(counts.items()))} of {len(samples)} samples"))
    return winner, meta, flags


@dataclass
class Settled:
    record: Record
    verdicts: list[Verdict]
    calls: list = field(default_factory=list)
    attempts: list[dict] = field(default_factory=list)  # rows still to write with the record
    stored: bool = False  # written already (a chain's record goes in with its last rows at once)
    events: list[GuardEvent] = field(default_factory=list)
    result: TeacherResult | None = None  # the last turn's teacher result (the record's own accounting)


class Chains:
    """The chains of one generate run, for a Work with `pick` (samples) and/or `repair` settings."""

    def __init__(self, work, *, store, run_id: str, teacher, schema, acct, to_record: Callable):
        self.work = work
        self.pick = work.pick
        self.repair = work.repair
        self.store = store
        self.run_id = run_id
        self.teacher = teacher
        self.schema = schema
        self.acct = acct
        self.to_record = to_record  # (result, job, prompt) -> (Record, verdicts)
        self.guard = RepairGuard(self.repair.guard, self.repair.codes) if self.repair is not None else None

    def resume(self, rids) -> dict[str, list[dict]]:
        """Stored attempts of chains a killed run left open (records not yet stored), by record id."""
        return self.store.attempt_chains(rids)

    # ------------------------------------------------------------ what comes next

    def step(self, rows: list[dict], lang: str | None) -> tuple:
        """('sample', k) | ('repair', feedback) | ('final', row, meta, extra verdicts), from the rows alone."""
        last = rows[-1]
        fresh = [r for r in rows if r["feedback"] is None]  # one per sample
        pick = self.pick
        if pick is not None and last["feedback"] is None and len(fresh) < pick.n:
            if pick.pick == "vote" or last["status"] != "accepted":
                return ("sample", len(fresh))
        row, meta, extra = last, {}, []
        if pick is not None and pick.pick == "vote" and last["feedback"] is None:
            row, meta, extra = vote(fresh, pick)
        repairs = sum(1 for r in rows if r["feedback"] is not None)
        verdicts = _verdicts(row)
        codes = set(reject_codes(verdicts))
        # asked again only when every reject is one a repair may fix: a code left unfixable keeps it rejected
        if (row is last and row["status"] == "rejected" and self.guard is not None and self.guard.stopped is None
                and repairs < self.repair.max_attempts and codes and codes <= self.guard.active):
            return ("repair", feedback(verdicts, lang, repairs + 1, self.repair.max_attempts,
                                       restart=self.repair.mode == "restart"))
        return ("final", row, meta, extra)

    def request(self, step: tuple, rows: list[dict], job, prompt, rid: str) -> tuple[TeacherRequest, dict]:
        """The teacher request of an ask step, and the row fields its answer will carry."""
        base = self.work.job_sampling(job)
        if step[0] == "sample":
            k = step[1]
            sampling = {**base, "seed": base["seed"] + k} if k else base
            return (TeacherRequest(rid, prompt.teacher_messages, self.schema, sampling),
                    {"sample": k, "feedback": None, "repairs": None})
        k = rows[-1]["sample"]
        msgs = list(prompt.teacher_messages)
        if self.repair.mode == "restart":  # the request afresh, the verdicts of the attempt before beside it
            msgs[-1] = {**msgs[-1], "content": f"{msgs[-1]['content']}\n\n{step[1]}"}
        else:  # the conversation goes on from the sample's first answer
            start = max(i for i, r in enumerate(rows) if r["feedback"] is None)
            for r in rows[start:]:
                if r["feedback"]:
                    msgs.append({"role": "user", "content": r["feedback"]})
                msgs.append({"role": "assistant", "content": r["raw"] or ""})
            msgs.append({"role": "user", "content": step[1]})
        sampling = {**base, "seed": base["seed"] + k} if k else base
        return (TeacherRequest(rid, tuple(msgs), self.schema, sampling),
                {"sample": k, "feedback": step[1], "repairs": rows[-1]["attempt"]})

    def finish_stored(self, rows: list[dict], job, prompt, ref) -> tuple[Record, list[Verdict]]:
        """Store the record of a stored chain that needs no more answers (none is asked)."""
        _, chosen, meta, extra = self.step(rows, job.inputs.get("lang"))
        rec = Record(job.rid, self.work.kind, job.inputs, chosen["output"], chosen["raw"], ref, chosen["status"],
                     prompt.training_messages, {**prompt.meta(), "lang": job.inputs.get("lang"), **job.meta, **meta,
                                                "attempt": chosen["attempt"], "attempts": len(rows)})
        verdicts = _verdicts(chosen) + extra
        self.store.write_batch(self.run_id, [rec], {rec.id: verdicts}, [], [])
        return rec, verdicts

    def first_request(self, rows: list[dict], job, prompt) -> TeacherRequest | None:
        """The next ask of a stored chain (None: it needs no more answers; `settle` finishes it)."""
        step = self.step(rows, job.inputs.get("lang"))
        return None if step[0] == "final" else self.request(step, rows, job, prompt, job.rid)[0]

    # ------------------------------------------------------------ running a chain

    def settle(self, result: TeacherResult, rec: Record, verdicts: list[Verdict], job, prompt,
               stored: list[dict] | None) -> Settled:
        """Run the record's chain from this answer to its record; store what is asked along the way."""
        rows = list(stored or [])
        lang = (job.inputs or {}).get("lang")
        events: list[GuardEvent] = []
        fields = {"sample": 0, "feedback": None, "repairs": None}
        if rows:
            fields = self.request(self.step(rows, lang), rows, job, prompt, job.rid)[1]
        pending: list[dict] = []
        while True:
            attempt = len(rows) + 1
            calls = [replace(c, turn=attempt) for c in result.attempts]
            if rec.status == "failed":  # the teacher never answered this turn: the next run asks it again
                return Settled(rec, verdicts, calls, pending, False, events, result)
            codes = reject_codes(verdicts)
            if fields["feedback"] is not None:  # a repair: did it fix what the attempt before was rejected for?
                for code in reject_codes(_verdicts(rows[-1])):
                    self.acct.observe_repair(code, code not in codes)
                    event = self.guard.observe(code, code not in codes)
                    if event is not None:
                        events.append(event)
            row = {"record_id": rec.id, "attempt": attempt, **fields, "status": rec.status, "output": rec.output,
                   "raw": rec.raw, "verdicts": verdict_dicts(verdicts), "tokens_in": result.prompt_tokens,
                   "tokens_cached": sum(a.cached_tokens or 0 for a in result.attempts),
                   "tokens_out": result.completion_tokens, "teacher_s": result.latency_s,
                   "calls": len(result.attempts)}
            rows.append(row)
            pending.append(row)
            step = self.step(rows, lang)
            if step[0] == "final":
                _, chosen, meta, extra = step
                final = replace(rec, output=chosen["output"], raw=chosen["raw"], status=chosen["status"],
                                meta={**rec.meta, **meta, "attempt": chosen["attempt"], "attempts": len(rows)})
                final_verdicts = _verdicts(chosen) + extra
                if len(rows) == 1:
                    return Settled(final, final_verdicts, calls, pending, False, events, result)
                if final.status == "accepted" and any(r["feedback"] is not None for r in rows):
                    self.acct.repaired += 1
                self.store.write_batch(self.run_id, [final], {final.id: final_verdicts}, calls, pending)
                return Settled(final, final_verdicts, calls, [], True, events, result)
            self.store.write_batch(self.run_id, [], {}, calls, pending)  # stored before the next ask
            pending = []
            self.acct.observe_turn(result, step[0])
            request, fields = self.request(step, rows, job, prompt, rec.id)
            result = list(self.teacher.generate([request]))[0]
            rec, verdicts = self.to_record(result, job, prompt)
