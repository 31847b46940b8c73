"""What one generate run works on: a list of jobs, how each job's prompt is rendered, what a result becomes.

The generate loop (`factory.generate.generate`) is the only loop that calls a teacher; a `Work` tells it what to
ask. `SpecWork` is a spec's seed inputs, optionally `samples` outputs per input (the preference spec's
teacher samples). Query synthesis (`factory.generate.synth`) and the judge (`factory.generate.judge`) are Works too, so
resume, shards, guards and accounting apply to all of them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mashbill.factory.records import Record, SpecRef, Verdict, record_id
from mashbill.factory.shards import shard_of
from mashbill.specs import ResolvedSpec, render_prompt


@dataclass(frozen=True)
class Job:
    """One teacher call: the record id it fills, the stored input, the prompt's RNG key and extra meta."""

    rid: str
    inputs: dict
    prompt_key: str = ""  # the id whose framing/taxonomy the prompt uses (samples of one input share one)
    seed_offset: int = 0  # added to the sampling seed (sample k gets seed + k)
    meta: dict = field(default_factory=dict)
    group: str = ""  # jobs of one group land on one shard (samples of a query)


class Work:
    """Base: the spec's prompt, output schema and sampling; subclasses choose the jobs and post-process."""

    uses_probes = False

    def __init__(self, rs: ResolvedSpec, ref: SpecRef, kind: str):
        self.rs = rs
        self.ref = ref
        self.kind = kind
        self.output_schema = rs.output_schema
        self.constrained = rs.spec.teacher.constrained
        self.sampling = rs.spec.teacher.sampling.model_dump()
        self.prices = dict(rs.spec.teacher.prices)
        self.repair = None  # a spec's `repair` section, for the works that use it (factory.generate.repair)
        self.pick = None  # a spec's `samples` section (best-of-n, vote), for the works that use it (factory.generate.chains)

    def jobs(self, *, limit: int | None = None, shard: tuple[int, int] | None = None) -> list[Job]:
        raise NotImplementedError

    def wanted(self, job: Job) -> bool:
        """Asked lazily, just before the job is sent: False skips it for this run."""
        return True

    def render(self, inputs: dict, key: str, rid: str):
        """The prompt of one input (`key` draws its framing and taxonomy; `rid` is its record id)."""
        return render_prompt(self.rs, inputs, key)

    def prompt(self, job: Job):
        return self.render(job.inputs, job.prompt_key or job.rid, job.rid)

    def use_store(self, store) -> None:
        """Called by the generate loop with the run's store before the first prompt (a Work may cache there)."""

    def job_sampling(self, job: Job) -> dict:
        if not job.seed_offset:
            return self.sampling
        return {**self.sampling, "seed": self.sampling["seed"] + job.seed_offset}

    def finish(self, rec: Record, verdicts: list[Verdict]) -> tuple[Record, list[Verdict]]:
        """The record as it will be stored (a Work may filter its output or add verdicts)."""
        return rec, verdicts


def select_jobs(items: list[tuple[str, dict]], *, limit: int | None, shard: tuple[int, int] | None
                ) -> list[tuple[str, dict]]:
    """(id, input) with duplicate ids removed, then sharded by id, then limited."""
    seen: set[str] = set()
    out = []
    for rid, inputs in items:
        if rid in seen:
            continue
        seen.add(rid)
        if shard is not None and shard_of(rid, shard[1]) != shard[0]:
            continue
        out.append((rid, inputs))
    return out[:limit] if limit is not None else out


class SpecWork(Work):
    """A spec's seed inputs; with samples > 1, `samples` records per input (input + {"sample": k}, seed + k)
    that share one rendered prompt, so they are comparable (the preference spec's teacher samples)."""

    uses_probes = True

    def __init__(self, rs: ResolvedSpec, inputs: list[dict] | tuple[dict, ...] | None = None, *, samples: int = 1):
        super().__init__(rs, SpecRef(rs.spec.name, rs.spec.version, rs.hash), rs.spec.kind)
        self.inputs = list(rs.seeds if inputs is None else inputs)
        self.samples = samples
        self.repair = rs.spec.repair
        self.pick = rs.spec.samples
        self.retriever = None  # the spec's retrieved examples (factory.generate.examples), set up by use_store

    def use_store(self, store) -> None:
        if self.rs.spec.examples is not None and self.retriever is None:
            from mashbill.factory.generate.examples import Retriever

            self.retriever = Retriever(self.rs, cache_root=Path(store.root) / "embeddings")

    def render(self, inputs: dict, key: str, rid: str):
        """The prompt of one input: the spec's, with the retrieved examples when it has an examples section."""
        if self.retriever is not None:
            return self.retriever.prompt(inputs, rid, key)
        return super().render(inputs, key, rid)

    def jobs(self, *, limit=None, shard=None) -> list[Job]:
        base = select_jobs([(record_id(self.rs.hash, i), i) for i in self.inputs], limit=limit, shard=shard)
        if self.samples == 1:
            return [Job(rid, inputs) for rid, inputs in base]
        seed = self.sampling["seed"]
        return [Job(record_id(self.rs.hash, {**inputs, "sample": k}), {**inputs, "sample": k}, prompt_key=gid,
                    seed_offset=k, meta={"group": gid, "sample": k, "seed": seed + k}, group=gid)
                for gid, inputs in base for k in range(self.samples)]
