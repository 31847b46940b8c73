"""Typed models of specs and the shared files they reference. Unknown keys are rejected everywhere."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

KINDS = ("complexity", "routing", "plan", "template", "preference")
NAME_RE = r"^[a-z0-9][a-z0-9_.-]*$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


class SeedSource(Strict):
    """Seeds inline, or from a JSONL/CSV/Parquet file with a column mapping (our field -> source column)."""

    path: str | None = None
    format: Literal["jsonl", "csv", "parquet", "json"] | None = None
    columns: dict[str, str] = {}
    inline: list[dict[str, Any]] | None = None
    limit: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _one_source(self):
        if (self.path is None) == (self.inline is None):
            raise ValueError("give exactly one of 'path' or 'inline'")
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


class TeacherSpec(Strict):
    backend: Literal["llama_cpp", "openai", "vllm"] = "llama_cpp"
    model: str = "embedded:smollm2-135m-instruct"
    n_ctx: int = Field(4096, ge=256)
    sampling: Sampling = Sampling()
    constrained: bool = True
    base_url: str | None = None
    prices: dict[str, float] = {}


class TrainerProfile(Strict):
    tokenizer: str = "embedded:smollm2-135m-instruct"
    chat_template: str | None = None
    max_seq_len: int = Field(4096, ge=16)
    truncation_side: Literal["right", "left"] = "right"
    loss: Literal["assistant-only", "completion-only", "last-turn"] = "assistant-only"


class Runtime(Strict):
    """Knobs that change how fast a run goes, never what it produces; excluded from the spec hash."""

    batch_size: int = Field(8, ge=1)
    concurrency: int = Field(1, ge=1)
    threads: int | None = Field(None, ge=1)


class Spec(Strict):
    name: str = Field(pattern=NAME_RE)
    version: int = Field(ge=1)
    kind: Literal["complexity", "routing", "plan", "template", "preference"]
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
