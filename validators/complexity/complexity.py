"""The complexity rules (``CPLX001``-``CPLX006``): one function per rule id of the complexity rule set.

The reference estimator (DOMAIN.md §6.1) overrides any model with two deterministic steps, utility phrasings ->
trivial and recall phrases -> memory_recall, and falls back to a word-count and marker heuristic. A label that
contradicts an override, or the heuristic where it is unambiguous (a long request called trivial, a short factual
lookup called complex, a recall label for a request that recalls nothing), is rejected: accepted must mean right.
Where the label merely disagrees with the full heuristic the record is flagged (CPLX006) for a reviewer, since the
heuristic itself is what a trained classifier should improve on.

The rules look at the user's query only, plus the number of history turns a record carries (§6.2's upgrade).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Callable

from mashbill.factory.records import Verdict
from mashbill.validators.complexity.complexity_rules import CUE_GROUPS, CompiledCues, ComplexityRuleSet

STAGE = "validate"


_COMPILED: dict[int, tuple[ComplexityRuleSet, CompiledCues]] = {}


def cues_for(rs: ComplexityRuleSet) -> CompiledCues:
    """The rule set's cues, compiled once per loaded rule set (the loader caches rule sets by file)."""
    hit = _COMPILED.get(id(rs))
    if hit is None or hit[0] is not rs:
        hit = _COMPILED[id(rs)] = (rs, CompiledCues(rs.cues))
    return hit[1]


def compressibility(text: str) -> float:
    """1 - zlib(level 9) length / raw length, on UTF-8 bytes (the reference's AIC signal)."""
    raw = text.encode("utf-8")
    return 1 - len(zlib.compress(raw, 9)) / len(raw) if raw else 0.0


@dataclass
class QueryFacts:
    """What the rules need to know about one query, computed once."""

    query: str
    words: int
    history: int
    hits: dict[str, str | None] = field(default_factory=dict)  # cue group -> first match

    def hit(self, group: str) -> str | None:
        return self.hits.get(group)


_WHOLE_QUERY_GROUPS = tuple(g for g in CUE_GROUPS if g != "utility")


def analyze(rs: ComplexityRuleSet, query: str, history: int = 0) -> QueryFacts:
    cues = cues_for(rs)
    facts = QueryFacts(query, len(query.split()), history)
    facts.hits = cues.find_groups(_WHOLE_QUERY_GROUPS, query)
    facts.hits["utility"] = cues.find("utility", query[:rs.bounds.utility_chars])  # its head only
    return facts


def heuristic(rs: ComplexityRuleSet, facts: QueryFacts) -> tuple[str, str]:
    """The reference's label without its DeBERTa step (§6.1 steps 1, 2 and 4, then §6.2's history upgrade), and why."""
    label, why = _heuristic(rs, facts)
    if label in ("trivial", "moderate") and facts.history >= rs.bounds.history_upgrade:
        return "memory_recall", f"{label} upgraded: {facts.history} history turns"
    return label, why


def _heuristic(rs: ComplexityRuleSet, f: QueryFacts) -> tuple[str, str]:
    b = rs.bounds
    if f.hit("utility"):
        return "trivial", f"utility phrasing '{f.hit('utility')}'"
    recall = f.hit("recall") or f.hit("recall_broad")
    if recall:
        return "memory_recall", f"recall phrase '{recall}'"
    if f.words >= b.long_words:
        return "complex", f"{f.words} words"
    for group in ("analysis", "research"):
        if f.hit(group):
            return "complex", f"{group} marker '{f.hit(group)}'"
    if f.words <= b.short_lookup_words and f.hit("factual_opener"):
        return "trivial", f"short factual opener '{f.hit('factual_opener').strip()}'"
    marker = f.hit("domain") or f.hit("code")
    if f.words <= b.short_words and not marker:
        return "trivial", f"{f.words} words, no domain or code marker"
    if len(f.query.encode("utf-8")) >= b.aic_min_bytes:
        c = compressibility(f.query)
        if c < b.aic_complex_below and f.words >= b.aic_complex_words:
            return "complex", f"compressibility {c:.2f}"
        if c > b.aic_trivial_above and f.words <= b.aic_trivial_words:
            return "trivial", f"compressibility {c:.2f}"
    if marker:
        return "moderate", f"domain or code marker '{marker}'"
    return "moderate", "default"


# ---------------------------------------------------------------- the rules: (rule set, facts, label) -> detail or None

Rule = Callable[[ComplexityRuleSet, QueryFacts, str], "str | None"]
RULES: dict[str, Rule] = {}


def rule(rule_id: str):
    def register(fn: Rule) -> Rule:
        RULES[rule_id] = fn
        return fn
    return register


@rule("recall-cue")
def _recall_cue(rs, f, label):
    if f.hit("recall") and not f.hit("utility") and label != "memory_recall":
        return f"recall phrase '{f.hit('recall')}' labelled {label}, not memory_recall"
    return None


@rule("utility-phrase")
def _utility(rs, f, label):
    if f.hit("utility") and label != "trivial":
        return f"utility phrasing '{f.hit('utility')}' labelled {label}, not trivial"
    return None


@rule("long-not-trivial")
def _long(rs, f, label):
    if label == "trivial" and f.words >= rs.bounds.long_words and not f.hit("utility"):
        return f"{f.words} words labelled trivial (>= {rs.bounds.long_words})"
    return None


@rule("recall-unfounded")
def _unfounded(rs, f, label):
    if label == "memory_recall" and not (f.hit("recall") or f.hit("recall_broad")) and f.history == 0:
        return "memory_recall without a recall phrase or history turns"
    return None


@rule("short-lookup-not-complex")
def _short_lookup(rs, f, label):
    if label != "complex":
        return None
    if f.hit("greeting") and f.words <= rs.bounds.short_words:
        return f"short greeting ({f.words} words, '{f.hit('greeting').strip()}') labelled complex"
    if f.words > rs.bounds.short_lookup_words:
        return None
    if any(f.hit(g) for g in ("analysis", "research", "domain", "code", "not_lookup", "recall", "recall_broad")):
        return None
    if f.hit("calculation"):  # moe-complexity@2: a conversion or sum is one tool call, whatever its opener
        return (f"short calculation, conversion or encoding ({f.words} words, '{f.hit('calculation').strip()}', no "
                f"analysis, research, domain, code or maths marker) labelled complex")
    if not f.hit("factual_opener"):
        return None
    return (f"short factual lookup ({f.words} words, opener '{f.hit('factual_opener').strip()}', no analysis, "
            f"research, domain, code, maths or how-to marker) labelled complex")


def latin_share(text: str) -> float:
    """The share of letters that are Latin (ASCII or Latin-1/Extended), 1.0 without letters."""
    letters = [c for c in text if c.isalpha()]
    return sum(c < "\u0250" for c in letters) / len(letters) if letters else 1.0


def complex_evidence(rs, f, unreadable: bool = True) -> str | None:
    """Why a request may be complex (moe-complexity@3), or None: long, long pasted input, a complex_evidence cue
    (compare, design, implement a whole game or algorithm, standards, research, step by step), maths notation in a
    long enough problem, or (`unreadable`) a language the English and German cues cannot read."""
    b = rs.bounds
    if f.words >= b.long_words:
        return f"{f.words} words"
    if len(f.query) >= b.long_chars:
        return f"{len(f.query)} characters"
    if f.hit("complex_evidence"):
        return f"cue '{f.hit('complex_evidence').strip()}'"
    if f.hit("maths") and f.words >= b.maths_words:
        return f"maths notation in {f.words} words"
    if not unreadable:
        return None
    share = latin_share(f.query)
    if share < b.latin_share:
        return f"{share:.0%} Latin letters (the cues are English and German)"
    if rs.cues.en_de and f.words >= b.foreign_words and not f.hit("en_de"):
        return f"{f.words} words without an English or German function word (the cues cannot read it)"
    return None


@rule("complex-without-evidence")
def _complex_without_evidence(rs, f, label):
    # One code per wrong label: a recall or utility request is CPLX001's or CPLX002's, a short lookup CPLX005's.
    if label != "complex" or _recall_cue(rs, f, label) or _utility(rs, f, label) or _short_lookup(rs, f, label):
        return None
    if complex_evidence(rs, f):
        return None
    return (f"complex without complexity evidence ({f.words} words; no compare/analyse/design/implement-a-whole-thing, "
            f"standards, research or step-by-step cue, no long input or maths problem)")


@rule("trivial-needs-work")
def _trivial_needs_work(rs, f, label):
    # One code per wrong label: a utility request is CPLX002's, a recall question CPLX001's, a long one CPLX003's.
    if label != "trivial" or f.hit("utility") or _recall_cue(rs, f, label) or f.words >= rs.bounds.long_words:
        return None
    for group in ("calculation", "code", "not_lookup", "task"):
        if f.hit(group):
            return f"trivial, but a {group} cue '{f.hit(group).strip()}' asks for work"
    why = complex_evidence(rs, f, unreadable=False)
    if why:
        return f"trivial, but {why} says complex"
    if f.words > rs.bounds.trivial_max_words:
        return f"trivial for {f.words} words (> {rs.bounds.trivial_max_words})"
    return None


@rule("moderate-out-of-range")
def _moderate_out_of_range(rs, f, label):
    """moderate is one concrete job: a long input is complex by the class definitions (as CPLX003 holds for trivial),
    and a short factual lookup with no cue of work or a short greeting is trivial (as CPLX005 holds for complex)."""
    if label != "moderate" or _recall_cue(rs, f, label) or _utility(rs, f, label):
        return None
    b = rs.bounds
    if f.words >= b.long_words or len(f.query) >= b.long_chars:
        return f"moderate for a long input ({f.words} words, {len(f.query)} characters): complex by the class definitions"
    if f.hit("greeting") and f.words <= b.short_words:  # as CPLX005 holds for complex
        return f"moderate for a short greeting ({f.words} words, '{f.hit('greeting').strip()}'): trivial"
    if f.words > b.short_lookup_words or not f.hit("factual_opener"):
        return None
    work = next((g for g in ("calculation", "code", "not_lookup", "task", "domain", "complex_evidence", "maths")
                 if f.hit(g)), None)
    if work:
        return None
    return (f"moderate for a short factual lookup ({f.words} words, opener '{f.hit('factual_opener').strip()}', no cue "
            f"of work): trivial by the class definitions")


@rule("heuristic-agrees")
def _agrees(rs, f, label):
    expected, why = heuristic(rs, f)
    return None if expected == label else f"labelled {label}; the reference heuristic says {expected} ({why})"


# ---------------------------------------------------------------- a record

def history_turns(inputs: Any, meta: dict | None = None) -> int:
    """History turns a record carries: ``input.history`` (a list of turns) or ``meta.history_turns``."""
    if isinstance(inputs, dict) and isinstance(inputs.get("history"), list):
        return len(inputs["history"])
    n = (meta or {}).get("history_turns")
    return n if isinstance(n, int) and n > 0 else 0


def label_of(rs: ComplexityRuleSet, output: Any) -> str | None:
    value = output.get(rs.label_field) if isinstance(output, dict) else None
    return value if isinstance(value, str) else None


def check_complexity(rs: ComplexityRuleSet, query: str, output: Any, history: int = 0,
                     stage: str = STAGE) -> list[Verdict]:
    """Every enabled rule's verdict on one label (none when the output carries no label: the schema says so)."""
    label = label_of(rs, output)
    if label is None or not query:
        return []
    facts = analyze(rs, query, history)
    out = []
    for entry in rs.rules:
        if not entry.enabled:
            continue
        detail = RULES[entry.id](rs, facts, label)  # the loader refuses ids without an implementation
        if detail:
            out.append(Verdict(entry.code, entry.severity, detail, stage))
    return out
