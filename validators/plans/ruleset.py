"""The versioned routing rule set that plan specs reference (``rules: ../shared/rules/moe-routing@6.yaml``).

The file is data: codes, severities, bounds, trigger patterns. It is loaded with ``yaml.safe_load`` into the
pydantic models below (unknown keys are rejected) and every pattern is compiled up front, so a bad regex is a
load error naming the file, line and field, never a crash halfway through a run.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from mashbill.errors import SpecError
from mashbill.factory.codes import RULE_IDS
from mashbill.specs.loader import LIBRARY
from mashbill.specs.loader import load_model
from mashbill.specs.model import Strict
from mashbill.specs.yamlio import line_for
from mashbill.validators.complexity.complexity_rules import load_complexity_rules
from mashbill.validators.plans.rulebase import Checks, RuleEntry

DEFAULT_RULES = LIBRARY / "shared" / "rules" / "moe-routing@8.yaml"


class TaskCount(Strict):
    min: int = Field(1, ge=0)
    max: int = Field(4, ge=1)


class CategoryNames(Strict):
    research: str = "research"
    precision: str = "precision_tools"
    dynamic: str = "dynamic"
    legal_advisor: str = "legal_advisor"
    code: list[str] = ["code_reviewer", "agentic_coder"]
    creative: str = "creative_writer"
    translation: str = "translation"
    memory: str = "memory_recall"


class Mask(Strict):
    name: str
    replace: str
    pattern: str
    requires: list[str] = []  # the mask only runs when the text holds one of these (a cheap pre-check)


class Trigger(Strict):
    any: list[str] = Field(min_length=1)
    all: list[str] = []
    none: list[str] = []
    yields_to: list[str] = []  # intents that, when they fire, make this (generic) trigger redundant
    requires: list[str] = []  # the trigger only runs when the masked query holds one of these (a cheap pre-check)


class Units(Strict):
    """What pint's unit registry lacks or reads differently (validators/plans/units.py): aliases map a word to a pint
    unit of the same dimension; ignored words are never the unit a conversion starts from ("7 am to 9 pm")."""
    aliases: dict[str, str] = {}
    ignore: list[str] = []
    # more words between a quantity's unit and the unit asked for ("equals what in", "?="), space-separated tokens
    connectors: list[str] = []
    # the unit asked for may come first when the query starts with it ("hectares in 39,461 acres")
    target_first: bool = False
    # more phrases that ask for the unit before the quantity, as "how many" does ("wie viel Milliliter sind ...")
    how_many: list[str] = []


# Contexts computed in code rather than by a pattern (validators/plans/triggers.py): usable in `all` and `none`.
COMPUTED_CONTEXTS = {"unit_pair": "a quantity converted between two units of the same dimension (pint)"}


class Intent(Strict):
    tools: list[str] = Field(min_length=1)
    triggers: list[Trigger] = Field(min_length=1)


class LegalSpec(Strict):
    citation: list[str] = Field(min_length=1)
    laws: dict[str, list[str]]


class ResearchBeforeCode(Strict):
    domain: list[str] = Field(min_length=1)
    needs: list[str] = []


class RequestTriggers(Strict):
    """An unmistakable request of one kind: creative writing (creative-fit, FIT001) or a translation (translation-fit,
    FIT002), which wants a task of that category. Evaluated like an intent's triggers, on the masked query."""
    triggers: list[Trigger] = Field(min_length=1)
    # (creative_request, @8) where the category is not shown, a plan of research and precision tools only is still
    # no answer (a web search writes no story), as translation-fit and memory-fit always held
    not_search_only: bool = False


class CategoryRequest(Strict):
    """A request that plainly needs one category (category-fit, FIT004): when a trigger fires and the category (or
    one of `served_by`) was shown, the plan must use it. Evaluated like an intent's triggers, on the masked query."""
    triggers: list[Trigger] = Field(min_length=1)
    served_by: list[str] = []  # other canonical categories that serve the request as well (agentic_coder for code)


class Truncation(Strict):
    """The word lists of task-complete (PLAN011, validators/plans/truncation.py), lower-case, English and German."""
    dangling: list[str] = Field(min_length=1)  # never the last word of a request: articles, conjunctions ...
    stranded: list[str] = []  # prepositions a question may end with ("what is it made of"); dangling elsewhere
    question: list[str] = []  # the words a question starts with
    joins: list[str] = []  # words that start a request of their own after a comma ("and", "then", "dann")
    pronouns: list[str] = []  # articles that are also pronouns (die, das): dangling only after a preposition


class RecallRequest(Strict):
    """A question about an earlier turn of the conversation (memory-fit, FIT003). The phrases are the complexity rule
    set's `recall` cues, read from that file (a path relative to this one), so one list serves both rule sets."""
    cues: str
    # (@8) where memory_recall is not shown, a creative_writer task cannot answer either (it would invent what was
    # said), unless the request is also a creative one ("write a poem about what I told you")
    creative_cannot_recall: bool = False


class SearchQuery(Strict):
    """What a research task's search_query must not look like (search-query-text, PLAN009). The patterns are
    matched case-sensitively against the whole stripped query: camelCase is only visible in the case."""
    identifier: list[str] = Field(min_length=1)


class Fidelity(Strict):
    """Argument fidelity: which tools' numbers must come from the query, which constants any plan may use, and the
    unit names unit_convert's units are matched against (canonical name -> names a query may use)."""

    tools: list[str] = ["calculate", "solve_equation", "statistics_calc", "prime_factorize", "gcd_lcm",
                        "unit_convert", "date_add"]
    constants: list[float] = [0, 1, 2, 3, 10, 100, 1000]
    tolerance: float = Field(1e-6, gt=0, lt=0.1)
    units: dict[str, list[str]] = {}
    # (@6) read the query's notation for the unit asked for: "10 lbs ?= kg", "5 m =? ft", "7 ? kg"
    read_notation: bool = False
    # (@7) argument names whose values choose how a tool computes (operation, algorithm, mode ...), not what it
    # computes on: tool-unfounded (HR009) does not count them as coming from the query
    option_args: list[str] = []

    @field_validator("option_args")
    @classmethod
    def _argument_names(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if not re.fullmatch(r"[a-z][a-z0-9_]*", a)]
        if bad:
            raise ValueError(f"not an argument name (lower-case letters, digits, _): {bad}")
        return v


class NumberWords(Strict):
    """Spelled numbers read as digits (validators/plans/numwords.py) before the triggers and argument checks read a query."""

    languages: list[Literal["en", "de", "fr", "es", "pt", "it", "nl", "da"]] = ["en", "de"]


class Drift(Strict):
    """No parroting, no drift (validators/plans/drift.py)."""

    parrot_share: float = Field(0.6, gt=0, le=1)  # share of an example task's words copied without being in the query
    example_relevant: float = Field(0.3, gt=0, le=1)  # query/example-request similarity at which copying is fine
    min_shared: int = Field(1, ge=1)  # content words a task must share with the query
    # how words meet: "prefix" (their first 5 letters, moe-routing@2-3) or "stem" (whole words less a suffix, @4)
    match: Literal["prefix", "stem"] = "prefix"
    # no-prompt-echo (@4): the share of a task text's words that stand in one instruction line of the prompt
    echo_share: float = Field(0.8, gt=0, le=1)
    # (@6) a task written in the other language than the query (English for a German request) cannot share its
    # words: it counts as related when it shares a root or a number, or the query states no number
    cross_language: bool = False
    # no garbled copy (@8, drift.garbled): a task copying the request with a long word written as another that only
    # begins like it
    garble_min_letters: int = Field(8, ge=4)
    garble_copy_share: float = Field(0.6, gt=0, le=1)
    garble_prefix_share: float = Field(0.7, gt=0, le=1)
    garble_typo_ratio: float = Field(0.8, gt=0, le=1)


class RuleSet(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    version: int = Field(ge=1)
    description: str = ""
    changelog: list[str] = []
    task_count: TaskCount = TaskCount()
    categories: CategoryNames = CategoryNames()
    legal_tool: str = "legal_get_paragraph"
    rules: list[RuleEntry]
    masks: list[Mask] = []
    contexts: dict[str, list[str]] = {}
    extra_contexts: dict[str, list[str]] = {}
    intents: dict[str, Intent] = {}
    units: Units = Units()
    legal: LegalSpec | None = None
    research_before_code: ResearchBeforeCode | None = None
    creative_request: RequestTriggers | None = None
    translation_request: RequestTriggers | None = None
    recall_request: RecallRequest | None = None
    category_request: dict[str, CategoryRequest] = {}
    truncation: Truncation | None = None
    search_query: SearchQuery | None = None
    fidelity: Fidelity = Fidelity()
    number_words: NumberWords | None = None
    drift: Drift = Drift()
    checks: Checks = Checks()
    _recall: tuple[str, ...] = PrivateAttr(default=())  # recall_request's patterns, read at load time

    @property
    def recall_patterns(self) -> tuple[str, ...]:
        return self._recall

    @model_validator(mode="after")
    def _consistent(self):
        ids = [r.id for r in self.rules]
        dupes = {i for i in ids if ids.count(i) > 1}
        if dupes:
            raise ValueError(f"duplicate rule ids: {sorted(dupes)}")
        codes = [r.code for r in self.rules]
        dupes = {c for c in codes if codes.count(c) > 1}
        if dupes:
            raise ValueError(f"duplicate rule codes: {sorted(dupes)}")
        known = set(self.contexts) | set(self.extra_contexts) | set(COMPUTED_CONTEXTS)
        both = set(self.contexts) & set(self.extra_contexts)
        if both:
            raise ValueError(f"contexts defined twice: {sorted(both)}")
        for name, intent in self.intents.items():
            for t in intent.triggers:
                for c in t.all + t.none:
                    if c not in known:
                        raise ValueError(f"intent '{name}' refers to unknown context '{c}'")
                for other in t.yields_to:
                    if other not in self.intents or other == name:
                        raise ValueError(f"intent '{name}' yields to unknown intent '{other}'")
        trigger_levels(self)  # refuses a yields_to cycle
        if self.translation_request and self.translation_request.not_search_only:
            raise ValueError("translation_request.not_search_only: translation-fit always refuses a search-only plan")
        requests = [(s, getattr(self, s)) for s in ("creative_request", "translation_request")]
        requests += [(f"category_request.{c}", r) for c, r in self.category_request.items()]
        for section, req in requests:
            for t in (req.triggers if req else []):
                for c in t.all + t.none:
                    if c not in known:
                        raise ValueError(f"{section} refers to unknown context '{c}'")
                if t.yields_to:
                    raise ValueError(f"{section} triggers cannot yield to intents")
        if self.research_before_code:
            for c in self.research_before_code.needs:
                if c not in known:
                    raise ValueError(f"research_before_code needs unknown context '{c}'")
        if self.task_count.min > self.task_count.max:
            raise ValueError("task_count.min is larger than task_count.max")
        return self

    @property
    def by_id(self) -> dict[str, RuleEntry]:
        return {r.id: r for r in self.rules}

    def all_contexts(self) -> dict[str, list[str]]:
        return {**self.contexts, **self.extra_contexts}


def trigger_levels(rs: "RuleSet") -> dict[str, list[int]]:
    """Per intent, the evaluation level of each trigger: 0 without yields_to, else one more than the highest level
    of the intents it yields to (the rule set refuses cycles at load time)."""
    memo: dict[str, int] = {}

    def intent_level(name: str, stack: tuple = ()) -> int:
        if name not in memo:
            if name in stack:
                raise ValueError(f"yields_to cycle: {' -> '.join(stack + (name,))}")
            memo[name] = max(trigger_level(t, stack + (name,)) for t in rs.intents[name].triggers)
        return memo[name]

    def trigger_level(t, stack: tuple) -> int:
        return 1 + max(intent_level(y, stack) for y in t.yields_to) if t.yields_to else 0

    return {name: [trigger_level(t, (name,)) for t in intent.triggers] for name, intent in rs.intents.items()}


def _compile(pattern: str, where: str, path: Path, lines, loc: tuple, flags=re.IGNORECASE) -> re.Pattern:
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise SpecError(str(path), f"invalid regular expression ({exc.msg} at position {exc.pos}) in {where}",
                        line=line_for(lines, loc), field=".".join(map(str, loc))) from None


def _check_patterns(rs: RuleSet, path: Path, lines) -> None:
    for i, m in enumerate(rs.masks):
        _compile(m.pattern, f"mask '{m.name}'", path, lines, ("masks", i, "pattern"))
    for group in ("contexts", "extra_contexts"):
        for name, pats in getattr(rs, group).items():
            for j, p in enumerate(pats):
                _compile(p, f"context '{name}'", path, lines, (group, name, j))
    for name, intent in rs.intents.items():
        for ti, t in enumerate(intent.triggers):
            for j, p in enumerate(t.any):
                _compile(p, f"intent '{name}'", path, lines, ("intents", name, "triggers", ti, "any", j))
    if rs.legal:
        law_alt = law_alternation(rs)
        for j, p in enumerate(rs.legal.citation):
            _compile(p.replace("LAW", law_alt), "legal citation", path, lines, ("legal", "citation", j))
        for law, pats in rs.legal.laws.items():
            for j, p in enumerate(pats):
                _compile(p, f"law '{law}'", path, lines, ("legal", "laws", law, j))
    if rs.research_before_code:
        for j, p in enumerate(rs.research_before_code.domain):
            _compile(p, "research_before_code domain", path, lines, ("research_before_code", "domain", j))
    requests = [((s,), getattr(rs, s)) for s in ("creative_request", "translation_request")]
    requests += [(("category_request", c), r) for c, r in rs.category_request.items()]
    for loc, req in requests:
        for ti, t in enumerate(req.triggers if req else []):
            for j, p in enumerate(t.any):
                _compile(p, ".".join(loc), path, lines, (*loc, "triggers", ti, "any", j))
    for j, p in enumerate(rs.search_query.identifier if rs.search_query else []):
        _compile(p, "search_query identifier", path, lines, ("search_query", "identifier", j), flags=0)


def law_alternation(rs: RuleSet) -> str:
    pats = [p for ps in (rs.legal.laws.values() if rs.legal else ()) for p in ps]
    return "(?:" + "|".join(sorted(pats, key=len, reverse=True)) + ")"


@lru_cache(maxsize=16)
def _load_cached(path: str, mtime_ns: int, size: int) -> RuleSet:
    p = Path(path)
    rs, lines = load_model(p, RuleSet)
    _check_patterns(rs, p, lines)
    _check_rule_ids(rs, p, lines)
    if rs.recall_request:
        rs._recall = _recall_cues(rs.recall_request.cues, p, lines)
    return rs


def _recall_cues(rel: str, path: Path, lines) -> tuple[str, ...]:
    """The `recall` cues of the complexity rule set that recall_request names (loaded and checked by its own loader)."""
    cue_file = (path.parent / rel).resolve()
    if not cue_file.is_file():
        raise SpecError(str(path), f"recall_request.cues names no file: {rel} (looked at {cue_file})",
                        line=line_for(lines, ("recall_request", "cues")), field="recall_request.cues")
    return tuple(load_complexity_rules(cue_file).cues.recall)


def _check_rule_ids(rs: RuleSet, path: Path, lines) -> None:
    """A rule id the code does not implement is refused here: a mistyped id would otherwise never run. The ids are
    registered with their codes (factory/codes.py); a test checks that routing.RULES implements exactly them."""
    for i, r in enumerate(rs.rules):
        if r.id not in RULE_IDS:
            close = difflib.get_close_matches(r.id, list(RULE_IDS), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(sorted(RULE_IDS))})"
            raise SpecError(str(path), f"unknown rule id '{r.id}'{hint}", line=line_for(lines, ("rules", i, "id")),
                            field=f"rules.{i}.id")


def load_ruleset(path: str | Path = DEFAULT_RULES) -> RuleSet:
    p = Path(path).resolve()
    if not p.is_file():
        raise SpecError(str(p), "rule set file not found")
    st = p.stat()
    return _load_cached(str(p), st.st_mtime_ns, st.st_size)


def load_rules(path: str | Path):
    """The rule set a spec's ``rules:`` (or ``--rules``) names: a complexity rule set when the file declares
    ``kind: complexity`` (``complexity_rules.load_complexity_rules``), else a routing rule set (``load_ruleset``)."""
    return load_complexity_rules(path) if is_complexity_file(path) else load_ruleset(path)


def is_complexity_file(path: str | Path) -> bool:
    """Whether a rule set file declares ``kind: complexity`` (a top-level line; the routing rule set has none)."""
    try:
        with open(path, encoding="utf-8") as f:
            return any(re.match(r"kind:\s*['\"]?complexity\b", line) for line in f)
    except (OSError, UnicodeDecodeError):
        return False
