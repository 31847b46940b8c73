"""Evaluating a rule set's triggers on a query: precision intents, § citations, implementation domains.

The trigger language is defined in the rule set file (see its header): masks first (placeholders for dates,
phone numbers, directive numbers, standards...), then named contexts, then intents whose triggers combine
``any`` patterns with required (``all``) and forbidding (``none``) contexts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mashbill.validators.complexity.complexity_rules import compile_cues
from mashbill.validators.plans.digitgate import gated
from mashbill.validators.plans.numwords import for_rules
from mashbill.validators.plans.ruleset import RuleSet, law_alternation, trigger_levels
from mashbill.validators.plans.truncation import CutWords
from mashbill.validators.prefilter import PatternSet

_FLAGS = 0  # case-insensitivity comes from lower-casing both the text and the patterns (see _lower_pattern)


def _lower_pattern(p: str) -> str:
    """Lower-case a pattern's literals, leaving escapes (\\S, \\W, \\D...) and group names alone. Searching
    lower-cased text with it is equivalent to re.IGNORECASE and several times faster in CPython's engine."""
    out, i, n = [], 0, len(p)
    while i < n:
        ch = p[i]
        if ch == "\\" and i + 1 < n:
            j = i + 2
            if p[i + 1] in "Np" and j < n and p[j] == "{":
                j = p.index("}", j) + 1
            out.append(p[i:j])
            i = j
        elif p.startswith("(?P<", i) or p.startswith("(?P=", i):
            j = p.index(">" if p[i + 3] == "<" else ")", i)
            out.append(p[i:j + 1])
            i = j + 1
        else:
            out.append(ch.lower())
            i += 1
    return "".join(out)


_WORD_START = re.compile(r"[0-9a-zäöüß]|\\[dw]")


def _fast_boundary(p: str) -> str:
    """Rewrite "(?<!\\w)(?:a|b)" as "\\b(?:a|b)" when every alternative starts with a word character (then the two
    are equivalent); a leading lookbehind keeps CPython from scanning for the first character quickly."""
    out, i = [], 0
    marker = "(?<!\\w)(?:"
    while True:
        k = p.find(marker, i)
        if k < 0:
            out.append(p[i:])
            return "".join(out)
        start = k + len("(?<!\\w)")
        depth, j, alts, cur = 0, start, [], start + 3
        while j < len(p):
            c = p[j]
            if c == "\\":
                j += 2
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    alts.append(p[cur:j])
                    break
            elif c == "|" and depth == 1:
                alts.append(p[cur:j])
                cur = j + 1
            j += 1
        ok = bool(alts) and all(_WORD_START.match(a) for a in alts)
        out.append(p[i:k])
        out.append("\\b" if ok else "(?<!\\w)")
        i = start


def _compile_one(pattern: str) -> re.Pattern:
    return gated(re.compile(_fast_boundary(_lower_pattern(pattern)), _FLAGS))  # (digitgate.py: same answers)


def _alt_of(patterns: list[str]) -> re.Pattern:
    return _compile_one("|".join(f"(?:{p})" for p in patterns))


@dataclass(frozen=True)
class Citation:
    law: str  # canonical abbreviation, e.g. "BGB"
    paragraphs: tuple[str, ...]  # e.g. ("823",) or ("280", "281") for "§§ 280, 281 BGB"
    text: str  # as cited

    @property
    def paragraph(self) -> str:
        return self.paragraphs[0]


_QUALIFIED = re.compile(r"(?i)(abs\.?|absatz|s\.|satz|nr\.?|nummer|lit\.?|buchst\.?|alt\.?|hs\.?|uabs\.?|"
                        r"[ivx]+\b)?\s*(\d+[a-z]?)\b")


def _paragraphs(cited: str, first: str) -> tuple[str, ...]:
    """The paragraph numbers of a citation: the first one plus list items ("§§ 280, 281"), never the numbers of
    qualifiers such as "Abs. 2" or "Satz 1"."""
    out = [first.lower()]
    start = cited.find(first)
    for m in _QUALIFIED.finditer(cited, start + len(first)):
        if m.group(1) is None and m.group(2).lower() not in out:
            before = cited[:m.start()].rstrip()
            if before.endswith((",", "und", "and", "bis", "-", "–")):
                out.append(m.group(2).lower())
    return tuple(out)


@dataclass(frozen=True)
class QueryTriggers:
    query: str
    masked: str
    contexts: frozenset[str]  # the contexts that were evaluated and hold
    intents: dict[str, tuple[str, ...]] = field(default_factory=dict)  # intent -> accepted tools
    evidence: dict[str, str] = field(default_factory=dict)  # intent -> matched text
    citations: tuple[Citation, ...] = ()
    impl: str | None = None  # the implementation-domain term when RESEARCH-BEFORE-CODE applies
    niche: str | None = None
    creative: str | None = None  # the words of an unmistakable creative-writing request (creative-fit)
    translation: str | None = None  # ... of an unmistakable translation request (translation-fit)
    recall: str | None = None  # ... of a question about an earlier turn (memory-fit)
    categories: dict[str, str] = field(default_factory=dict)  # category -> the words of a request needing it

    @property
    def precision(self) -> bool:
        return bool(self.intents)


class AnyOf:
    """A trigger's `requires` strings: ``search`` is truthy when the text holds any of them, as the alternation of the
    escaped strings was (substring tests, without the regex engine's pass at every position)."""

    __slots__ = ("words",)

    def __init__(self, words):
        self.words = tuple(w.lower() for w in words)

    def search(self, text: str) -> bool | None:
        return True if any(w in text for w in self.words) else None


MEMO = 1 << 13  # queries whose triggers a Triggers object keeps


class Triggers:
    def __init__(self, rs: RuleSet):
        self.rs = rs
        self._memo: dict[str, QueryTriggers] = {}
        # every pattern run on a query's texts, behind one Hyperscan pass per text (validators/prefilter.py)
        self.prefilter = PatternSet()
        _compile, _alt = self._registered(_compile_one), self._registered(_alt_of)
        self.masks = [(_compile(m.pattern), m.replace.lower(), tuple(r.lower() for r in m.requires)) for m in rs.masks]
        self.contexts = {name: _alt(pats) for name, pats in rs.all_contexts().items()}
        self.intents = []
        for name, intent in rs.intents.items():
            trig = [(_alt(t.any), tuple(t.all), tuple(t.none), tuple(t.yields_to),
                     AnyOf(t.requires) if t.requires else None)
                    for t in intent.triggers]
            self.intents.append((name, tuple(intent.tools), trig))
        # Triggers grouped by level, each level in intent order: a trigger runs after every trigger of the intents
        # it yields to
        levels = trigger_levels(rs)
        self.by_level = []
        for lv in sorted({lv for lvs in levels.values() for lv in lvs}):
            group = [(name, tools, [t for t, tl in zip(trig, levels[name]) if tl == lv]) for name, tools, trig in self.intents]
            self.by_level.append([g for g in group if g[2]])
        self._units = None
        self.citations = []
        self.laws = []
        if rs.legal:
            alt = law_alternation(rs)
            self.citations = [_compile(p.replace("LAW", alt)) for p in rs.legal.citation]
            self.laws = [(re.compile(f"(?:{p})", re.IGNORECASE), law) for law, ps in rs.legal.laws.items() for p in ps]
        rbc = rs.research_before_code
        self.impl = _alt(rbc.domain) if rbc else None
        self.impl_needs = tuple(rbc.needs) if rbc else ()
        self.creative = self._request(rs.creative_request, _alt)
        self.translation = self._request(rs.translation_request, _alt)
        self.categories = {c: self._request(r, _alt) for c, r in rs.category_request.items()}
        tr = rs.truncation
        self.cut_words = CutWords(*(frozenset(w.lower() for w in ws) for ws in (tr.dangling, tr.stranded, tr.question,
                                                                                 tr.joins, tr.pronouns))) if tr else None
        # the complexity rule set's recall cues, compiled as it does
        self.recall = self.prefilter.add(compile_cues(rs.recall_patterns))
        # case-sensitive: camelCase is only visible in the case
        self.identifier = [re.compile(p) for p in (rs.search_query.identifier if rs.search_query else [])]

    def _registered(self, make):
        def compiled(pattern):
            return self.prefilter.add(make(pattern))
        return compiled

    @staticmethod
    def _request(req, alt) -> list:
        return [(alt(t.any), tuple(t.all), tuple(t.none),
                 AnyOf(t.requires) if t.requires else None)
                for t in (req.triggers if req else [])]

    def run_together(self, text: str, query: str) -> bool:
        """Is a search query one run-together identifier (capital_of_canada, capitalOfCanada) that the user's query
        does not itself contain (a question about `array_split` may search for it)?"""
        t = text.strip()
        return (any(rx.fullmatch(t) for rx in self.identifier)) and t.lower() not in query.lower()

    def units(self):
        """The unit matcher (pint is loaded on its first use, not here)."""
        if self._units is None:
            from mashbill.validators.plans.units import matcher

            u = self.rs.units
            self._units = matcher(u.aliases, u.ignore, tuple(u.connectors), u.target_first, tuple(u.how_many))
        return self._units

    def mask(self, query: str) -> str:
        """Apply the masks in order (to lower-cased text). A mask whose `requires` strings are all absent is
        skipped without running its pattern."""
        for rx, rep, req in self.masks:
            if req and not any(r in query for r in req):
                continue
            query = rx.sub(rep, query)
        return query

    def canonical_law(self, text: str) -> str:
        t = " ".join(text.split())
        for rx, law in self.laws:
            if rx.fullmatch(t):
                return law
        return t

    def analyze(self, query: str) -> QueryTriggers:
        """The triggers of a query, computed once per distinct query (many records share one: samples, corrections,
        preference pairs) and kept for the last MEMO queries."""
        hit = self._memo.get(query)
        if hit is None:
            if len(self._memo) >= MEMO:
                try:  # the oldest query makes room (another thread may have evicted it already)
                    self._memo.pop(next(iter(self._memo)), None)
                except (RuntimeError, StopIteration):
                    pass
            hit = self._memo[query] = self._analyze(query)
        return hit

    def _analyze(self, query: str) -> QueryTriggers:
        lowered = query.lower()
        same = len(lowered) == len(query)  # lower-casing kept the offsets (true but for a few rare letters)
        text = query
        if self.rs.number_words is not None:  # "three hundred" -> "300" (validators/plans/numwords.py)
            text = for_rules(self.rs, query)
            if text != query:
                lowered, same = text.lower(), False
        masked = self.mask(lowered)
        memo: dict[str, bool] = {}
        computed: dict[str, str] = {}  # evidence of the computed contexts

        def has(name: str) -> bool:  # contexts are evaluated lazily, each at most once
            v = memo.get(name)
            if v is None:
                if name == "unit_pair":
                    found = self.units().find(text)
                    v = memo[name] = found is not None
                    if found:
                        computed[name] = found
                else:
                    v = memo[name] = self.contexts[name].search(masked) is not None
            return v

        intents: dict[str, tuple[str, ...]] = {}
        evidence: dict[str, str] = {}
        # Triggers without yields_to first; a generic trigger then only counts when none of the intents it
        # yields to fired (a "compute" in "compute the mean of 4, 8, 15" is the statistics intent, not a second one).
        for level in self.by_level:
            for name, tools, trig in level:
                if name in intents:
                    continue
                for rx, need, forbid, yields, req in trig:
                    if yields and any(y in intents for y in yields):
                        continue
                    if req is not None and req.search(masked) is None:
                        continue
                    if not all(has(c) for c in need):
                        continue
                    m = rx.search(masked)
                    if m is None or any(has(c) for c in forbid):
                        continue
                    intents[name] = tools
                    evidence[name] = next((computed[c] for c in need if c in computed), m.group(0))
                    break

        def original(m) -> str:
            return query[m.start():m.end()] if same else m.group(0)

        cites = []
        if self.citations and ("§" in lowered or "art" in lowered or "para" in lowered or "section" in lowered):
            for rx in self.citations:
                for m in rx.finditer(lowered):
                    cites.append(Citation(self.canonical_law(m.group("law")), _paragraphs(m.group(0), m.group("para")),
                                          original(m).strip()))
        impl = None
        if self.impl is not None:
            m = self.impl.search(lowered)
            if m and all(has(c) for c in self.impl_needs):
                impl = original(m)
        niche = None
        if "niche_domain" in self.contexts and memo.get("niche_domain") is not False:  # known absent: no search
            m = self.contexts["niche_domain"].search(masked)
            niche = m.group(0) if m else None
            memo["niche_domain"] = m is not None
        def request(triggers) -> str | None:
            for rx, need, forbid, req in triggers:
                if (req is None or req.search(masked)) and all(has(c) for c in need):
                    m = rx.search(masked)
                    if m and not any(has(c) for c in forbid):
                        return m.group(0).strip()
            return None

        creative, translation = request(self.creative), request(self.translation)
        categories = {c: term for c, trig in self.categories.items() if (term := request(trig))}
        m = self.recall.search(query) if self.recall is not None else None
        return QueryTriggers(query, masked, frozenset(k for k, v in memo.items() if v), intents, evidence,
                             tuple(cites), impl, niche, creative, translation, m.group(0) if m else None, categories)


_CACHE: dict[int, tuple[RuleSet, Triggers]] = {}


def triggers_for(rs: RuleSet) -> Triggers:
    """Compiled triggers, memoised per rule set object."""
    hit = _CACHE.get(id(rs))
    if hit is None or hit[0] is not rs:
        hit = _CACHE[id(rs)] = (rs, Triggers(rs))
    return hit[1]
