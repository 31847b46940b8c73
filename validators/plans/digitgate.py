"""Patterns that cannot match a text without a digit are not run on one (issue 29).

Many trigger patterns and masks of a routing rule set need a number (a date, a time, two quantities, a standard's
number); many queries hold none. ``needs_digit`` reads a compiled pattern's parse tree: every match holds a ``\\d``
character when a part that no match can skip is a digit class (or an alternation whose every branch needs one).
``DigitGated`` answers None (no match) for such a pattern on a text without a ``\\d`` character, and otherwise runs
the pattern: its answers are the pattern's own, by construction.
"""

from __future__ import annotations

import re
from re import _constants as C  # noqa: N812 (the parser's opcodes)
from re import _parser

_DIGIT = re.compile(r"\d")
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", C.MAX_REPEAT))


def _digit_class(av) -> bool:
    """Is every character of a class a decimal digit?"""
    if not av:
        return False
    for op, a in av:
        if op == C.CATEGORY and a == C.CATEGORY_DIGIT:
            continue
        if op == C.LITERAL and chr(a).isdecimal():
            continue
        if op == C.RANGE and all(chr(c).isdecimal() for c in range(a[0], a[1] + 1)):
            continue
        return False
    return True


def _needs(seq) -> bool:
    for op, av in seq:
        if op == C.LITERAL and chr(av).isdecimal():
            return True
        if op == C.IN and _digit_class(av):
            return True
        if op == C.BRANCH and all(_needs(b) for b in av[1]):
            return True
        if op == C.SUBPATTERN and _needs(av[3]):
            return True
        if op in _REPEATS and av[0] >= 1 and _needs(av[2]):
            return True
        if op == getattr(C, "ATOMIC_GROUP", None) and _needs(av):
            return True
    return False  # (lookarounds need nothing of the match: a digit they look for may lie outside it)


def needs_digit(rx: re.Pattern) -> bool:
    """True when every match of rx holds a \\d character."""
    if not isinstance(rx.pattern, str):
        return False
    try:
        return _needs(_parser.parse(rx.pattern, rx.flags))
    except (re.error, RecursionError):
        return False


_LAST: tuple = (None, False)  # the last text asked about and whether it holds a \d (rebound whole: thread-safe)


def has_digit(text: str) -> bool:
    global _LAST
    last = _LAST
    if last[0] is not text:
        last = _LAST = (text, _DIGIT.search(text) is not None)
    return last[1]


class DigitGated:
    """A compiled pattern that needs a digit: ``search``, ``sub`` and ``finditer`` skip a text without one; anything
    else is the pattern's own."""

    __slots__ = ("rx",)

    def __init__(self, rx: re.Pattern):
        self.rx = rx

    def search(self, text: str):
        return self.rx.search(text) if has_digit(text) else None

    def sub(self, repl, text: str):
        return self.rx.sub(repl, text) if has_digit(text) else text

    def finditer(self, text: str):
        return self.rx.finditer(text) if has_digit(text) else iter(())

    def __getattr__(self, name):
        return getattr(self.rx, name)


def gated(rx: re.Pattern):
    """rx behind the digit gate when every match needs a digit, else rx itself."""
    return DigitGated(rx) if needs_digit(rx) else rx
