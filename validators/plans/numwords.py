"""Numbers written as words ("divide three hundred by four", "achthundertsechsundachtzig durch einundfünfzig")
read as digits, with text2num's parser rather than a growing list of number words.

Why text2num: it reads compound numbers in English and German (hyphenated, run together, with "and"/"und") and
leaves isolated small words ("one of", "ein") alone. Measured side by side on the paraphrase suite and queries-dev
(bench/RESULTS.md, issue 23): about 9 µs a call; quantulum3, which also extracts quantities with units, took about
2.4 ms a call, read no German unit name and no target unit, so the unit side stays with pint (validators/plans/units.py).

A rule set opts in with ``number_words: {languages: [en, de]}``; earlier rule sets read words as before. text2num
is imported on first use and each text's reading is cached.
"""

from __future__ import annotations

import re
from functools import lru_cache

# cheap pre-checks, one per language: a word that text2num would turn into digits (isolated words under 3, "one",
# "two", "ein", are left alone by it, so they are not looked for); the parser runs only for a language that has one
_MAYBE = {
    "en": re.compile(r"(?i)\b(?:three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
                     r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|"
                     r"hundred|thousand|million|billion)\b"),
    # a German number is one word of number parts ("achthundertsechsundachtzig"), not "ein" or "und" alone
    "de": re.compile(r"(?i)\b(?!(?:ein|eine|und|elf|acht)\b)(?:eins|ein|zwei|drei|vier|fünf|sechs|sech|sieben|sieb|"
                     r"acht|neun|zehn|elf|zwölf|zwanzig|dreißig|zig|ßig|hundert|tausend|und|million(?:en)?|"
                     r"milliarde(?:n)?)+\b"),
}
_ANY = re.compile("|".join(f"(?:{rx.pattern[4:]})" for rx in _MAYBE.values()), re.IGNORECASE)


# ordinals stay words: "im vierten Quarter", "the third floor" and "a third" state no quantity (text2num would write
# "4." and "3rd", which the triggers read as numbers)
_ORDINAL = re.compile(r"(?i)\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
                      r"\w*teenth|\w*tieth|\w*hundredth|\w*thousandth|\w+-(?:first|second|third|fourth|fifth|sixth|"
                      r"seventh|eighth|ninth)|(?:erst|zweit|dritt|viert|fünft|sechst|siebt|acht|neunt|zehnt|elft|zwölft|"
                      r"\w+zehnt|\w+zigst|\w+ßigst|\w*hundertst|\w*tausendst)(?:e[nrms]?))\b")


def _keep_ordinals(text: str) -> tuple[str, list[str]]:
    kept: list[str] = []

    def hide(m):
        kept.append(m.group(0))
        return chr(0xE000 + len(kept) - 1)  # one private-use letter per ordinal: text2num leaves it alone

    return _ORDINAL.sub(hide, text), kept


@lru_cache(maxsize=8192)
def digitize(text: str, languages: tuple[str, ...]) -> str:
    """The text with its spelled numbers written as digits, language by language (a text that has none is
    returned as it is, without loading the parser)."""
    if not languages or _ANY.search(text) is None:
        return text
    try:
        from text_to_num import alpha2digit
    except ImportError:
        from mashbill.errors import MashbillError

        raise MashbillError("the rule set reads number words with text2num: pip install 'mashbill[validate]'") from None
    out, kept = _keep_ordinals(text)
    for lang in languages:
        if lang in _MAYBE and _MAYBE[lang].search(out) is None:
            continue
        try:
            out = alpha2digit(out, lang)
        except Exception:  # the parser refuses some inputs (odd punctuation): the words stay words
            continue
    for i, word in enumerate(kept):
        out = out.replace(chr(0xE000 + i), word)
    return out


def for_rules(rs, text: str) -> str:
    """The text with spelled numbers as digits when the rule set reads number words (``number_words``), else as is."""
    return text if rs.number_words is None else digitize(text, tuple(rs.number_words.languages))


_AND = re.compile(r"(?i)\s+(?:and|und)\s+")


def readings(rs, text: str) -> list[str]:
    """The other ways a rule set that reads number words reads the text: spelled numbers as digits, and the same
    with "and"/"und" as a separator ("add five hundred and two" is 502, or 500 and 2). Empty when it reads none."""
    if rs.number_words is None:
        return []
    out = [for_rules(rs, text), for_rules(rs, _AND.sub(" , ", text))]
    return [t for t in dict.fromkeys(out) if t != text]
