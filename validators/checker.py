"""One record checker, built from a resolved spec: the output schema, the rule set with its tool catalog, the taxonomy
shown to each record, and the teacher prompt's worked examples.

Generation (``factory_check``), ``mashbill validate`` in spec and file mode, review pull (corrections) and preference
building all check plans through it, so a plan gets the same verdicts wherever it is checked. A complexity spec's
rule set (``kind: complexity``) makes it check complexity labels instead (``complexity.py``), in the same places.

The taxonomy a plan is checked against comes, in this order, from the record's own metadata (``taxonomy_shown``,
written at generation), the spec, or the category block of the record's system prompt (file mode, data made
elsewhere). Where none is found, or there is no tool catalog or no worked example, the rules that need it are skipped
and ``summary()["skipped"]`` says so: never silently.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from typing import Any, Callable

from mashbill.factory.records import Verdict
from mashbill.validators.plans.drift import InstructionLine, WorkedExample, instruction_lines, worked_examples
from mashbill.validators.plans.plans import Shown
from mashbill.validators.plans.ruleset import load_rules
from mashbill.validators.plans.ruleset import RuleSet

STAGE = "validate"
# rules that need something a record may lack: rule id -> what it needs
_NEEDS = {"category-shown": "taxonomy", "creative-fit": "taxonomy", "translation-fit": "taxonomy",
          "memory-fit": "taxonomy", "tool-args": "catalog", "no-parroting": "examples",
          "no-prompt-echo": "prompt"}
_WHY = {"taxonomy": "no taxonomy shown (record metadata, --spec or a category block in the system prompt)",
        "catalog": "no tool catalog (pass --spec)", "examples": "no worked examples in the prompt",
        "prompt": "no teacher prompt (pass --spec, or records with a system prompt)",
        "plan": "the target is not a JSON plan"}

# "CATEGORIES:", "CATEGORIES FOR THIS REQUEST:", "Kategorien:", "Available experts:" ... then "- name  description"
_CAT_HEADER = re.compile(r"(?im)^[^\n]*(?:categor|kategor|experts?\b)[^\n]*:\s*$")
_CAT_LINE = re.compile(r"^\s*[-*•]\s*`?([A-Za-z][\w-]*)`?")


def taxonomy_from_prompt(text: str) -> frozenset[str] | None:
    """The category names listed under a category header of a system prompt, or None if it has no such block."""
    for m in _CAT_HEADER.finditer(text or ""):
        names = []
        for line in text[m.end():].lstrip("\n").split("\n"):
            hit = _CAT_LINE.match(line)
            if not hit:
                break
            names.append(hit.group(1))
        if names:
            return frozenset(names)
    return None


def _schema_check(schema: dict | None) -> Callable[[Any], str | None] | None:
    if schema is None:
        return None
    from mashbill.validators.plans.toolargs import compile_schema

    return compile_schema(schema)


class RecordChecker:
    def __init__(self, *, ruleset: RuleSet | None, schema: dict | None = None, catalog=None, taxonomy=None,
                 variation: bool = False, examples: tuple[WorkedExample, ...] = (), renames: dict | None = None,
                 origin: str = "", instructions: tuple[InstructionLine, ...] = (), bank=(), kind: str = "plan"):
        self.ruleset = ruleset
        self.bank = {r.id: r for r in bank}  # a spec's example bank: the rows a record was shown are its examples
        self._kind = kind
        self._shown_cache: dict[tuple, tuple[WorkedExample, ...]] = {}
        self.catalog = catalog
        self.schema = schema
        self._schema = _schema_check(schema)
        self.examples = examples
        self.instructions = instructions
        self.origin = origin
        self.spec_shown = self._spec_shown(taxonomy, variation)
        self.renames = renames if renames is not None else self._renames(taxonomy)
        self.triggers = None
        # a complexity rule set (validators/complexity/complexity.py) checks labels, not plans
        self.complexity = getattr(ruleset, "kind", None) == "complexity"
        enabled = {r.id for r in ruleset.rules if r.enabled} if ruleset is not None else set()
        self._needs = [(rule_id, need) for rule_id, need in _NEEDS.items() if rule_id in enabled]
        if ruleset is not None and not self.complexity:
            from mashbill.validators.plans.triggers import triggers_for

            self.triggers = triggers_for(ruleset)
        self.taxonomy_sources: Counter = Counter()
        self.skipped: Counter = Counter()
        self._prompt_cache: dict[str, tuple[Shown | None, tuple[WorkedExample, ...], tuple[InstructionLine, ...]]] = {}

    # ------------------------------------------------------------ construction

    @classmethod
    def for_spec(cls, rs, ruleset: RuleSet | None = None) -> "RecordChecker":
        """The checker of a spec's records: its rule set (or the one given), catalog, taxonomy and the worked examples
        of its teacher prompt. Specs without a rule file get the schema check only."""
        if "rules" not in rs.file_paths:
            ruleset = None
        elif ruleset is None:
            ruleset = load_rules(rs.file_paths["rules"])
        return cls(ruleset=ruleset, schema=rs.output_schema, catalog=rs.catalog, taxonomy=rs.taxonomy,
                   variation=bool(rs.spec.taxonomy and rs.spec.taxonomy.variation), examples=spec_examples(rs),
                   instructions=spec_instructions(rs), origin=rs.ref, bank=rs.bank, kind=rs.spec.kind)

    @classmethod
    def for_file(cls, ruleset: RuleSet, rs=None) -> "RecordChecker":
        """File mode: the rule set, plus the catalog, taxonomy and examples of ``--spec`` when given; otherwise the
        library's tool catalog and renames, and the taxonomy and examples of each record's own system prompt."""
        if getattr(ruleset, "kind", None) == "complexity":
            return cls(ruleset=ruleset, origin=rs.ref if rs is not None else "file")
        if rs is not None:
            return cls(ruleset=ruleset, catalog=rs.catalog, taxonomy=rs.taxonomy,
                       variation=bool(rs.spec.taxonomy and rs.spec.taxonomy.variation), examples=spec_examples(rs),
                       instructions=spec_instructions(rs), origin=rs.ref)
        from mashbill.specs.loader import LIBRARY, load_catalog, load_taxonomy

        catalog = load_catalog(LIBRARY / "shared" / "tools" / "precision-tools@2.yaml")
        tax = load_taxonomy(LIBRARY / "shared" / "taxonomy" / "moe-experts@1.yaml")
        return cls(ruleset=ruleset, catalog=catalog, renames=cls._renames(tax), origin="file")

    @staticmethod
    def _spec_shown(tax, variation: bool) -> Shown | None:
        if tax is None:
            return None
        names = set(tax.categories) | set(tax.structural)
        renamed = {}
        if variation:
            for canon, alts in tax.variation.renames.items():
                for a in alts:
                    names.add(a)
                    renamed[a] = canon
            names |= set(tax.variation.novel)
        return Shown(frozenset(names), renamed)

    @staticmethod
    def _renames(tax) -> dict[str, str]:
        if tax is None:
            return {}
        return {a: canon for canon, alts in tax.variation.renames.items() for a in alts}

    # ------------------------------------------------------------ per record

    @property
    def engine(self) -> str:
        return f"validators:{self.ruleset.name}@{self.ruleset.version}" if self.ruleset else "schema-only"

    def rule_codes(self) -> dict[str, str]:
        """Rule id -> code."""
        return {r.id: r.code for r in self.ruleset.rules} if self.ruleset is not None else {}

    def _from_prompt(self, system: str) -> tuple[Shown | None, tuple[WorkedExample, ...], tuple[InstructionLine, ...]]:
        hit = self._prompt_cache.get(system)
        if hit is None:
            names = taxonomy_from_prompt(system)
            shown = None if names is None else Shown(names, {n: c for n, c in self.renames.items() if n in names})
            hit = self._prompt_cache[system] = (shown, worked_examples(system), instruction_lines(system))
        return hit

    def shown_for(self, meta: dict | None, system: str | None = None) -> tuple[Shown, str]:
        meta = meta or {}
        if isinstance(meta.get("taxonomy_shown"), list):
            return Shown(frozenset(meta["taxonomy_shown"]), dict(meta.get("taxonomy_renamed") or {})), "record"
        if self.spec_shown is not None:
            return self.spec_shown, "spec"
        if system:
            shown = self._from_prompt(system)[0]
            if shown is not None:
                return shown, "system prompt"
        return Shown(None), "none"

    def check(self, inputs: dict | str, output: Any, meta: dict | None = None, *, system: str | None = None,
              schema: bool = True, stage: str = STAGE) -> list[Verdict]:
        """Every verdict for one output: the schema first (when asked), then the rule set's rules."""
        verdicts: list[Verdict] = []
        if schema and self._schema is not None:
            msg = self._schema(output)
            if msg:
                verdicts.append(Verdict("SCHEMA001", "reject", f"output does not match the output schema: {msg}",
                                        stage))
                return verdicts
        query = inputs if isinstance(inputs, str) else (inputs or {}).get("query") or ""
        if self.ruleset is None or not query or output is None:
            return verdicts
        if self.complexity:
            from mashbill.validators.complexity.complexity import check_complexity, history_turns

            return verdicts + check_complexity(self.ruleset, query, output, history_turns(inputs, meta), stage)
        from mashbill.validators.plans.routing import check_plan

        shown, source = self.shown_for(meta, system)
        self.taxonomy_sources[source] += 1
        examples, instructions = self.shown_examples(meta) or self.examples, self.instructions
        if system and not (examples and instructions):
            _, from_examples, from_lines = self._from_prompt(system)
            examples, instructions = examples or from_examples, instructions or from_lines
        have = {"taxonomy": shown.names is not None, "catalog": self.catalog is not None,
                "examples": bool(examples), "prompt": bool(instructions)}
        for rule_id, need in self._needs:
            if not have[need]:
                self.skipped[(rule_id, need)] += 1
        found = check_plan(self.ruleset, query, output, shown, self.catalog, self.triggers.analyze(query), examples,
                           instructions)
        if stage != STAGE:
            found = [replace(v, stage=stage) for v in found]
        return verdicts + found

    def shown_examples(self, meta: dict | None) -> tuple[WorkedExample, ...]:
        """The fixed examples plus the retrieved ones a record was shown (``meta.examples.ids``, rows of the spec's
        bank); () when it was shown none."""
        ids = tuple(((meta or {}).get("examples") or {}).get("ids") or ())
        rows = [self.bank[i] for i in ids if i in self.bank]
        if not rows:
            return ()
        hit = self._shown_cache.get(ids)  # one tuple per combination: the rule engine memoises per tuple
        if hit is None:
            from mashbill.specs.examples import render_rows

            hit = self._shown_cache[ids] = self.examples + worked_examples(render_rows(rows, self._kind))
        return hit

    def not_a_plan(self) -> None:
        """Count a record the rules could not look at (its target is not JSON)."""
        self.skipped[("all rules", "plan")] += 1

    def factory_check(self, stage: str = "generate") -> Callable:
        """A check for ``factory.generate.generate(checks=[...])``: the rules on each accepted record (the factory has
        checked the schema already)."""
        def rules(record) -> list[Verdict]:
            return self.check(record.input or {}, record.output, record.meta, schema=False, stage=stage)

        return rules

    def summary(self) -> dict:
        """What the rules were applied with, and what they skipped (for reports)."""
        out: dict = {"rule_set": f"{self.ruleset.name}@{self.ruleset.version}" if self.ruleset else None,
                     "checker": self.origin, "taxonomy_from": dict(sorted(self.taxonomy_sources.items()))}
        out["skipped"] = [f"{rule}: {_WHY[need]} ({n} record(s))" for (rule, need), n in sorted(self.skipped.items())]
        return out


def spec_examples(rs) -> tuple[WorkedExample, ...]:
    """The worked examples of the blocks the spec's teacher prompt uses."""
    from mashbill.specs.model import PLACEHOLDER_RE

    t = rs.spec.prompt.teacher
    used = set(PLACEHOLDER_RE.findall(t.system + "\n" + t.user))
    text = "\n".join(v for k, v in rs.prompt_file.blocks.items() if k in used)
    return worked_examples(text)


def spec_instructions(rs) -> tuple[InstructionLine, ...]:
    """The instruction lines of the spec's teacher prompt: its framings and the blocks it uses, examples left out."""
    from mashbill.specs.model import PLACEHOLDER_RE

    t = rs.spec.prompt.teacher
    used = set(PLACEHOLDER_RE.findall(t.system + "\n" + t.user))
    blocks = [v for k, v in rs.prompt_file.blocks.items() if k in used]
    chosen = rs.spec.prompt.framings or list(rs.prompt_file.framings)
    framings = [rs.prompt_file.framings[k] for k in chosen if k in rs.prompt_file.framings] if "framing" in used else []
    return instruction_lines(*framings, *blocks, t.system, t.user)
