"""The versioned complexity rule set that complexity specs reference (``rules: ../shared/rules/moe-complexity@1.yaml``).

Like the routing rule set (``ruleset.py``) the file is data: codes, severities, bounds and cue patterns, loaded with
``yaml.safe_load`` into the strict models below. Every pattern is compiled at load time and every rule id must be one
that ``complexity.py`` implements, so a typo or a bad regex stops the load with the file, line and field.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from mashbill.errors import SpecError
from mashbill.factory.codes import COMPLEXITY_RULE_IDS
from mashbill.specs.loader import load_model
from mashbill.specs.model import Strict
from mashbill.specs.yamlio import line_for
from mashbill.validators.plans.rulebase import Checks, RuleEntry
from mashbill.validators.prefilter import PatternSet
from mashbill.validators.prefilter import enabled as prefilter_enabled

CUE_GROUPS = ("utility", "recall", "recall_broad", "factual_opener", "analysis", "research", "domain", "code", "not_lookup",
              "greeting", "calculation", "complex_evidence", "maths", "task", "en_de")


class Bounds(Strict):
    long_words: int = Field(80, ge=1)
    short_lookup_words: int = Field(15, ge=1)
    short_words: int = Field(8, ge=0)
    utility_chars: int = Field(400, ge=1)
    history_upgrade: int = Field(2, ge=1)
    aic_min_bytes: int = Field(30, ge=1)
    aic_complex_below: float = Field(0.15, ge=0, le=1)
    aic_complex_words: int = Field(35, ge=1)
    aic_trivial_above: float = Field(0.55, ge=0, le=1)
    aic_trivial_words: int = Field(15, ge=1)
    long_chars: int = Field(600, ge=1)  # @3: a pasted document, data set or code counts as long whatever its words
    maths_words: int = Field(30, ge=1)  # @3: maths notation in a problem of this many words is evidence of complex
    latin_share: float = Field(0.5, ge=0, le=1)  # @3: below this share of Latin letters the EN/DE cues cannot judge
    foreign_words: int = Field(6, ge=1)  # @3: this many words without an English or German function word: another language
    trivial_max_words: int = Field(30, ge=1)  # @3: a trivial request is a short one


class Cues(Strict):
    utility: list[str] = Field(min_length=1)
    recall: list[str] = Field(min_length=1)
    recall_broad: list[str] = []
    factual_opener: list[str] = Field(min_length=1)
    analysis: list[str] = []
    research: list[str] = []
    domain: list[str] = []
    code: list[str] = []
    not_lookup: list[str] = []
    greeting: list[str] = []
    calculation: list[str] = []  # moe-complexity@2: a short calculation, conversion or encoding request
    complex_evidence: list[str] = []  # moe-complexity@3: what makes a request complex (CPLX007)
    maths: list[str] = []  # moe-complexity@3: maths notation (evidence of complex in a long enough problem)
    task: list[str] = []  # moe-complexity@3: a request to produce something (not trivial, CPLX008)
    en_de: list[str] = []  # moe-complexity@3: English and German function words (no hit: another language)


class ComplexityRuleSet(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    version: int = Field(ge=1)
    kind: Literal["complexity"]
    description: str = ""
    changelog: list[str] = []
    label_field: str = "complexity"
    classes: list[str] = ["trivial", "moderate", "complex", "memory_recall"]
    rules: list[RuleEntry]
    bounds: Bounds = Bounds()
    cues: Cues
    checks: Checks = Checks()  # dedup, leakage and PII settings, as in the routing rule set

    @model_validator(mode="after")
    def _consistent(self):
        missing = {"trivial", "moderate", "complex", "memory_recall"} - set(self.classes)
        if missing:
            raise ValueError(f"classes lacks {sorted(missing)} (the rules refer to all four)")
        return self

    @property
    def by_id(self) -> dict[str, RuleEntry]:
        return {r.id: r for r in self.rules}


def compile_cues(patterns) -> re.Pattern | None:
    """One cue group as one alternation, case-insensitive and multi-line (``^`` is a line start); None when empty."""
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.I | re.M) if patterns else None


class CompiledCues:
    """One alternation per cue group (``compile_cues``): what a group finds is its first match.

    It is found alternative by alternative, behind the prefilter (validators/prefilter.py): one scan of the text names
    the alternatives that may match it, and only those run, so most never do. At the leftmost position where any
    alternative matches, Python's alternation takes the first alternative (in order) that matches there, and that is
    the first alternative whose own leftmost match starts there. A group whose alternatives hold capturing groups (a
    back-reference would count them across the whole alternation) is searched as its one alternation."""

    def __init__(self, cues: Cues):
        self.prefilter = PatternSet() if prefilter_enabled() else None
        # each group's patterns, searched in turn: (index in the prefilter, pattern)
        self.alternatives: dict[str, list[tuple[int, re.Pattern]]] = {}
        for group in CUE_GROUPS:
            patterns = getattr(cues, group)
            alone = [re.compile(p, re.I | re.M) for p in patterns]
            if any(rx.groups for rx in alone):
                alone = [compile_cues(patterns)]
            self.alternatives[group] = [(self.prefilter.add(rx).index if self.prefilter else -1, rx)
                                        for rx in alone]
        self._indices = {group: frozenset(i for i, _ in alts) for group, alts in self.alternatives.items()}

    def find(self, group: str, text: str) -> str | None:
        """The first match of a cue group in the text, or None."""
        return self.find_groups((group,), text)[group]

    def find_groups(self, groups, text: str) -> dict[str, str | None]:
        """The first match of each of these cue groups in the text (None where a group finds none): one prefilter
        scan for all of them, and a group none of whose alternatives may match costs one set test."""
        may = self.prefilter.candidates(text) if self.prefilter is not None else None
        out: dict[str, str | None] = {}
        for group in groups:
            best = None
            if may is None or not may.isdisjoint(self._indices[group]):
                for index, rx in self.alternatives[group]:
                    if may is not None and index not in may:
                        continue
                    m = rx.search(text)
                    if m is not None and (best is None or m.start() < best.start()):  # on a tie the earlier stands
                        best = m
                        if not best.start():
                            break
            out[group] = best.group(0) if best is not None else None
        return out


def _check(rs: ComplexityRuleSet, path: Path, lines) -> None:
    for group in CUE_GROUPS:
        for j, p in enumerate(getattr(rs.cues, group)):
            try:
                re.compile(p, re.I | re.M)
            except re.error as exc:
                raise SpecError(str(path), f"invalid regular expression ({exc.msg} at position {exc.pos}) in cue "
                                f"group '{group}'", line=line_for(lines, ("cues", group, j)),
                                field=f"cues.{group}.{j}") from None
    seen: dict[str, set] = {"id": set(), "code": set()}
    for i, r in enumerate(rs.rules):
        for what in ("id", "code"):
            value = getattr(r, what)
            if value in seen[what]:
                raise SpecError(str(path), f"duplicate rule {what} '{value}'", line=line_for(lines, ("rules", i, what)),
                                field=f"rules.{i}.{what}")
            seen[what].add(value)
        if r.id not in COMPLEXITY_RULE_IDS:
            close = difflib.get_close_matches(r.id, list(COMPLEXITY_RULE_IDS), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(sorted(COMPLEXITY_RULE_IDS))})"
            raise SpecError(str(path), f"unknown complexity rule id '{r.id}'{hint}",
                            line=line_for(lines, ("rules", i, "id")), field=f"rules.{i}.id")


@lru_cache(maxsize=16)
def _load_cached(path: str, mtime_ns: int, size: int) -> ComplexityRuleSet:
    p = Path(path)
    rs, lines = load_model(p, ComplexityRuleSet)
    _check(rs, p, lines)
    return rs


def load_complexity_rules(path: str | Path) -> ComplexityRuleSet:
    p = Path(path).resolve()
    if not p.is_file():
        raise SpecError(str(p), "rule set file not found")
    st = p.stat()
    return _load_cached(str(p), st.st_mtime_ns, st.st_size)
