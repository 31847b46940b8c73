"""JSON text that a model or a person wrote, read so that no text can crash the reader or what reads its value.

Python's JSON reader takes more than JSON, and some JSON it cannot take:
- it recurses once per level: text nested ~1,000 levels deep (a small model stuck on "[" until max_tokens, or a
  crafted row) raises RecursionError, which no JSON handler catches, and kills the run;
- it reads NaN and Infinity, which are not JSON (the store's JSON columns refuse them, the rules cannot compare
  them), and 1e400 as infinity;
- an integer of more than 4,300 digits (a model repeating "1") raises a plain ValueError.
``loads`` refuses all of these with a ``JSONDecodeError`` (``NotJSON``) that says what and where, so every handler
that reports unreadable JSON reports these too. Text nested deeper than MAX_DEPTH is refused before the reader sees
it; values read this way are shallow enough for every walker after the reader (the schema check, the rules, hashing).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 64  # a plan is ~5 levels deep; no output schema of this domain comes near

_STRING = r'(?s:"[^"\\]*(?:\\.[^"\\]*)*")'  # skipped whole: what is inside a string neither nests nor is a number
_BRACKETS = re.compile(_STRING + r"|(?P<open>[\[{])|[\]}]")
_LONG_INTEGER = re.compile(_STRING + r"|(?P<hit>\d{4301,})")
_STRINGS = re.compile(_STRING)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # an opener +1, a closer -1 (as int8)


class NotJSON(json.JSONDecodeError):
    """Text this reader refuses (a JSONDecodeError: the handlers for unreadable JSON take it)."""


class TooDeep(NotJSON):
    """JSON text nested deeper than the limit."""


class _Refused(ValueError):
    def __init__(self, token: str, why: str):
        super().__init__(why)
        self.token, self.why = token, why


def _deepest(text: str) -> int:
    """How deep the text's brackets nest outside strings, without a Python step per bracket (a whole JSON file)."""
    import numpy as np

    brackets = _NOT_BRACKET.sub("", _STRINGS.sub("", text)).encode("ascii")
    if not brackets:
        return 0
    level = np.cumsum(np.frombuffer(brackets.translate(_STEP), dtype=np.int8), dtype=np.int64)
    # a closer with nothing open is ignored (as the walk below does): depth = level - the lowest level so far (<= 0)
    return int((level - np.minimum.accumulate(np.minimum(level, 0))).max())


def too_deep_at(text: str, limit: int = MAX_DEPTH) -> int | None:
    """The offset of the first bracket that opens level ``limit + 1`` (brackets in strings do not count), or None."""
    if text.count("[") + text.count("{") <= limit:  # no deeper than its brackets: almost every text stops here
        return None
    if _deepest(text) <= limit:
        return None
    depth = 0
    for m in _BRACKETS.finditer(text):
        if m.lastgroup == "open":
            depth += 1
            if depth > limit:
                return m.start()
        elif m.group()[0] != '"':
            depth = max(depth - 1, 0)
    return None


def _outside_strings(text: str, pattern: re.Pattern) -> int:
    for m in pattern.finditer(text):
        if m.lastgroup == "hit":
            return m.start()
    return 0


def _constant(token: str):
    raise _Refused(token, f"{token} is not JSON")


def _finite(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _Refused(token, f"{token} is too large for a number")
    return value


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_finite)  # one, not one a call (as json.loads keeps)


def loads(text: str, limit: int = MAX_DEPTH) -> Any:
    """``json.loads`` for text a model or a person wrote, raising ``NotJSON`` for what it must not take (above)."""
    at = too_deep_at(text, limit)
    if at is not None:
        raise TooDeep(f"nested deeper than {limit} levels", text, at)
    if text.startswith("\ufeff"):  # as json.loads says it
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        return _DECODER.decode(text)
    except _Refused as exc:
        hit = re.compile(_STRING + f"|(?P<hit>{re.escape(exc.token)})")
        raise NotJSON(exc.why, text, _outside_strings(text, hit)) from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # Python's limit on the digits of an integer
        raise NotJSON("an integer of more than 4,300 digits", text, _outside_strings(text, _LONG_INTEGER)) from None
