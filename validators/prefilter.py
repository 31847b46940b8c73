"""Many patterns, one pass: Hyperscan names the patterns that may match a text, and only those run in ``re``.

The rule sets search each query with a hundred or more patterns (masks, contexts, intents, cues), and most do not
match; each ``re`` search still walks the whole query. A ``PatternSet`` compiles every pattern once more for
Hyperscan, which scans a text for all of them at once and reports which may match; a pattern it does not report is
not run, and every answer given is ``re``'s own.

The Hyperscan form of a pattern is built from Python's own parse of it and matches wherever the pattern does (a
superset), by construction: each character test (a literal under ``re.IGNORECASE``, a class, ``.``, ``\\w``...) is
the exact set of characters for which Python's own engine says yes, anchors, word boundaries and lookarounds are
left out (which only widens), a back-reference becomes any run of characters, and very long counted repeats keep
their lower bound only. The character sets are computed over U+0000-U+036F (Latin scripts, their diacritics and
IPA) and the two brackets the rule sets' masks put around their placeholders (``⟨DATE⟩``: symbols without case, a
fifth of the plan queries of a rehearsal held one); a text holding any other character is not prefiltered (its
patterns all run), so no other script's case folding or Unicode version can make the two engines differ. A pattern
that cannot be converted always runs.
Without Hyperscan (not installed; it is an x86-64 Linux dependency) or with ``MASHBILL_PREFILTER=0``, everything
runs as before.
"""

from __future__ import annotations

import json
import os
import re
import threading
from re import _compiler, _parser
from re import _constants as C  # noqa: N812 (the parser's opcodes)

try:
    import hyperscan
except ImportError:  # another platform: every pattern runs
    hyperscan = None

DOMAIN = 0x370  # code points below this are what the converted patterns are exact on
PLACEHOLDER_BRACKETS = "\u27e8\u27e9"  # ... and these (⟨ ⟩)
_CODE_POINTS = (*range(DOMAIN), *map(ord, PLACEHOLDER_BRACKETS))
_IN_DOMAIN = re.compile("[\x00-\u036f" + PLACEHOLDER_BRACKETS + "]*")
_REPEAT_CAP = 64  # counted repeats above this keep their lower bound only (Hyperscan's compile grows with them)
_CHAR_FLAGS = re.IGNORECASE | re.DOTALL | re.ASCII | re.UNICODE  # what a one-character test depends on


PREFILTER_ENV = "MASHBILL_PREFILTER"  # "0": every pattern runs (for side-by-side measurements)


def enabled() -> bool:
    return hyperscan is not None and os.environ.get(PREFILTER_ENV, "1") != "0"


class Unsupported(ValueError):
    pass


_chars_memo: dict[tuple, frozenset[int]] = {}


def _chars(node, flags: int) -> frozenset[int]:
    """The code points of the domain that one single-character node matches, asked of Python's own engine."""
    key = (repr(node), flags & _CHAR_FLAGS)
    hit = _chars_memo.get(key)
    if hit is None:
        state = _parser.State()
        state.flags = flags
        rx = _compiler.compile(_parser.SubPattern(state, [node]), flags)
        hit = _chars_memo[key] = frozenset(c for c in _CODE_POINTS if rx.fullmatch(chr(c)))
    return hit


def _lit(cp: int) -> str:
    """One code point, short (Hyperscan limits an expression's length): letters and digits as themselves, other
    printable ASCII escaped, the rest as \\x{...}."""
    ch = chr(cp)
    if ch.isascii() and ch.isalnum():
        return ch
    if 0x20 < cp < 0x7F:
        return "\\" + ch
    return "\\x{%x}" % cp


def _class(cps: frozenset[int]) -> str:
    if not cps:
        return _lit(DOMAIN)  # no character of a prefiltered text: this part cannot match one
    if len(cps) == 1:
        return _lit(next(iter(cps)))
    out, run = [], sorted(cps)
    i = 0
    while i < len(run):
        j = i
        while j + 1 < len(run) and run[j + 1] == run[j] + 1:
            j += 1
        out.append(_lit(run[i]) if i == j else _lit(run[i]) + "-" + _lit(run[j]))
        i = j + 1
    return "[" + "".join(out) + "]"


_ANY_RUN = "[\\x{0}-\\x{%x}%s]*" % (DOMAIN - 1, "".join(_lit(ord(c)) for c in PLACEHOLDER_BRACKETS))


def _convert(items, flags: int) -> str:
    out = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(_class(_chars((op, av), flags)) if flags & re.IGNORECASE else _lit(av))
        elif op in (C.NOT_LITERAL, C.IN, C.ANY):
            out.append(_class(_chars((op, av), flags)))
        elif op is C.BRANCH:
            out.append("(?:" + "|".join(_convert(alt, flags) for alt in av[1]) + ")")
        elif op is C.SUBPATTERN:
            _, add, rem, sub = av
            out.append("(?:" + _convert(sub, (flags | add) & ~rem) + ")")
        elif op is C.ATOMIC_GROUP:
            out.append("(?:" + _convert(av, flags) + ")")
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, sub = av
            lo = min(lo, _REPEAT_CAP)
            bound = "{%d,}" % lo if hi is C.MAXREPEAT or hi > _REPEAT_CAP else "{%d,%d}" % (lo, hi)
            inner = _convert(sub, flags)
            out.append("(?:" + inner + ")" + bound if inner else "")
        elif op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue  # left out: a match without the condition is a superset of the matches with it
        elif op is C.GROUPREF:
            out.append(_ANY_RUN)
        elif op is C.GROUPREF_EXISTS:
            _, yes, no = av
            out.append("(?:" + _convert(yes, flags) + "|" + (_convert(no, flags) if no else "") + ")")
        else:
            raise Unsupported(f"opcode {op}")
    return "".join(out)


def superset_pattern(rx: re.Pattern) -> str:
    """A Hyperscan expression (UTF-8 mode) that matches every text of the domain that rx matches somewhere."""
    if not isinstance(rx.pattern, str) or rx.flags & (re.VERBOSE | re.LOCALE):
        raise Unsupported("a bytes, verbose or locale pattern")
    parsed = _parser.parse(rx.pattern, rx.flags)
    return _convert(parsed, rx.flags | parsed.state.flags)


_FLAGS = 0 if hyperscan is None else (hyperscan.HS_FLAG_UTF8 | hyperscan.HS_FLAG_PREFILTER |
                                      hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_ALLOWEMPTY)


def _compiled(exprs: list[bytes], ids: list[int]):
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=ids, elements=len(exprs), flags=[_FLAGS] * len(exprs))
    return db


def _database(exprs: list[bytes], ids: list[int]) -> tuple[object | None, set[int]]:
    """The Hyperscan database of the expressions and the ids it refuses (they always run). A rule set's database
    takes seconds to compile, so it is kept in MASHBILL_CACHE/hyperscan by the hash of what it was compiled from."""
    from mashbill.files import write_file_atomic
    from mashbill.hashing import sha256_text
    from mashbill.paths import cache_dir

    if not exprs:
        return None, set()
    key = sha256_text(json.dumps([getattr(hyperscan, "__version__", ""), _FLAGS, ids,
                                  [e.decode("utf-8") for e in exprs]]))
    path = cache_dir("hyperscan") / f"{key}.hsdb"
    try:
        head, _, body = path.read_bytes().partition(b"\n")
        return hyperscan.loadb(body, hyperscan.HS_MODE_BLOCK), set(json.loads(head))
    except (OSError, ValueError, hyperscan.error):
        pass
    failed: set[int] = set()
    try:
        db = _compiled(exprs, ids)
    except hyperscan.error:  # find the expressions it refuses alone
        keep = []
        for e, i in zip(exprs, ids):
            try:
                _compiled([e], [i])
                keep.append((e, i))
            except hyperscan.error:
                failed.add(i)
        db = _compiled([e for e, _ in keep], [i for _, i in keep]) if keep else None
    if db is not None:
        try:
            write_file_atomic(path, json.dumps(sorted(failed)).encode() + b"\n" + hyperscan.dumpb(db))
        except OSError:  # a read-only cache: compile again next time
            pass
    return db, failed


def _in_domain(text: str) -> bool:
    return text.isascii() or _IN_DOMAIN.fullmatch(text) is not None


class PatternSet:
    """Patterns registered with ``add`` share one Hyperscan database, compiled on the first scan. The candidates of
    the last few texts are kept (the patterns of one query are searched one after another)."""

    KEEP = 8

    def __init__(self):
        self._patterns: list[re.Pattern] = []
        self._db = None
        self._always: frozenset[int] = frozenset()
        self._local = threading.local()
        self._recent: dict[str, frozenset[int]] = {}
        self._lock = threading.Lock()

    def add(self, rx):
        """rx behind this set's prefilter (rx itself when prefiltering is off, None for None). rx is a compiled
        pattern or an object wrapping one in ``.rx`` (the digit gate)."""
        if rx is None or not enabled():
            return rx
        with self._lock:
            self._patterns.append(getattr(rx, "rx", rx))
            self._db = None
            self._recent = {}  # candidates found without the new pattern would leave it out
            return Prefiltered(rx, self, len(self._patterns) - 1)

    def _compile(self):
        with self._lock:
            if self._db is not None:
                return self._db
            exprs, ids, always = [], [], set()
            for i, rx in enumerate(self._patterns):
                try:
                    exprs.append(superset_pattern(rx).encode("utf-8"))
                    ids.append(i)
                except (Unsupported, re.error, RecursionError, OverflowError):
                    always.add(i)
            db, failed = _database(exprs, ids)
            always |= failed
            self._always = frozenset(always)
            self._recent = {}
            self._db = db if db is not None else False
            return self._db

    def candidates(self, text: str) -> frozenset[int] | None:
        """The patterns that may match text (those that always run included), or None: run them all."""
        hit = self._recent.get(text)
        if hit is not None:
            return hit
        db = self._db if self._db is not None else self._compile()
        if db is False or not _in_domain(text):
            return None
        scratch = getattr(self._local, "scratch", None)
        if scratch is None or getattr(self._local, "db", None) is not db:
            scratch = self._local.scratch = hyperscan.Scratch(db)
            self._local.db = db
        found = set(self._always)
        db.scan(text.encode("utf-8"), match_event_handler=lambda i, *_: found.add(i), scratch=scratch)
        hit = frozenset(found)
        recent = self._recent
        if len(recent) >= self.KEEP:
            recent = {}
        recent[text] = hit
        self._recent = recent
        return hit

    def may_match(self, index: int, text: str) -> bool:
        got = self.candidates(text)
        return got is None or index in got


class Prefiltered:
    """A registered pattern: where the set says it cannot match a text, the answer is "no match" without running it;
    everything else is the pattern's own."""

    __slots__ = ("rx", "_set", "_index")

    def __init__(self, rx, pattern_set: PatternSet, index: int):
        self.rx, self._set, self._index = rx, pattern_set, index

    def search(self, text: str, *args):
        return self.rx.search(text, *args) if self._set.may_match(self._index, text) else None

    def match(self, text: str, *args):
        return self.rx.match(text, *args) if self._set.may_match(self._index, text) else None

    def fullmatch(self, text: str, *args):
        return self.rx.fullmatch(text, *args) if self._set.may_match(self._index, text) else None

    def sub(self, repl, text: str, *args):
        return self.rx.sub(repl, text, *args) if self._set.may_match(self._index, text) else text

    def finditer(self, text: str, *args):
        return self.rx.finditer(text, *args) if self._set.may_match(self._index, text) else iter(())

    def findall(self, text: str, *args):
        return self.rx.findall(text, *args) if self._set.may_match(self._index, text) else []

    @property
    def index(self) -> int:
        """This pattern's number in its set (what ``PatternSet.candidates`` names)."""
        return self._index

    def __getattr__(self, name):
        return getattr(self.rx, name)
