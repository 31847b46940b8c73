"""Render the teacher's prompt and the stored training example for one seed input.

The two are separate on purpose: the training example follows the student's runtime prompt
(framing first, then the taxonomy, rules, catalog), while the teacher's prompt puts everything
fixed first and what varies per record (framing, taxonomy, query) last, so prefix caches in
llama.cpp and vLLM reuse the long shared beginning.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from mashbill.hashing import sha256_text
from mashbill.specs.examples import VARIABLE as EXAMPLES_VAR
from mashbill.specs.examples import render_rows
from mashbill.specs.loader import ResolvedSpec
from mashbill.specs.model import PLACEHOLDER_RE
from mashbill.specs.taxonomy import ShownTaxonomy, fixed_taxonomy, sample_taxonomy


def render(template: str, values: dict[str, str]) -> str:
    # Unknown names were rejected when the spec was loaded, so a KeyError here is a bug.
    return PLACEHOLDER_RE.sub(lambda m: str(values[m.group(1)]), template)


@dataclass(frozen=True)
class RenderedPrompt:
    teacher_messages: tuple[dict, ...]
    training_messages: tuple[dict, ...]  # system + user; the assistant target is appended after generation
    framing: str | None
    taxonomy: ShownTaxonomy | None
    examples: dict | None = None  # the retrieved examples shown: bank file, its sha256, row ids (factory.generate.examples)

    def meta(self) -> dict:
        meta: dict = {"prompt_variant": self.framing}
        if self.taxonomy is not None:
            meta["taxonomy_shown"] = list(self.taxonomy.names)
            meta["taxonomy_renamed"] = dict(self.taxonomy.renamed)
        if self.examples is not None:
            meta["examples"] = dict(self.examples)
        return meta


def record_rng(record_id: str, seed: int) -> random.Random:
    """A per-record RNG: the same record always gets the same framing and taxonomy, whatever the order."""
    return random.Random(int(sha256_text(f"{seed}:{record_id}")[:16], 16))


def record_choices(rs: ResolvedSpec, record_id: str) -> tuple[str | None, ShownTaxonomy | None]:
    """The framing and the taxonomy a record of this spec is shown: drawn from the record's own RNG only, so
    anything holding the spec and the record id (GGUF verification on a snapshot row) rebuilds them exactly."""
    spec = rs.spec
    rng = record_rng(record_id, spec.teacher.sampling.seed)
    framing = rng.choice(spec.prompt.framings) if spec.prompt.framings else None
    shown = None
    if rs.taxonomy is not None:
        shown = sample_taxonomy(rs.taxonomy, rng) if spec.taxonomy.variation else fixed_taxonomy(rs.taxonomy)
    return framing, shown


def record_meta(rs: ResolvedSpec, record_id: str) -> dict:
    """The prompt part of the metadata generation stores with a record (framing, taxonomy shown, renames)."""
    framing, shown = record_choices(rs, record_id)
    return RenderedPrompt((), (), framing, shown).meta()


def render_prompt(rs: ResolvedSpec, inputs: dict, record_id: str, *, examples: tuple = (),
                  examples_meta: dict | None = None) -> RenderedPrompt:
    """The teacher's and the training prompt of one input; `examples` are the bank rows (specs.examples.BankRow)
    rendered into {{ retrieved_examples }} (chosen by factory.generate.examples), `examples_meta` what the record
    stores about them."""
    spec = rs.spec
    values: dict[str, str] = dict(rs.prompt_file.blocks)
    values.update({k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in inputs.items()})
    values.setdefault("lang", "")
    framing, shown = record_choices(rs, record_id)
    if framing is not None:
        values["framing"] = rs.prompt_file.framings[framing]
    if shown is not None:
        values["taxonomy"] = shown.block
    if rs.catalog is not None:
        values["tool_catalog"] = rs.tool_catalog_text
    values["output_schema"] = json.dumps(rs.output_schema, ensure_ascii=False)
    if spec.examples is not None:
        values[EXAMPLES_VAR] = render_rows(examples, spec.kind)

    def messages(t) -> tuple[dict, ...]:
        return ({"role": "system", "content": render(t.system, values)},
                {"role": "user", "content": render(t.user, values)})

    return RenderedPrompt(messages(spec.prompt.teacher), messages(spec.prompt.training), framing, shown,
                          examples_meta)
