"""JSON text that a model or a person wrote, read so that no text can crash the reader or what reads its value.

Python's JSON reader takes more than JSON, and some JSON it cannot take:
- it recurses once per level: text nested ~1,000 levels deep (a small model stuck on "[" until max_tokens, or a
  crafted row) raises RecursionError, which no JSON handler catches, and kills the run;
- it reads NaN and Infinity, which are not JSON (the store's JSON columns refuse them, the rules cannot compare
  them), and 1e400 as infinity;
- an integer of more than 4,300 digits (a model repeating "1") raises a plain ValueError;
- it reads a lone surrogate (a JSON escape such as "\\ud800" with no partner, or the code point itself in text an
  HTTP client decoded that way): a string no UTF-8 file, store or tokenizer can take.
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
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


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


def storable(text: str | None) -> str | None:
    """The text with every surrogate code point replaced by U+FFFD (what a server does with bytes that are not
    UTF-8): no UTF-8 encoding exists for one, so the store could not keep the text as it came."""
    if text is None or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def lone_surrogate_in(value: Any) -> int | None:
    """The first surrogate code point in a value's strings (keys included, in document order), or None. An escape pair
    in JSON text decodes to one code point; only a lone escape leaves a surrogate in the value."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            m = _SURROGATE.search(v)
            if m is not None:
                return ord(m.group())
        elif isinstance(v, dict):
            stack.extend(reversed([x for kv in v.items() for x in kv]))
        elif isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(reversed(list(v)))
    return None


def _lone_surrogate(text: str, value: Any) -> NotJSON | None:
    """NotJSON naming the first lone surrogate the text holds, as a code point or as an escape, else None."""
    m = _SURROGATE.search(text)
    if m is not None:
        cp, at = ord(m.group()), m.start()
    elif _SURROGATE_ESCAPE.search(text) is None or (cp := lone_surrogate_in(value)) is None:
        return None
    else:
        at = next((e.start() for e in re.finditer(rf"\\u{cp:04x}", text, re.IGNORECASE)), 0)
    return NotJSON(f"holds a lone surrogate (\\u{cp:04x}), which no UTF-8 text can hold", text, at)


def loads(text: str, limit: int = MAX_DEPTH, *, keep_lone_surrogates: bool = False) -> Any:
    """``json.loads`` for text a model or a person wrote, raising ``NotJSON`` for what it must not take (above).
    ``keep_lone_surrogates``: for a reader that names the row holding one itself (a file's JSON array of rows)."""
    at = too_deep_at(text, limit)
    if at is not None:
        raise TooDeep(f"nested deeper than {limit} levels", text, at)
    value = _decode(text)
    bad = None if keep_lone_surrogates else _lone_surrogate(text, value)
    if bad is not None:
        raise bad
    return value


def _decode(text: str) -> Any:
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
