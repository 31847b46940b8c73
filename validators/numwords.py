"""Numbers written as words ("divide three hundred by four", "achthundertsechsundachtzig durch einundfünfzig")
read as digits, with text2num's parser rather than a growing list of number words.

Why text2num: it reads compound numbers in English and German (hyphenated, run together, with "and"/"und") and
leaves isolated small words ("one of", "ein") alone. Measured side by side on the paraphrase suite and queries-dev
(bench/RESULTS.md, issue 23): about 9 µs a call; quantulum3, which also extracts quantities with units, took about
2.4 ms a call, read no German unit name and no target unit, so the unit side stays with pint (validators/units.py).

A rule set opts in with ``number_words: {languages: [en, de]}``; earlier rule sets read words as before. text2num
is imported on first use and each text's reading is cached.
"""

from __future__ import annotations

import re
from functools import lru_cache

# a cheap pre-check: the text holds a word that may start or end a spelled number
_MAYBE = re.compile(r"(?i)(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|teen|twenty|thirty|"
                    r"forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|eins|zwei|drei|vier|"
                    r"fünf|sechs|sieben|acht|neun|zehn|elf|zwölf|zehn|zig|ßig|hundert|tausend|million|milliard)")


@lru_cache(maxsize=8192)
def digitize(text: str, languages: tuple[str, ...]) -> str:
    """The text with its spelled numbers written as digits, language by language (a text that has none is
    returned as it is, without loading the parser)."""
    if not languages or _MAYBE.search(text) is None:
        return text
    try:
        from text_to_num import alpha2digit
    except ImportError:
        from mashbill.errors import MashbillError

        raise MashbillError("the rule set reads number words with text2num: pip install 'mashbill[validate]'") from None
    out = text
    for lang in languages:
        try:
            out = alpha2digit(out, lang)
        except Exception:  # the parser refuses some inputs (odd punctuation): the words stay words
            continue
    return out


def for_rules(rs, text: str) -> str:
    """The text with spelled numbers as digits when the rule set reads number words (``number_words``), else as is."""
    return text if rs.number_words is None else digitize(text, tuple(rs.number_words.languages))
