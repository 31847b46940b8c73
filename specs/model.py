"""Typed models of specs and the shared files they reference. Unknown keys are rejected everywhere."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

KINDS = ("complexity", "routing", "plan", "template", "preference", "outcome", "queries")
NAME_RE = r"^[a-z0-9][a-z0-9_.-]*$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HashStable(Strict):
    """A model whose later-added fields leave the dump (and so the spec hash) unchanged at their defaults.

    A field listed in `_added_fields` is omitted from `model_dump` while it equals its default, so adding
    a field with a default never changes the hash of an existing spec; setting it does, as it should.
    """

    _added_fields: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_added_defaults(self, handler):
        data = handler(self)
        if isinstance(data, dict):
            for name in self._added_fields:
                if name in data and getattr(self, name) == type(self).model_fields[name].get_default(
                        call_default_factory=True):
                    del data[name]
        return data


# ---------------------------------------------------------------- shared files


class PromptFile(Strict):
    """Named text blocks and framing variants that templates refer to as {{ name }}."""

    name: str = Field(pattern=NAME_RE)
    version: int = Field(ge=1)
    description: str = ""
    blocks: dict[str, str] = {}
    framings: dict[str, str] = {}


class StructuralCategory(Strict):
    description: str
    requires: list[str] = []


class TaxonomyVariation(Strict):
    min_llm_categories: int = Field(3, ge=1)
    rename_probability: float = Field(0.35, ge=0, le=1)
    novel_probability: float = Field(0.30, ge=0, le=1)
    general_keep_probability: float = Field(0.92, ge=0, le=1)
    column: int = Field(21, ge=1)
    renames: dict[str, list[str]] = {}
    never_rename: list[str] = []
    novel: dict[str, str] = {}


class TaxonomyFile(Strict):
    name: str = Field(pattern=NAME_RE)
    version: int = Field(ge=1)
    description: str = ""
    categories: dict[str, str]
    structural: dict[str, StructuralCategory]
    variation: TaxonomyVariation = TaxonomyVariation()

    @model_validator(mode="after")
    def _renames_known(self):
        for original in self.variation.renames:
            if original not in self.categories:
                raise ValueError(f"rename of unknown category '{original}'")
        for name in self.variation.never_rename:
            if name in self.variation.renames:
                raise ValueError(f"'{name}' is listed in both renames and never_rename")
        return self


class Tool(Strict):
    group: str
    description: str
    args: dict[str, Any]
    example: dict[str, Any]


class ToolCatalogFile(Strict):
    name: str = Field(pattern=NAME_RE)
    version: int = Field(ge=1)
    description: str = ""
    argument_shapes: Literal["runtime", "training"] = "runtime"
    tools: dict[str, Tool]


# ---------------------------------------------------------------- the spec


class SeedSource(HashStable):
    """Seeds inline, from a file (JSONL/JSON/CSV/TSV/Parquet, or a local Hugging Face dataset folder saved with
    `save_to_disk`) with a column mapping (our field -> source column), or the accepted queries of a `queries`
    spec (`from_spec: NAME@V`, read from the store at generate time, each with its lineage)."""

    path: str | None = None
    format: Literal["jsonl", "csv", "tsv", "parquet", "json", "hf"] | None = None
    columns: dict[str, str] = {}
    inline: list[dict[str, Any]] | None = None
    from_spec: str | None = None
    limit: int | None = Field(None, ge=1)
    # Provenance stamped on every row of this source unless a column gives it per row.
    source: str | None = None
    licence: str | None = None
    split: str | None = None  # hf: which split of a DatasetDict folder
    header: bool = True  # csv/tsv: False names the columns by position ("0", "1", ...)

    _added_fields: ClassVar[tuple[str, ...]] = ("from_spec", "source", "licence", "split", "header")

    @model_validator(mode="after")
    def _one_source(self):
        if sum(x is not None for x in (self.path, self.inline, self.from_spec)) != 1:
            raise ValueError("give exactly one of 'path', 'inline' or 'from_spec'")
        return self


class MessageTemplates(Strict):
    system: str
    user: str


class PromptSpec(Strict):
    file: str
    framings: list[str] = []
    teacher: MessageTemplates
    training: MessageTemplates


class TaxonomyRef(Strict):
    file: str
    variation: bool = True


class ToolsRef(Strict):
    file: str


class Sampling(Strict):
    temperature: float = Field(0.2, ge=0, le=2)
    top_p: float = Field(0.95, gt=0, le=1)
    top_k: int = Field(40, ge=0)
    max_tokens: int = Field(384, ge=1)
    seed: int = 0
    repeat_penalty: float = Field(1.0, gt=0)


PRICE_KEYS = {
    "input_per_1m": "currency per million prompt tokens",
    "cached_input_per_1m": "currency per million prompt tokens served from the prefix cache (default: input_per_1m)",
    "output_per_1m": "currency per million completion tokens",
    "gpu_hour": "currency per GPU-hour (charged on the run's wall time)",
    "gpus": "GPUs the run holds (default 1), multiplies gpu_hour",
}


class TeacherSpec(HashStable):
    backend: Literal["llama_cpp", "openai", "vllm"] = "llama_cpp"
    model: str = "embedded:smollm2-135m-instruct"
    n_ctx: int = Field(4096, ge=256)
    sampling: Sampling = Sampling()
    constrained: bool = True
    base_url: str | None = None
    prices: dict[str, float] = {}
    # Model revision (a hub commit or tag) for openai/vllm teachers; stored with every run.
    revision: str | None = None

    _added_fields: ClassVar[tuple[str, ...]] = ("revision",)

    @field_validator("prices")
    @classmethod
    def _known_prices(cls, v: dict[str, float]):
        unknown = sorted(set(v) - set(PRICE_KEYS))
        if unknown:
            raise ValueError(f"unknown price key(s) {unknown}; known: " +
                             ", ".join(f"{k} ({d})" for k, d in PRICE_KEYS.items()))
        if any(x < 0 for x in v.values()):
            raise ValueError("prices must be >= 0")
        return v


class TrainerProfile(Strict):
    """What a trainer expects of the data: the one profile a spec declares, validation checks and a snapshot
    records (a training config's `profile` only overrides fields of it)."""

    tokenizer: str = "embedded:smollm2-135m-instruct"  # embedded:NAME, a .gguf file or a HF folder
    chat_template: str | None = None  # a .jinja file, template text, or a built-in name; None: the tokenizer's
    max_seq_len: int = Field(4096, ge=16)
    truncation_side: Literal["right", "left"] = "right"
    loss: Literal["assistant-only", "completion-only", "last-turn"] = "assistant-only"

    def describe(self) -> dict:
        return {"tokenizer": self.tokenizer, "chat_template": self.chat_template or "(the tokenizer's)",
                "max_seq_len": self.max_seq_len, "truncation_side": self.truncation_side, "loss": self.loss}


class Runtime(Strict):
    """Knobs that change how fast a run goes, never what it produces; excluded from the spec hash."""

    batch_size: int = Field(8, ge=1)  # records per committed transaction; the vLLM backend's chunk size
    concurrency: int = Field(1, ge=1)  # requests in flight (openai backend)
    threads: int | None = Field(None, ge=1)
    # openai backend: per-request timeout, retries after the first attempt, exponential backoff with jitter
    timeout_s: float = Field(90.0, gt=0)
    max_retries: int = Field(3, ge=0)
    backoff_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(60.0, ge=0)
    # How the JSON Schema is sent to an OpenAI-compatible server; `auto` finds out in the preflight.
    structured_output: Literal["auto", "json_schema", "json_object", "structured_outputs", "guided_json"] = "auto"
    api_key_env: str = "OPENAI_API_KEY"
    # vllm backend
    tensor_parallel: int | None = Field(None, ge=1)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    # a `progress` event with the run's accounting is stored at most this often
    progress_every_s: float = Field(30.0, gt=0)


# ---------------------------------------------------------------- guards


class Probe(Strict):
    """A gold probe: a query whose answer a working teacher gets right. Empty expectations only need an accept."""

    query: str = Field(min_length=1)
    input: dict[str, Any] = {}  # other input fields, e.g. {lang: de}
    categories: list[str] = []  # some task of the plan has one of these categories
    tools: list[str] = []  # some task of the plan calls one of these tools (mcp_tool)
    fields: dict[str, list[Any]] = {}  # object outputs: output[field] is one of the values


class PreflightGuard(Strict):
    """Probes run at temperature 0 before the bulk work; below min_pass_rate the run aborts."""

    probes: list[Probe] = []
    min_pass_rate: float = Field(0.6, ge=0, le=1)


class AcceptRateGuard(Strict):
    """Stops the run when the accept rate over the last `window` answered records falls below `min_rate`."""

    window: int = Field(200, ge=1)
    min_rate: float = Field(0.4, ge=0, le=1)


class ProbeRecheckGuard(Strict):
    """Re-runs the preflight probes every `every` accepted records (0: never); below the rate it stops the run."""

    every: int = Field(1000, ge=0)
    min_pass_rate: float = Field(0.4, ge=0, le=1)


class LatencyGuard(Strict):
    """Median latency of the last `window` answers above `multiple` x the median of the `baseline` before them."""

    multiple: float = Field(3.0, gt=1)
    baseline: int = Field(50, ge=1)
    window: int = Field(20, ge=1)
    action: Literal["warn", "stop"] = "warn"


class CircuitBreakerGuard(Strict):
    """Opens after `consecutive_failures` records the teacher never answered; waits `cooldown_s`, then half-opens.

    Each opening is a trip; after `max_trips` trips the run stops (failed records are retried by the next run).
    """

    consecutive_failures: int = Field(10, ge=1)
    cooldown_s: float = Field(60.0, ge=0)
    max_trips: int = Field(3, ge=1)


class Guards(Strict):
    preflight: PreflightGuard = PreflightGuard()
    accept_rate: AcceptRateGuard = AcceptRateGuard()
    probe_recheck: ProbeRecheckGuard = ProbeRecheckGuard()
    latency: LatencyGuard = LatencyGuard()
    circuit_breaker: CircuitBreakerGuard = CircuitBreakerGuard()


# ---------------------------------------------------------------- repair with the verdict


class RepairGuard(Strict):
    """Per code: over its last `window` repairs, a fix rate below `min_fix_rate` trips the guard.
    `stop` ends the run (exit 3); `skip` stops asking repairs for that code and goes on."""

    window: int = Field(20, ge=1)
    min_fix_rate: float = Field(0.05, ge=0, le=1)
    action: Literal["stop", "skip"] = "stop"


class Repair(HashStable):
    """Ask again for a rejected record whose every reject code is one of `codes`, with the verdicts stated
    (factory.generate.repair). `max_attempts` repairs at most after the first answer; every attempt is stored."""

    max_attempts: int = Field(ge=1)
    codes: list[str] = Field(min_length=1)  # checked against the code registry by `spec check` and `generate`
    guard: RepairGuard = RepairGuard()
    # continue: the conversation goes on (prompt, rejected answer, verdicts); restart: the prompt is asked afresh
    # with the verdicts beside the request and without the rejected answer, which a small teacher copies
    mode: Literal["continue", "restart"] = "continue"

    _added_fields: ClassVar[tuple[str, ...]] = ("mode",)


class Samples(Strict):
    """Best-of-n and votes (factory.generate.chains): up to `n` samples per record (sampling seed + k). `first-accepted`
    keeps the first accepted sample; `vote` asks all n and keeps the majority of the accepted ones (on `vote_on`,
    an output field, or the whole output), its share the record's confidence; a tie or a share below
    `min_agreement` is flagged for review (VOTE001)."""

    n: int = Field(ge=2)
    pick: Literal["first-accepted", "vote"]
    vote_on: str | None = None
    min_agreement: float = Field(0.5, gt=0, le=1)


class ExamplesSection(Strict):
    """Retrieved examples (factory.generate.examples): the `k` rows of the example `bank` (a JSONL file, its bytes in
    the spec hash; specs.examples) nearest to the request by MiniLM cosine are rendered into the template variable
    {{ retrieved_examples }}, never the request itself nor a test/held-out row or a holdout query."""

    bank: str
    k: int = Field(3, ge=1)


# ---------------------------------------------------------------- curation (snapshots)

class Splits(Strict):
    """Shares of train/eval/test; groups of near duplicates always land on one side."""

    train: float = Field(0.8, gt=0, le=1)
    eval: float = Field(0.1, ge=0, le=1)
    test: float = Field(0.1, ge=0, le=1)

    @model_validator(mode="after")
    def _sum_to_one(self):
        if abs(self.train + self.eval + self.test - 1.0) > 1e-6:
            raise ValueError(f"train + eval + test must be 1, found {self.train + self.eval + self.test:g}")
        return self


class Quotas(Strict):
    """Balancing per label cell (one value per dimension, e.g. precision_tools/moderate/de).

    Cells above their target are cut down to it (deterministically); cells below it are reported in the
    manifest, or filled by repeating their train records when `oversample` is set. A cell below
    `min_per_cell`, or a named cell with no record at all, cannot be met and the freeze fails.
    """

    dims: list[str] = []  # empty: the kind's default (plan: category, complexity, lang)
    per_cell: int | None = Field(None, ge=1)
    cells: dict[str, int] = {}  # explicit targets by cell name ("precision_tools/moderate/de"); override per_cell
    min_per_cell: int = Field(0, ge=0)
    oversample: bool = False


class PreferenceSources(Strict):
    """Where a preference spec's (DPO) pairs come from; each pair records its source."""

    source_spec: str | None = None  # the spec whose records give chosen plans (path relative to this spec)
    # `repair`: a repaired record's rejected attempt against its accepted repair (factory.generate.repair), opt-in
    sources: list[Literal["rule", "teacher", "human", "judge", "repair"]] = ["rule", "teacher", "human"]
    # Rule-derived minimal edits to apply (None: the first six, curation.preference.preference_edits.DEFAULT_EDITS; names
    # are checked there).
    edits: list[str] | None = None
    samples_per_query: int = Field(2, ge=2)  # teacher samples per query (seeds teacher.sampling.seed + k)
    correction_samples: bool = False  # also emit multi-turn (wrong plan, review request, corrected plan) samples
    review_request: str | None = None  # None: curation's default review request
    min_judge_margin: float = Field(1.0, ge=0)  # judge pairs: mean score difference over both orders


class Curation(Strict):
    """How `mashbill snapshot freeze` selects, balances and splits this spec's records."""

    require_review: bool = False  # only records a reviewer accepted or corrected
    splits: Splits = Splits()
    group_by: list[str] = []  # input fields that tie records together (paraphrase groups) on one split side
    near_duplicate_threshold: float = Field(0.8, gt=0, le=1)  # Jaccard on query shingles for split groups
    quotas: Quotas = Quotas()
    preference: PreferenceSources = PreferenceSources()


# ---------------------------------------------------------------- query synthesis and the judge


class TrapRule(Strict):
    """Trap queries that probe one routing boundary: example seeds of `types`, and what the trap should do."""

    types: list[str] = Field(min_length=1)
    hint: str = Field(min_length=1)


class SynthFilters(HashStable):
    _added_fields: ClassVar[tuple[str, ...]] = ("context", "one_request", "user_voice", "cell_fit", "fluency")

    min_chars: int = Field(12, ge=1)
    max_chars: int = Field(400, ge=1)
    min_words: int = Field(1, ge=1)  # words of letters; above 1 also one token without a space ("convert-65mph", "17.5% of 4,360")
    language: bool = True  # the detected language (py3langid, EN/DE) must be the cell's
    echo: bool = True  # drop queries that repeat the prompt's fixed wording or JSON/template residue (SYN007)
    request_shape: bool = False  # keep only questions and instructions (SYN008); statements are answers
    near_duplicate_threshold: float = Field(0.7, gt=0, le=1)  # Jaccard on character 5-grams
    # the quality checks of validators.queries.query_quality (measured in bench/synth_quality.py)
    context: bool = False  # SYN009: drop references to text or turns the query does not carry
    one_request: bool = False  # SYN010: drop several requests in one, or a request with an appended answer
    user_voice: bool = False  # SYN011: drop the assistant's voice ("anything else I can help with?")
    cell_fit: bool = False  # SYN012: drop what lacks its cell's evidence (needs `rules:`, whose triggers decide)
    # SYN013: language -> the most mean surprise (nats per token under the embedded SmolLM2) a query may have;
    # a language without a limit is not checked (validators.queries.query_fluency)
    fluency: dict[str, float] = {}


class Synthesis(HashStable):
    """Grow seeds into new queries, per cell (type x language x trap) to a quota, through the generate loop.

    Each teacher call shows `shown` seeds of one cell and asks for `per_call` new queries. The pool's
    `target` is split over the cells: `trap_share` of it over the trap cells (trap rule x language), the
    rest over the seeds' (type, language) cells, evenly or by `weights`. A cell stops once its quota is met.
    """

    _added_fields: ClassVar[tuple[str, ...]] = ("weights",)

    target: int = Field(500, ge=1)
    per_call: int = Field(8, ge=1, le=32)
    shown: int = Field(6, ge=1)
    trap_share: float = Field(0.15, ge=0, lt=1)
    traps: dict[str, TrapRule] = {}
    min_seeds_per_cell: int = Field(1, ge=1)
    calls_per_quota: float = Field(3.0, ge=1)  # a cell gets up to ceil(quota / per_call * this) calls
    filters: SynthFilters = SynthFilters()
    type_hints: dict[str, str] = {}  # type -> a line shown to the teacher for that cell
    # language -> share of the target (empty: each cell alike). A teacher that writes one language badly
    # gets a share it can fill, so that every cell can meet its quota.
    language_shares: dict[str, float] = {}
    # "TYPE" or "TYPE/LANG" (seed type or trap rule) -> weight in its part of the target (default 1, 0: no cell)
    weights: dict[str, float] = {}

    @model_validator(mode="after")
    def _shares_sum_to_one(self):
        if self.language_shares and abs(sum(self.language_shares.values()) - 1) > 1e-6:
            raise ValueError(f"language_shares must add up to 1, they add up to {sum(self.language_shares.values()):g}")
        for field in ("language_shares", "weights"):
            if any(v < 0 for v in getattr(self, field).values()):
                raise ValueError(f"{field} must not be negative")
        return self


class Judge(Strict):
    """A second teacher that scores accepted records (rubric -> score + rationale) and ranks sample pairs."""

    teacher: TeacherSpec = TeacherSpec()
    prompt: MessageTemplates  # {{ rubric }}, {{ query }}, {{ output }}
    pair_prompt: MessageTemplates | None = None  # {{ rubric }}, {{ query }}, {{ output_a }}, {{ output_b }}
    rubric: str = Field(min_length=1)
    score_schema: str  # JSON Schema file: an object with an integer `score` and a string `rationale`
    pair_schema: str | None = None  # an object with `score_a`, `score_b` and `rationale`
    threshold: float | None = None  # a score below it is a finding
    below: Literal["penalty", "reject"] = "penalty"
    code: str = Field("JUDGE010", pattern=r"^[A-Z]+[0-9]{3}$")


class OutcomeModel(Strict):
    """One of the models an outcome spec runs over every query (any backend, the embedded one included)."""

    name: str = Field(pattern=NAME_RE)
    teacher: TeacherSpec


class OutcomeSettings(Strict):
    """Kind outcome: one record per (query, model); `check` compares the answer with the seed's `reference`."""

    models: list[OutcomeModel] = Field(min_length=1)
    check: Literal["number", "choice", "exact"] = "number"
    reference: str = "reference"  # the seed field holding the gold answer
    answer: str = "answer"  # the output field holding the model's answer

    @model_validator(mode="after")
    def _unique(self):
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError(f"model names must be unique, found {names}")
        return self


class Spec(HashStable):
    name: str = Field(pattern=NAME_RE)
    version: int = Field(ge=1)
    kind: Literal["complexity", "routing", "plan", "template", "preference", "outcome", "queries"]
    description: str = ""
    changelog: list[str] = []
    languages: list[str] = ["en", "de"]
    seeds: list[SeedSource] = Field(min_length=1)
    prompt: PromptSpec
    taxonomy: TaxonomyRef | None = None
    tools: ToolsRef | None = None
    teacher: TeacherSpec = TeacherSpec()
    output_schema: str
    rules: str | None = None
    trainer_profile: TrainerProfile = TrainerProfile()
    holdout: list[str] = []
    runtime: Runtime = Runtime()
    guards: Guards = Guards()
    curation: Curation = Curation()
    outcome: OutcomeSettings | None = None  # kind outcome: the models run over the same queries
    synthesis: Synthesis | None = None  # kind queries: how new queries are grown from the seeds
    judge: Judge | None = None  # a second teacher that scores accepted records and ranks samples
    repair: Repair | None = None  # ask again for a rejected record, with its verdicts (factory.generate.repair)
    samples: Samples | None = None  # best-of-n or vote per record (factory.generate.chains)
    examples: ExamplesSection | None = None  # retrieved examples from a bank (factory.generate.examples)

    _added_fields: ClassVar[tuple[str, ...]] = ("guards", "curation", "outcome", "synthesis", "judge", "repair",
                                                "samples", "examples")

    @model_validator(mode="after")
    def _outcome_models(self):
        if (self.kind == "outcome") != (self.outcome is not None):
            raise ValueError("an 'outcome' section is required for kind outcome, and only allowed there")
        return self

    @model_validator(mode="after")
    def _synthesis_for_queries(self):
        if (self.kind == "queries") != (self.synthesis is not None):
            raise ValueError("a queries spec needs a 'synthesis' section, and only a queries spec may have one")
        return self

    @field_validator("prompt")
    @classmethod
    def _templates_nonempty(cls, v: PromptSpec):
        for side in ("teacher", "training"):
            t = getattr(v, side)
            if not t.user.strip():
                raise ValueError(f"prompt.{side}.user is empty")
        return v

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


PLACEHOLDER_RE = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
