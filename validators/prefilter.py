"""A sound first-character gate in front of a compiled regular expression (issue 29).

Most trigger patterns of a routing rule set cannot match most queries, yet ``re`` tries them at every position of the
text. Any match of a pattern that cannot match the empty string consumes a first character, and that character is one
of a set read off the pattern's parse tree (its FIRST set: literals, small ranges, ``\\d``). When the text holds none
of them, the pattern has no match, and ``Gated.search`` answers None without running it; otherwise it runs the pattern
as before. So results are the pattern's own, by construction. Patterns whose FIRST set cannot be bounded (``.``, ``\\w``,
a negated class, case-insensitive parts, backreferences, a pattern that matches the empty string) always run.
"""

from __future__ import annotations

import re
from operator import add
from re import _constants as C  # noqa: N812 (the parser's opcodes, stable across CPython 3.11-3.13)
from re import _parser

_MAX_RANGE = 512  # a character range wider than this is not spelled out


class _Unbounded(Exception):
    pass


def _first(seq) -> tuple[set[str], bool, bool]:
    """(characters, \\d, nullable) of a parsed sequence: what its first consumed character can be."""
    chars: set[str] = set()
    decimal = False
    for op, av in seq:
        if op is C.LITERAL:
            chars.add(chr(av))
            return chars, decimal, False
        if op is C.IN:
            for iop, iav in av:
                if iop == C.LITERAL:
                    chars.add(chr(iav))
                elif iop == C.RANGE and iav[1] - iav[0] <= _MAX_RANGE:
                    chars.update(chr(c) for c in range(iav[0], iav[1] + 1))
                elif iop == C.CATEGORY and iav == C.CATEGORY_DIGIT:
                    decimal = True
                else:
                    raise _Unbounded
            return chars, decimal, False
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue  # zero width: the next item consumes the first character
        if op is C.BRANCH:
            nullable = False
            for branch in av[1]:
                c, d, n = _first(branch)
                chars |= c
                decimal |= d
                nullable |= n
            if not nullable:
                return chars, decimal, False
            continue
        if op is C.SUBPATTERN:
            if av[1] & re.IGNORECASE:
                raise _Unbounded
            c, d, n = _first(av[3])
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", C.MAX_REPEAT)):
            c, d, n = _first(av[2])
            n = n or av[0] == 0
        elif op is getattr(C, "ATOMIC_GROUP", None):
            c, d, n = _first(av)
        else:
            raise _Unbounded  # ANY, NOT_LITERAL, GROUPREF, ...
        chars |= c
        decimal |= d
        if not n:
            return chars, decimal, False
    return chars, decimal, True


def first_set(rx: re.Pattern) -> tuple[frozenset[str], bool] | None:
    """The characters (and whether any ``\\d`` character) a match of rx can begin with; None when unbounded."""
    if not isinstance(rx.pattern, str) or rx.flags & re.IGNORECASE:
        return None
    try:
        chars, decimal, nullable = _first(_parser.parse(rx.pattern, rx.flags))
    except (_Unbounded, re.error, RecursionError):
        return None
    return None if nullable else (frozenset(chars), decimal)


_K = 3  # the length of the starts read off a pattern
_MAX_STARTS = 4096


def _cat(left: set, right: set) -> set:
    """Every (string, complete) of left followed by every one of right; a string is cut at _K (then incomplete)."""
    out = set()
    for s, c in left:
        if not c or len(s) >= _K:
            out.add((s[:_K], False))
            continue
        for t, ct in right:
            u = s + t
            out.add((u[:_K], False) if len(u) >= _K else (u, ct))
    if len(out) > _MAX_STARTS:
        raise _Unbounded
    return out


def _starts_seq(seq) -> set:
    out = {("", True)}
    for item in seq:
        out = _cat(out, _starts_item(*item))
        if all(not c or len(s) >= _K for s, c in out):
            break
    return out


_UNKNOWN = {("", False)}  # one character (or more) that is not spelled out


def _starts_item(op, av) -> set:
    """(string, complete) pairs: every match of the item begins with one of the strings; complete ones are the whole
    match."""
    if op is C.LITERAL:
        return {(chr(av), True)}
    if op is C.IN:
        chars = set()
        for iop, iav in av:
            if iop == C.LITERAL:
                chars.add(chr(iav))
            elif iop == C.RANGE and iav[1] - iav[0] <= 64:
                chars.update(chr(c) for c in range(iav[0], iav[1] + 1))
            else:
                return _UNKNOWN
        return {(c, True) for c in chars}
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return {("", True)}  # zero width
    if op is C.BRANCH:
        return set().union(*(_starts_seq(b) for b in av[1]))
    if op is C.SUBPATTERN:
        return _UNKNOWN if av[1] & re.IGNORECASE else _starts_seq(av[3])
    if op is getattr(C, "ATOMIC_GROUP", None):
        return _starts_seq(av)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", C.MAX_REPEAT)):
        lo, hi, sub = av
        one = _starts_seq(sub)
        out = {("", True)}
        for _ in range(min(lo, _K)):
            out = _cat(out, one)
        if lo > _K:  # more repetitions than the starts can show: what follows them is unknown
            out = {(s, False) for s, _ in out}
        if hi == lo + 1 and lo <= _K:
            out |= _cat(out, one)  # "?": one more repetition at most
        elif hi != lo:
            out |= {(s, False) for s, _ in _cat(out, one)}  # one more repetition, then maybe more: unknown
        return out
    return _UNKNOWN


def starts(rx: re.Pattern) -> tuple[frozenset[str], frozenset[str]] | None:
    """(two-character starts, one-character starts): every match of rx begins with one of them (a one-character
    start: a match that ends there or whose next character is not spelled out). None when a match may begin with a
    character not spelled out or match the empty string."""
    if not isinstance(rx.pattern, str) or rx.flags & re.IGNORECASE:
        return None
    try:
        found = _starts_seq(_parser.parse(rx.pattern, rx.flags))
    except (_Unbounded, re.error, RecursionError):
        return None
    if any(s == "" for s, _ in found):
        return None
    return frozenset(s for s, _ in found if len(s) == _K), frozenset(s for s, _ in found if len(s) < _K)


_LAST: tuple = (None, frozenset(), [None, None])  # the last text, its characters, [holds a \d?, its bigrams]


def _state(text: str) -> tuple:
    """The characters of text, kept for the last text (a query is tried against many patterns in a row). The tuple is
    rebound whole, so a thread reads one text's state or another's, never a mix."""
    global _LAST
    last = _LAST
    if last[0] is not text:
        last = _LAST = (text, frozenset(text), [None, None])
    return last


def _bigrams(state: tuple) -> frozenset[str]:
    box = state[2]
    if box[1] is None:
        text = state[0]
        box[1] = frozenset(map(add, map(add, text, text[1:]), text[2:]))
    return box[1]


class Gated:
    """A compiled pattern behind its first-character gate; ``search``, ``sub`` and ``finditer`` give what the
    pattern gives; everything else is the pattern's own."""

    __slots__ = ("rx", "first", "decimal", "two", "one")

    def __init__(self, rx: re.Pattern):
        self.rx = rx
        got = first_set(rx)
        self.first, self.decimal = got if got is not None else (None, False)
        self.two, self.one = starts(rx) or (None, None)

    def absent(self, text: str) -> bool:
        """True when the pattern certainly has no match in text."""
        if self.first is None:
            return False
        state = _state(text)
        chars, box = state[1], state[2]
        if self.first.isdisjoint(chars):
            if not self.decimal:
                return True
            if box[0] is None:
                box[0] = any(c.isdecimal() for c in chars)
            if not box[0]:
                return True
        # the first character is there: are the first two (or a lone first one)?
        return (self.two is not None and self.two.isdisjoint(_bigrams(state))
                and all(s not in text for s in self.one))

    def search(self, text: str):
        return None if self.absent(text) else self.rx.search(text)

    def sub(self, repl, text: str):
        return text if self.absent(text) else self.rx.sub(repl, text)

    def finditer(self, text: str):
        return iter(()) if self.absent(text) else self.rx.finditer(text)

    def __getattr__(self, name):
        return getattr(self.rx, name)
