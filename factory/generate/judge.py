"""The judge: a second teacher (spec section `judge:`) that scores accepted records and ranks sample pairs.

Both are Works of the one generate loop, so resume, shards, guards and accounting apply. Each judgment is
a record of kind `judge` (a score: input {"record_id"}) or `judge_pair` (input {"a", "b"}: two samples of
one query, shown in that order), stored under the judge's own spec ref `<spec>.judge` whose hash covers
the judge section, its schema files, the mode and the judged spec's hash. Its meta holds the judge model,
the prompt hash and the judged record id(s); the run row holds the model file hash or revision.

A judge answer that does not parse or does not fit the score schema is stored as `failed` with `JUDGE001`
(and the parse code), so the next run asks again; it never crashes a run. `apply_threshold` turns scores
below `judge.threshold` into a `penalty` or `reject` verdict (`judge.code`, stage `judge`) on the judged
record; selection for snapshots honours judge rejects.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from mashbill.errors import MashbillError
from mashbill.factory.generate.work import Job, Work, select_jobs
from mashbill.factory.records import Record, SpecRef, Verdict, record_id
from mashbill.factory.store import Store
from mashbill.hashing import canonical_json, sha256_bytes
from mashbill.specs import ResolvedSpec
from mashbill.specs.loader import load_output_schema
from mashbill.specs.prompting import render

JUDGE_UNPARSEABLE = "JUDGE001"


@dataclass(frozen=True)
class JudgePrompt:
    teacher_messages: tuple[dict, ...]
    training_messages: tuple[dict, ...]
    prompt_hash: str

    def meta(self) -> dict:
        return {"prompt_hash": self.prompt_hash}


def judge_of(rs: ResolvedSpec):
    if rs.spec.judge is None:
        raise MashbillError(f"{rs.path}: no `judge:` section (a second teacher, its rubric prompt and score schema)")
    return rs.spec.judge


def judge_ref(rs: ResolvedSpec, mode: str) -> SpecRef:
    judge = judge_of(rs)
    files = {k: v for k, v in rs.files.items() if k.startswith("judge.")}
    digest = sha256_bytes(canonical_json({"judge": judge.model_dump(mode="json"), "files": files, "mode": mode,
                                          "judged": rs.hash}).encode())
    return SpecRef(f"{rs.spec.name}.judge", rs.spec.version, digest)


def _text(rec: Record) -> str:
    return canonical_json(rec.output) if rec.output is not None else (rec.raw or "")


class JudgeWork(Work):
    """mode `score`: one judgment per accepted record of the spec; mode `pairs`: each pair of accepted samples
    of one query (records sharing meta.group), judged in both orders."""

    def __init__(self, rs: ResolvedSpec, store: Store, mode: str = "score"):
        judge = judge_of(rs)
        if mode not in ("score", "pairs"):
            raise MashbillError(f"unknown judge mode {mode!r} (score or pairs)")
        if mode == "pairs" and (judge.pair_prompt is None or judge.pair_schema is None):
            raise MashbillError(f"{rs.path}: judge pairs need judge.pair_prompt and judge.pair_schema")
        super().__init__(rs, judge_ref(rs, mode), "judge" if mode == "score" else "judge_pair")
        self.mode = mode
        self.judge = judge
        role = "judge.score_schema" if mode == "score" else "judge.pair_schema"
        self.output_schema = load_output_schema(rs.file_paths[role], rs.path, {})
        self.constrained = judge.teacher.constrained
        self.sampling = judge.teacher.sampling.model_dump()
        self.prices = dict(judge.teacher.prices)
        self.targets = {r.id: r for r in store.records(spec_hash=rs.hash, status="accepted")}
        template = judge.prompt if mode == "score" else judge.pair_prompt
        self.template = template
        self.prompt_hash = sha256_bytes(canonical_json([template.system, template.user, judge.rubric]).encode())

    def jobs(self, *, limit=None, shard=None) -> list[Job]:
        if self.mode == "score":
            items = [(rid, {"record_id": rid}) for rid in sorted(self.targets)]
        else:
            groups: dict[str, list[str]] = {}
            for rid, rec in sorted(self.targets.items()):
                groups.setdefault(str(rec.meta.get("group", rid)), []).append(rid)
            items = []
            for gid in sorted(groups):
                for a, b in combinations(sorted(groups[gid]), 2):
                    items += [(gid, {"a": a, "b": b}), (gid, {"a": b, "b": a})]  # both orders: position bias
        jobs = []
        for group, inputs in items:
            rid = record_id(self.ref.hash, inputs)
            jobs.append((rid, inputs, group))
        chosen = {rid for rid, _ in select_jobs([(g, {}) for _, _, g in jobs], limit=limit, shard=shard)}
        return [Job(rid, inputs, group=group) for rid, inputs, group in jobs if group in chosen]

    def prompt(self, job: Job) -> JudgePrompt:
        values = {"rubric": self.judge.rubric}
        if self.mode == "score":
            rec = self.targets[job.inputs["record_id"]]
            values.update(query=str(rec.input.get("query", "")), output=_text(rec))
        else:
            a, b = self.targets[job.inputs["a"]], self.targets[job.inputs["b"]]
            values.update(query=str(a.input.get("query", "")), output_a=_text(a), output_b=_text(b))
        msgs = ({"role": "system", "content": render(self.template.system, values)},
                {"role": "user", "content": render(self.template.user, values)})
        return JudgePrompt(msgs, msgs, self.prompt_hash)

    def finish(self, rec: Record, verdicts: list[Verdict]) -> tuple[Record, list[Verdict]]:
        meta = {**rec.meta, "judge_model": self.judge.teacher.model, "judged_spec": self.rs.ref}
        status = rec.status
        if status == "rejected":  # the judge's own answer is unusable: ask again next run
            codes = ",".join(v.code for v in verdicts if v.severity == "reject")
            verdicts = [*verdicts, Verdict(JUDGE_UNPARSEABLE, "reject", f"judge output unusable ({codes})")]
            status = "failed"
        return Record(rec.id, rec.kind, rec.input, rec.output, rec.raw, rec.spec, status, rec.messages, meta), verdicts


def apply_threshold(rs: ResolvedSpec, store: Store, run_id: str) -> int:
    """Turn the latest judge scores below the threshold into verdicts (stage `judge`) on the judged records;
    returns how many records got one. Earlier judge verdicts of the judged records are replaced."""
    judge = judge_of(rs)
    ref = judge_ref(rs, "score")
    scores = store.records(spec_hash=ref.hash, status="accepted")
    rows = []
    for rec in scores:
        score = rec.output.get("score")
        if judge.threshold is not None and isinstance(score, (int, float)) and score < judge.threshold:
            why = str(rec.output.get("rationale", ""))[:200]
            rows.append((rec.input["record_id"], Verdict(judge.code, judge.below, f"judge score {score} < "
                                                        f"{judge.threshold:g}: {why}", "judge")))
    store.replace_verdicts("judge", run_id, rows, [r.input["record_id"] for r in scores])
    return len(rows)


def judge_scores(store: Store, rs: ResolvedSpec) -> dict[str, dict]:
    """judged record id -> {score, rationale, model, prompt_hash, judge_record}; accepted judgments only."""
    if rs.spec.judge is None:
        return {}
    out = {}
    for rec in store.records(spec_hash=judge_ref(rs, "score").hash, status="accepted"):
        out[rec.input["record_id"]] = {"score": rec.output.get("score"), "rationale": rec.output.get("rationale"),
                                       "model": rec.meta.get("judge_model"), "prompt_hash": rec.meta.get("prompt_hash"),
                                       "judge_record": rec.id}
    return out


def pair_judgments(store: Store, rs: ResolvedSpec) -> list[dict]:
    """Every accepted pairwise judgment: {a, b, score_a, score_b, rationale} (a was shown first)."""
    if rs.spec.judge is None or rs.spec.judge.pair_prompt is None:
        return []
    return [{"a": r.input["a"], "b": r.input["b"], "score_a": r.output.get("score_a"),
             "score_b": r.output.get("score_b"), "rationale": r.output.get("rationale"), "id": r.id}
            for r in store.records(spec_hash=judge_ref(rs, "pairs").hash, status="accepted")]



def run_judge(rs: ResolvedSpec, store: Store, teacher, *, mode: str = "score", limit: int | None = None,
              shard: tuple[int, int] | None = None, on_progress=None, args: dict | None = None,
              batch_size: int | None = None):
    """Judge the spec's accepted records (or sample pairs) through the generate loop; then apply the threshold."""
    from mashbill.factory.generate.generate import generate

    work = JudgeWork(rs, store, mode)
    summary = generate(rs, store, teacher, limit=limit, shard=shard, on_progress=on_progress, args=args,
                       work=work, batch_size=batch_size)
    if mode == "score" and summary.status == "completed":
        summary.findings[rs.spec.judge.code] = apply_threshold(rs, store, summary.run_id)
    return summary
