"""Unit conversions in a query ("5 feet to cm", "how many ounces in a quart", "12 parsecs in light years"),
recognised with pint's unit registry rather than a hand-written unit list.

Why pint: the registry knows thousands of unit names, symbols, prefixes and plurals ("fseconds", "electronvolts",
"minims", "barye"), and its dimensionality check rejects pairs that are no conversion ("5 oz to yards", "3 people
in 2 cars"). Measured on the DDG unit-conversion queries (bench/triggers.py, dev set): recall 0.28 with the
earlier unit regex, 0.84 with this module, no false trigger on the factual/chat queries (the misses are mostly a
bare unit name such as "kg"). The rule set adds what pint lacks or reads differently
(German names, "f"/"c" for temperatures, "kmh") as aliases and lists tokens that are words before they are units
("a", "at", "am", "in") as ignored.

pint is imported on first use (about 0.4 CPU-s once per process) and every phrase's parse is cached.
"""

from __future__ import annotations

import re
from functools import lru_cache

_TOKEN = re.compile(r"[^\W\d_][\w°µμΩ²³]*(?:/[^\W\d_][\w²³]*)?|°\s?[cfk]\b|\d+(?:[.,]\d+)*(?:e[+-]?\d+)?|['\"″′?=]")
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)*(?:e[+-]?\d+)?$", re.IGNORECASE)
# "convert 5 feet to in", "1 kilogram = ? decagram", "6 kj equals how many joule", "36.0c is what in f"
_CONNECTOR_LIST = [("in",), ("to",), ("into",), ("as",), ("=",), ("equals",), ("equal",), ("in", "to"), ("=", "?"),
                   ("is", "what", "in"), ("equals", "how", "many"), ("is", "how", "many"), ("vs",), ("nach",),
                   ("are", "in"), ("make", "a"), ("is", "in"), ("is",), ("are",), ("sind",), ("make",),
                   ("convert", "to"), ("converted", "to"), ("convert",), ("in", "wie", "viele"), ("umrechnen", "in")]
_CONNECTORS: dict[str, list[tuple[str, ...]]] = {}
for _c in sorted(_CONNECTOR_LIST, key=len, reverse=True):
    _CONNECTORS.setdefault(_c[0], []).append(_c)
_GLUED = re.compile(r"^(\d+(?:[.,]\d+)*)([^\W\d_].*)$")
_HOW_MANY_ONLY = {("is",), ("are",), ("sind",), ("make",), ("make", "a"), ("are", "in"), ("is", "in")}
_POWER = re.compile(r"^([a-zµμ]+)([23])$")
# Cooking and shipping queries convert mass and volume both ways ("how many ounces in a cup")
_COMPATIBLE = {str([("[length]", 3)]): str([("[mass]", 1)])}
# every match holds a connector; only the words around one are looked at
_CONNECTOR_RE = re.compile(r"\s(?:in|to|into|as|=|equals?|is|are|make|vs|nach|sind|convert\w*)(?!\w)", re.IGNORECASE)
# one of these must stand before the unit unless the query starts there (checked in C before splitting words)
_LEAD_WORD = re.compile(r"\d|(?<!\w)(?:a|an|one|ein|eine|many|viele|half|halb|convert|umrechnen)(?!\w)|['\"″′]",
                        re.IGNORECASE)
_LEADING = {"a", "an", "one", "ein", "eine", "many", "viele", "half", "halb", "convert", "umrechnen"}


def _lead_ok(words: list[str], at_start: bool, leading: frozenset[str] | set[str] = frozenset()) -> bool:
    """Can the words before a connector end in a unit phrase after a quantity, "how many" or the query's start?"""
    for n in (1, 2, 3):
        if n > len(words):
            return False
        if words[-n][:1].isdigit():  # "5feet", "10ug"
            return True
        if n == len(words):
            return at_start
        before = words[-n - 1].lower()
        if before[-1:].isdigit() or before in _LEADING or before in leading or before[-1:] in "'\"″′":
            return True
    return False


_TAIL = {"conversion", "converter", "calculator", "umrechnung", "umrechner"}
_ARTICLES = {"a", "an", "one", "1", "ein", "eine", "einen", "einem", "einer", "us", "how", "many", "wie", "viele"}
_QUANTITY_WORDS = {"a", "an", "one", "ein", "eine", "half", "halb"}


class UnitMatcher:
    """`connectors`: more words between the two units than the built-in ones ("equals what in", "?="), each a
    space-separated phrase; `target_first`: the unit asked for may come first ("hectares in 39,461 acres", "psi in
    480 bar") when the query starts with it."""

    def __init__(self, aliases: dict[str, str], ignore: list[str], connectors: tuple[str, ...] = (),
                 target_first: bool = False, how_many: tuple[str, ...] = ()):
        self.aliases = {k.lower(): v for k, v in aliases.items()}
        self.ignore = {i.lower() for i in ignore}
        self._ureg = None
        self.target_first = target_first
        self.how_many = [["how", "many"], ["wie", "viele"]]
        self.how_many += [h.lower().split() for h in how_many if len(h.split()) in (1, 2)]
        self.leading = {h[-1] for h in self.how_many[2:]}
        self.lead_re = _LEAD_WORD if not how_many else re.compile(
            _LEAD_WORD.pattern + "|(?<!\\w)(?:" + "|".join(re.escape(h.split()[-1]) for h in how_many) + ")(?!\\w)",
            re.IGNORECASE)
        self.connectors = {k: list(v) for k, v in _CONNECTORS.items()}
        extra = [tuple(_TOKEN.findall(c.lower())) for c in connectors]
        for c in sorted(extra, key=len, reverse=True):
            if c and c not in self.connectors.setdefault(c[0], []):
                self.connectors[c[0]].append(c)
                self.connectors[c[0]].sort(key=len, reverse=True)
        firsts = sorted({c[0] for c in extra if c} - {c[0] for c in _CONNECTOR_LIST})
        self.connector_re = _CONNECTOR_RE if not firsts else re.compile(
            _CONNECTOR_RE.pattern[:-len(")(?!\\w)")] + "".join("|" + re.escape(f) for f in firsts) + ")(?!\\w)",
            re.IGNORECASE)

    def _registry(self):
        if self._ureg is None:
            try:
                import pint
            except ImportError:
                from mashbill.errors import MashbillError

                raise MashbillError("the unit-conversion trigger of the routing rules needs pint: "
                                    "pip install 'mashbill[validate]'") from None
            self._ureg = pint.UnitRegistry()
        return self._ureg

    @lru_cache(maxsize=65536)
    def dims(self, phrase: str) -> str | None:
        """The dimensionality of a unit phrase ("light years", "km/h", "deg c"), or None when it is no unit."""
        low = phrase.lower()
        if not low:
            return None
        words = low.replace(" per ", "/").split()
        cand = [self.aliases[low]] if low in self.aliases else []
        mapped = [self.aliases.get(w, w) for w in words]
        orig = phrase.replace(" per ", "/").split()
        cand += ["_".join(orig), "_".join(mapped), " ".join(mapped)] if len(words) > 1 else [phrase, mapped[0]]
        ureg = self._registry()
        for c in cand:
            c = _POWER.sub(r"\1**\2", c)  # "cm2" -> "cm**2"
            try:
                dim = ureg.parse_units(c).dimensionality
            except Exception:  # pint raises several error types for text that is no unit
                continue
            d = str(sorted(dict(dim).items()))  # pint's own string depends on the order it met the base units
            return _COMPATIBLE.get(d, d)
        return None

    def _phrase(self, toks: list[str], a: int, b: int, left: bool) -> str | None:
        words = toks[a:b]
        if any(not w[0].isalpha() and not w.startswith("°") and w not in self.aliases for w in words):
            return None
        if left and (words[0].lower() in self.ignore or " ".join(words).lower() in self.ignore):
            return None
        return self.dims(" ".join(words))

    def find(self, text: str) -> str | None:
        """Evidence text when the query asks to convert a quantity between units of the same dimension."""
        text = text[:400]
        for conn in self.connector_re.finditer(text):
            # the words before a connector must end in a unit after a quantity, "how many" or the query's start;
            # only that stretch is tokenised (long queries hold many "in" and "to")
            pos = conn.start()
            start = max(0, pos - 48)
            if start and self.lead_re.search(text, start, pos) is None:
                continue
            if not _lead_ok(text[start:pos].split(), start == 0, self.leading):
                continue
            hit = self._find_in(text[start:conn.end() + 40], at_start=start == 0)
            if hit:
                return hit
        return None

    def _find_in(self, text: str, at_start: bool) -> str | None:
        toks: list[str] = []
        for t in _TOKEN.findall(text):
            m = None if _NUMBER.match(t) else _GLUED.match(t)
            toks.extend([m.group(1), m.group(2)] if m else [t])  # "5feet", "10ug", "36.0c"
        lows = [t.lower() for t in toks]
        for i in range(1, len(toks)):
            for conn in self.connectors.get(lows[i], ()):
                j = i + len(conn)
                if tuple(lows[i:j]) != conn:
                    continue
                hit = self._pair(toks, lows, i, j, conn in _HOW_MANY_ONLY, at_start)
                if hit:
                    return hit
        return None

    def _pair(self, toks, lows, i, j, how_many_only: bool, at_start: bool) -> str | None:
        """A unit phrase ending at i (after a quantity, "how many" or the start of the query) and one of the same
        dimension starting at or after j."""
        for n in (3, 2, 1):
            lstart = i - n
            if lstart < 0:
                continue
            before = lows[lstart - 1] if lstart > 0 else ""
            quantity = bool(_NUMBER.match(before)) or before in _QUANTITY_WORDS or before in ('"', "'", "″", "′")
            how_many = (lows[max(0, lstart - 2):lstart] in self.how_many
                        or lows[max(0, lstart - 1):lstart] in self.how_many)
            whole = at_start and (lstart == 0 or (lstart == 1 and lows[0] in ("convert", "umrechnen")))
            if not (quantity or how_many or whole) or (how_many_only and not how_many):
                continue
            ldim = self._phrase(toks, lstart, i, left=True)
            if ldim is None:
                continue
            k = j
            # the quantity after the connector: "how many cm in 3 feet", or the target first ("cm in 3 feet")
            after = how_many or (whole and self.target_first)
            while k < len(toks) and (lows[k] in _ARTICLES or (after and _NUMBER.match(lows[k]))):
                k += 1
            for m in (3, 2, 1):
                if k + m > len(toks):
                    continue
                if self._phrase(toks, k, k + m, left=False) != ldim:
                    continue
                if not (quantity or how_many):
                    rest = lows[k + m:]
                    if any(w[0].isalnum() and w not in _TAIL for w in rest):
                        continue
                return " ".join(toks[max(0, lstart - 1):k + m])
        return None


_MATCHERS: dict[tuple, UnitMatcher] = {}


def matcher(aliases: dict[str, str], ignore: list[str], connectors: list[str] | tuple[str, ...] = (),
            target_first: bool = False, how_many: list[str] | tuple[str, ...] = ()) -> UnitMatcher:
    key = (tuple(sorted(aliases.items())), tuple(sorted(ignore)), tuple(connectors), target_first, tuple(how_many))
    m = _MATCHERS.get(key)
    if m is None:
        m = _MATCHERS[key] = UnitMatcher(aliases, ignore, tuple(connectors), target_first, tuple(how_many))
    return m
