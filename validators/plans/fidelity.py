"""Argument fidelity: a precision tool computes what the query asks, on the query's own numbers, units and dates.

- ``invented_numbers``: every number in a precision tool's arguments is one the query states (in any reading: digits,
  number words, a percentage as a fraction, a duration in smaller units) or a small constant the rule set allows;
  results of earlier tasks come in as ``{result_of:ID}`` placeholders, never as literals.
- ``query_computations``: where the query itself states the computation ("7 hoch 5 minus 1000", "15% of 2840",
  "12 € per day for a week") it is turned into an expression and computed, so a plan's expression can be compared by
  value: "7 - 5 + 1000" loses the power.
- ``unit_problems`` / ``date_problems``: unit_convert's units and date_* dates are ones the query names.
- ``grounded``: does anything in a tool call come from the query at all (tool-unfounded, moe-routing@7)?

The data (allowed constants, unit names) is in the rule set's ``fidelity:`` section; the language patterns for
operators in words are here, in English and German.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from mashbill.validators.plans import drift, expr

# ---------------------------------------------------------------- numbers the query states

_WORDS = {
    "zero": 0, "null": 0, "one": 1, "eins": 1, "ein": 1, "eine": 1, "einen": 1, "a": 1, "an": 1, "two": 2, "zwei": 2,
    "three": 3, "drei": 3, "four": 4, "vier": 4, "five": 5, "fünf": 5, "six": 6, "sechs": 6, "seven": 7,
    "sieben": 7, "eight": 8, "acht": 8, "nine": 9, "neun": 9, "ten": 10, "zehn": 10, "eleven": 11, "elf": 11,
    "twelve": 12, "zwölf": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19, "twenty": 20, "zwanzig": 20, "thirty": 30, "dreißig": 30, "forty": 40,
    "vierzig": 40, "fifty": 50, "fünfzig": 50, "sixty": 60, "sechzig": 60, "hundred": 100, "hundert": 100,
    "thousand": 1000, "tausend": 1000, "million": 1e6, "dozen": 12, "dutzend": 12, "half": 0.5, "halb": 0.5,
    "hälfte": 0.5, "halbe": 0.5, "quarter": 0.25, "viertel": 0.25, "third": 3, "drittel": 3, "twice": 2,
    "double": 2, "doppelt": 2, "doppelte": 2, "triple": 3, "dreifach": 3, "dreifache": 3, "pair": 2, "paar": 2,
    "thrice": 3, "fourths": 4, "fourth": 4, "thirds": 3, "halves": 2, "quadruple": 4, "vierfach": 4, "vierfache": 4, "quarters": 25, "dime": 10, "dimes": 10, "nickel": 5,
    "nickels": 5, "penny": 1, "pennies": 1, "cents": 100, "cent": 100,
    "squared": 2, "quadrat": 2, "cubed": 3, "square": 2, "cube": 3, "percent": 100, "prozent": 100,
    # (@7) a multiplication as a verb ("the number doubles", "verdreifacht sich"): the factor is stated
    "doubles": 2, "doubled": 2, "doubling": 2, "triples": 3, "tripled": 3, "tripling": 3, "quadruples": 4,
    "quadrupled": 4, "halved": 2, "halving": 2, "verdoppelt": 2, "verdoppeln": 2, "verdoppelte": 2, "verdreifacht": 3,
    "verdreifachen": 3, "vervierfacht": 4, "halbiert": 2, "halbieren": 2,
}
# unit words whose presence allows a number scaled by a fixed factor ("2 weeks" -> 14 days, "3 hours" -> 180 minutes)
_SCALES = {
    "week": (7,), "weeks": (7,), "woche": (7,), "wochen": (7,), "hour": (60, 3600), "hours": (60, 3600),
    "stunde": (60, 3600), "stunden": (60, 3600), "day": (24, 1440), "days": (24,), "tag": (24,), "tage": (24,),
    "tagen": (24,), "year": (12, 52, 365), "years": (12, 52, 365), "jahr": (12, 52, 365), "jahre": (12, 52, 365),
    "jahren": (12, 52, 365), "month": (30,), "months": (30,), "monat": (30,), "monate": (30,), "monaten": (30,),
    "minute": (60,), "minutes": (60,), "minuten": (60,), "km": (1000,), "kilometer": (1000,), "kg": (1000,),
    "dozen": (12,), "dutzend": (12,),
}
_WORD_RE = re.compile(r"[a-zäöüß]+")


_ARTICLES = frozenset({"a", "an", "ein", "eine", "einen"})


def query_numbers(query: str, constants: list[float], articles: bool = True) -> set[float]:
    """Every value a faithful argument may take from this query (`articles`: "a", "an", "ein" ... read as 1)."""
    base: set[float] = set()
    per = expr.numbers_in(query)
    for vals in per:
        base.update(vals)
    for a, b in zip(per, per[1:]):  # "5' 7\"", "3 h 20 min", "1/3": a compound quantity in one unit
        for x in a:
            for y in b:
                base.update({x + y / 12, x + y / 60, x + y / 16, x + y / 100, x / y if y else 0.0})
    words = _WORD_RE.findall(query.lower())
    base.update(_WORDS[w] for w in words if w in _WORDS and (articles or w not in _ARTICLES))
    out = set(base) | set(constants)
    for n in base:
        out.update({n / 100, 1 + n / 100, 1 - n / 100, -n, 1 / n if n else 0.0})
    factors = {f for w in words for f in _SCALES.get(w, ())}
    for n in base:
        for f in factors:
            out.update({n * f, n / f})
    return out


def _allowed(x: float, allowed: set[float]) -> bool:
    if x in allowed or -x in allowed:  # the common case, without a closeness test against every allowed value
        return True
    rel = 1e-9 if x == int(x) else 1e-3  # a fraction may be written rounded ("0.3333" for 1/3)
    return any(expr.close(abs(x), abs(a), rel) for a in allowed)


def invented_numbers(query: str, args, constants: list[float]) -> list[float]:
    """Numbers in a tool's arguments the query does not state (literals only; placeholders are results)."""
    found: list[float] = []

    def walk(v, key=None):
        if isinstance(v, bool) or v is None:
            return
        if isinstance(v, (int, float)):
            found.append(float(v))
        elif isinstance(v, str):
            if expr.PLACEHOLDER.fullmatch(v.strip()):
                return
            try:
                found.extend(expr.constants(expr.parse(v)))
            except expr.ExprError:
                # machine-written arguments ("4,8,15,23", "x^2 = 16"): a point is decimal, a comma separates
                text = expr.PLACEHOLDER.sub(" ", v)
                found.extend(float(n) for n in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", text))
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(args)
    allowed = query_numbers(query, constants)
    bad = []
    for x in found:
        if not _allowed(x, allowed) and x not in bad:
            bad.append(x)
    return bad


# ---------------------------------------------------------------- computations the query states

_NUM = r"\d+(?:[.,]\d+)*"
_OPS = [
    (r"\*\*|\^|hoch|to the power of|raised to the power of|raised to|power of", "**"),
    (r"[*×·]|times|mal|multiplied by|multipliziert mit", "*"),
    (r"÷|geteilt durch|dividiert durch|divided by|durch", "/"),
    (r"\+|plus|added to", "+"),
    (r"minus|subtract(?:ed)?|weniger", "-"),
    (r"(?<=\s)[-−/:](?=\s)|(?<=\d)[-−/](?=\d)", None),  # spaced symbols: "-" "/" ":" (":" is division in German)
]
_OP = "(?:" + "|".join(p for p, _ in _OPS) + ")"
_PRE = r"(?:(?:the\s+)?(?:square root of|sqrt(?: of)?|quadratwurzel (?:aus|von)|wurzel (?:aus|von))\s*)"
_POST = r"(?:\s*(?:squared|cubed|zum quadrat|hoch (?:zwei|drei)))"
_TERM = rf"{_PRE}?\(?\s*{_NUM}\s*\)?{_POST}?"
_CHAIN = re.compile(rf"(?<![\w.,]){_TERM}(?:\s*{_OP}\s*{_TERM})+(?![\w])|(?<![\w.,]){_PRE}{_NUM}(?![\w.,])|"
                    rf"(?<![\w.,]){_NUM}{_POST}(?!\w)")
_PERCENT = re.compile(rf"(?<![\w.,])({_NUM})\s*(?:%|prozent|percent)\s+(?:of|von|vom|aus)\s+(?:the\s+|den\s+|der\s+)?"
                      rf"(?:€|\$|eur\s+|usd\s+)?({_NUM})(?![\w.,]\d)")
_PER = {"day": 1, "tag": 1, "hour": 1 / 24, "stunde": 1 / 24, "week": 7, "woche": 7, "month": 30, "monat": 30,
        "year": 365, "jahr": 365}
_RATE = re.compile(
    rf"(?:€|\$)?\s*({_NUM})\s*(?:€|\$|euros?|eur|dollars?|usd)?\s+(?:per|pro|a|an|each|je|every|jeden)\s+"
    r"(day|tag|hour|stunde|week|woche|month|monat)\w*\s+(?:for|für|over|über)\s+"
    rf"(?:(a|an|one|ein|eine|einen|{_NUM}|two|zwei|three|drei|four|vier|five|fünf|six|sechs|seven|sieben|ten|zehn)\s+)?"
    r"(days?|tage?n?|hours?|stunden?|weeks?|wochen?|months?|monate?n?|years?|jahre?n?)(?!\w)")


_OP_WORDS = re.compile("|".join(f"(?:{p})" for p, op in _OPS if op is not None) + r"|(?<=[\s}])[−/:-](?=[\s{])")
_OP_FIRST = [(re.compile(f"(?:{p})$"), op) for p, op in _OPS if op is not None]


def _op_for(token: str) -> str:
    for rx, op in _OP_FIRST:
        if rx.match(token):
            return op
    return "/" if token in "/:" else "-"


@dataclass(frozen=True)
class Computation:
    text: str  # as the query states it
    values: tuple[float, ...]  # its value under each reading of its numbers


def _to_python(chain: str) -> tuple[str, list[str]]:
    """The chain as a Python expression with {N} slots for its numbers, and the number tokens."""
    nums: list[str] = []

    def num(m):
        nums.append(m.group(0))
        return f"{{{len(nums) - 1}}}"

    s = re.sub(_NUM, num, chain)
    s = re.sub(_PRE, "sqrt ", s)
    s = re.sub(r"\s*(?:squared|zum quadrat|hoch zwei)", "**2", s)
    s = re.sub(r"\s*(?:cubed|hoch drei)", "**3", s)
    s = _OP_WORDS.sub(lambda m: f" {_op_for(m.group(0))} ", s)
    s = re.sub(r"sqrt\s*(\(?\{\d+\}\)?)", r"sqrt(\1)", s)
    return s, nums


def _evaluate_template(template: str, nums: list[str]) -> tuple[float, ...]:
    values = []
    for combo in expr.combinations([expr.readings(n) for n in nums]):
        try:
            values.append(expr.evaluate(expr.parse(template.format(*combo))))
        except (expr.ExprError, IndexError, KeyError):
            continue
    return tuple(dict.fromkeys(values))


_FRACTION = re.compile(r"\d+/\d+")
_INSIDE = re.compile(r"(?:[-−(^*/+×÷·_]|\d[eE]|\b(?:log\w*|ln|sin|cos|tan|sqrt|root|wurzel|of|von|aus|e))\s*$")
_CONTINUES = re.compile(r"^\s*(?:[)%^*/+×÷·!_]|e[-+]?\d|prozent|percent|[a-zäöü]*(?:root|wurzel))")


def _whole(q: str, start: int, end: int) -> bool:
    """Is the matched chain the whole computation, not a piece of a longer one (inside parentheses, after a function
    or a sign, before a percent sign or an exponent)?"""
    return not _INSIDE.search(q[max(0, start - 12):start]) and not _CONTINUES.match(q[end:end + 12])


_REMAINDER = re.compile(r"(?i)\b(?:remainder|rest|modulo|mod)\b")


def remainders(query: str, text: str) -> tuple[float, ...]:
    """a mod b for a division the query states ("welcher Rest bleibt bei 17 durch 5" -> 2), in every reading of its
    numbers, when the query asks for a remainder; else nothing."""
    if _REMAINDER.search(query) is None:
        return ()
    per = expr.numbers_in(text)
    if len(per) != 2:
        return ()
    return tuple(a % b for a in per[0] for b in per[1] if b)


def query_computations(query: str) -> list[Computation]:
    """The computations a query states outright, each with its value(s); [] when it states none."""
    q = query.lower()
    out: list[Computation] = []
    for m in _PERCENT.finditer(q):
        vals = tuple(p / 100 * b for p in expr.readings(m.group(1)) for b in expr.readings(m.group(2)))
        out.append(Computation(m.group(0).strip(), vals))
    for m in _RATE.finditer(q):
        count = m.group(3) or "1"
        counts = expr.readings(count) if count[0].isdigit() else (float(_WORDS.get(count, 1)),)
        unit2 = m.group(4).rstrip("sn").rstrip("e") if not m.group(4).startswith(("tag", "stund")) else m.group(4)[:4]
        per = _PER.get(m.group(2), 1)
        span = next((v for k, v in _PER.items() if unit2.startswith(k[:4])), 1)
        vals = tuple(r * c * span / per for r in expr.readings(m.group(1)) for c in counts)
        out.append(Computation(m.group(0).strip(), vals))
    for m in _CHAIN.finditer(q):
        text = m.group(0).strip()
        if any(text in c.text or c.text in text for c in out) or not _whole(q, m.start(), m.end()):
            continue
        if _FRACTION.fullmatch(text):
            continue  # "3/4 of the building": a quantity, not the computation asked for
        template, nums = _to_python(text)
        vals = _evaluate_template(template, nums)
        if vals:
            out.append(Computation(text, vals))
    # the query states the computation only when no number stands outside it (a word problem has more numbers)
    stated = " ".join(c.text for c in out)
    if len(expr.numbers_in(q)) > len(expr.numbers_in(stated)):
        return []
    return out


def plan_values(tasks) -> tuple[dict[str, float], list[tuple[str, str, str]]]:
    """Values of every calculate task's expression (task id -> value), placeholders filled in from earlier tasks;
    and (task id, expression, reason) for each expression that cannot be parsed or computed."""
    values: dict[str, float] = {}
    unparsable: list[tuple[str, str, str]] = []
    for t in tasks:
        args = t.get("mcp_args")
        e = args.get("expression") if isinstance(args, dict) else None
        if not isinstance(e, str):
            continue
        try:
            tree = expr.parse(e)
        except expr.ExprError as exc:
            unparsable.append((t.id, e, str(exc)))
            continue
        results = {"__r_" + re.sub(r"[^0-9A-Za-z_]", "_", k): v for k, v in values.items()}
        try:
            values[t.id] = expr.evaluate(tree, results)
        except expr.ExprError as exc:
            if not expr.placeholders(tree):
                unparsable.append((t.id, e, str(exc)))
    return values, unparsable


# ---------------------------------------------------------------- units


_UNITS: dict[int, tuple[dict, dict[str, str]]] = {}
_UNIT_TOKEN = re.compile(r"°\s?[cf](?![a-z])|\d+(?:[.,]\d+)*|[^\W\d_]+(?:/[^\W\d_]+)?|['\"]")
_UNIT_BEFORE = {"to", "in", "into", "zu", "nach", "von", "from", "many", "much", "viele", "viel", "vielen", "a", "an", "one",
                "ein", "eine", "einen", "per", "pro", "und", "and"}
_UNIT_AFTER = {"to", "in", "into", "nach", "zu", "equal", "equals", "make", "sind", "is", "are", "ist"}


def _key(name: str) -> str:
    return re.sub(r"[\s.]", "", name.lower())


def unit_index(units: dict[str, list[str]]) -> dict[str, str]:
    """name (lower-case, without spaces and dots) -> canonical unit (memoised per units table)."""
    hit = _UNITS.get(id(units))
    if hit is None or hit[0] is not units:
        idx: dict[str, str] = {}
        for canon, aliases in units.items():
            for a in [canon, *aliases]:
                idx.setdefault(_key(a), canon)
        hit = _UNITS[id(units)] = (units, idx)
    return hit[1]


# the query's own notation for "in which unit": "10 lbs ?= kg", "5 m =? ft", "7 ? kg", "3 ft = ? cm"
_ASKS = re.compile(r"\s*(?:\?\s*=|=\s*\?|=|(?<=\w)\s+\?(?=\s+\w))\s*")


def units_named(query: str, units: dict[str, list[str]], notation: bool = False) -> set[str]:
    """The units a query names: its words and runs of up to four words looked up in the unit table. A name of one
    or two letters ("m", "in", "ft") counts only after a number or after "to"/"in"/"nach"... (`notation`: also
    after "=", "?=", "=?" or a lone "?", read as "to")."""
    idx = unit_index(units)
    low = query.lower()
    if notation and ("=" in low or "?" in low):
        low = _ASKS.sub(" to ", low)
    toks = _UNIT_TOKEN.findall(low)
    named = set()
    for i, t in enumerate(toks):
        key = ""
        for n in range(4):
            if i + n >= len(toks):
                break
            key += _key(toks[i + n])
            canon = idx.get(key)
            if canon is None:
                continue
            short = n == 0 and len(t) <= 2 and t[0].isalpha()
            if short and len(toks) > 2 and not ((i and (toks[i - 1][0].isdigit() or toks[i - 1] in _UNIT_BEFORE))
                              or (i + 1 < len(toks) and toks[i + 1] in _UNIT_AFTER)):
                continue
            named.add(canon)
    return named


def unit_problems(query: str, args, units: dict[str, list[str]], notation: bool = False) -> list[str]:
    if not isinstance(args, dict):
        return []
    idx = unit_index(units)
    named = units_named(query, units, notation)
    out = []
    for key in ("from_unit", "to_unit"):
        u = args.get(key)
        if not isinstance(u, str) or not u.strip():
            continue  # a missing unit is the argument schema's finding (PLAN007)
        canon = idx.get(_key(u))
        if canon is None:
            continue  # a unit this rule set does not know: no judgement
        if canon not in named:
            out.append(f"{key} '{u}' is not a unit the query names ({', '.join(sorted(named)) or 'none found'})")
    return out


# ---------------------------------------------------------------- dates

_MONTHS = {"jan": 1, "januar": 1, "january": 1, "jänner": 1, "feb": 2, "februar": 2, "february": 2, "mär": 3,
           "märz": 3, "mar": 3, "march": 3, "apr": 4, "april": 4, "mai": 5, "may": 5, "jun": 6, "juni": 6, "june": 6,
           "jul": 7, "juli": 7, "july": 7, "aug": 8, "august": 8, "sep": 9, "sept": 9, "september": 9, "okt": 10,
           "oktober": 10, "oct": 10, "october": 10, "nov": 11, "november": 11, "dez": 12, "dezember": 12, "dec": 12,
           "december": 12}
_MON = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_HOLIDAYS = [(r"heiligabend|christmas eve", [(12, 24)]), (r"weihnacht\w*|christmas|xmas", [(12, 24), (12, 25), (12, 26)]),
             (r"silvester|new year'?s eve", [(12, 31)]), (r"neujahr|new year'?s(?: day)?", [(1, 1)]),
             (r"halloween", [(10, 31)]), (r"valentine'?s", [(2, 14)]), (r"tag der deutschen einheit", [(10, 3)])]
_RELATIVE = re.compile(r"\b(?:today|tomorrow|yesterday|now|tonight|heute|morgen|gestern|jetzt|übermorgen|"
                       r"vorgestern|this|next|last|coming|nächste\w*|kommende\w*|letzte\w*|diese\w*|current|aktuell\w*|"
                       r"from now|ab jetzt|ago|until|till|bis|since|seit|monday|tuesday|wednesday|thursday|friday|"
                       r"saturday|sunday|montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag)\b")


_ISO = re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")
_DOTTED = re.compile(r"(?<![\d.])(\d{1,2})\.\s?(\d{1,2})\.(?:\s?(\d{4}|\d{2})(?!\d))?")
_SLASHED = re.compile(r"(?<![\d/])(\d{1,2})/(\d{1,2})(?:/(\d{4}|\d{2}))?(?![\d/])")
_DAY_MONTH = re.compile(rf"(?<!\w)(\d{{1,2}})(?:st|nd|rd|th|\.)?\s+(?:of\s+)?{_MON}(?:,?\s+(\d{{4}}))?(?!\w)")
_MONTH_DAY = re.compile(rf"(?<!\w){_MON}\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?(?!\w)")
_HOLIDAY_RES = [(re.compile(rf"(?<!\w)(?:{p})"), days) for p, days in _HOLIDAYS]
_HOLIDAY_ANY = re.compile(r"\b(?:" + "|".join(p for p, _ in _HOLIDAYS) + ")")


def _year(y: str | None) -> int | None:
    if not y:
        return None
    n = int(y)
    return n + 2000 if n < 100 else n


def query_dates(query: str) -> tuple[set[tuple[int | None, int, int]], bool]:
    """(year or None, month, day) for every date the query names, and whether it also refers to a relative date."""
    q = query.lower()
    out: set[tuple[int | None, int, int]] = set()
    if not any(c.isdigit() for c in q) and not _HOLIDAY_ANY.search(q):
        return out, bool(_RELATIVE.search(q))
    for m in _ISO.finditer(q):
        out.add((int(m.group(1)), int(m.group(2)), int(m.group(3))))
    for m in _DOTTED.finditer(q):
        out.add((_year(m.group(3)), int(m.group(2)), int(m.group(1))))
    for m in _SLASHED.finditer(q):
        a, b, y = int(m.group(1)), int(m.group(2)), _year(m.group(3))
        out.update({(y, a, b), (y, b, a)})  # month/day or day/month: either reading
    for m in _DAY_MONTH.finditer(q):
        out.add((_year(m.group(3)), _MONTHS[m.group(2)], int(m.group(1))))
    for m in _MONTH_DAY.finditer(q):
        out.add((_year(m.group(3)), _MONTHS[m.group(1)], int(m.group(2))))
    years = {int(y) for y in re.findall(r"(?<!\d)((?:19|20)\d{2})(?!\d)", q)}
    for rx, days in _HOLIDAY_RES:
        if rx.search(q):
            for md in days:
                out.update({(y, *md) for y in years} or {(None, *md)})
    return out, bool(_RELATIVE.search(q))


def date_problems(query: str, args) -> list[str]:
    if not isinstance(args, dict):
        return []
    named, relative = query_dates(query)
    if not named:
        return []  # the query names no date we can read ("in two weeks"): nothing to compare with
    out = []
    for key, v in args.items():
        if not isinstance(v, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v.strip()):
            continue
        try:
            d = date.fromisoformat(v.strip())
        except ValueError:
            continue
        if any((y is None or y == d.year) and (m, dd) == (d.month, d.day) for y, m, dd in named):
            continue
        if relative:
            continue  # "today", "next Friday", "bis ...": the other date is relative, we cannot know it
        shown = ", ".join(f"{y or '????'}-{m:02d}-{dd:02d}" for y, m, dd in sorted(named, key=lambda x: (x[0] or 0, x[1:])))
        out.append(f"{key} '{v}' is not a date the query names ({shown})")
    return out


# ---------------------------------------------------------------- grounding (tool-unfounded, moe-routing@7)

_ISO_ARG = re.compile(r"\d{4}-\d{2}-\d{2}")
_ARG_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def grounded(query: str, args, units: dict[str, list[str]], options=(), readings=(), notation: bool = False,
             names=None) -> bool:
    """Does any argument of a tool call come from the query: a number it states (in any reading, `readings` being its
    other spellings, such as spelled numbers as digits; a constant any plan may use or a bare article does not count),
    a unit or date it names, a word of its subject, or an earlier task's result ({result_of:ID})? The values of the
    `options` arguments (operation, algorithm, mode ...) choose how a tool computes, not on what: they are not read.
    `names(key, value)`, where given, says whether the query names a string value in its own way (a law's full name
    for "BGB")."""
    texts = [query, *readings]
    stated = set().union(*(query_numbers(t, [], articles=False) for t in texts))
    named_units = set().union(*(units_named(t, units, notation) for t in texts)) if units else set()
    idx = unit_index(units) if units else {}
    low = " ".join(query.lower().split())
    query_roots = drift.roots(query)

    def number(x: float) -> bool:
        return _allowed(float(x), stated)

    def text(key, v: str) -> bool:
        s = v.strip()
        if not s:
            return False
        if expr.PLACEHOLDER.search(s):
            return True  # an earlier task's result
        if key in ("from_unit", "to_unit") and idx.get(_key(s)) is not None:
            return idx[_key(s)] in named_units
        if _ISO_ARG.fullmatch(s):
            named, _ = query_dates(query)
            d = tuple(int(x) for x in s.split("-"))
            return any((y is None or y == d[0]) and (m, dd) == d[1:] for y, m, dd in named)
        try:
            nums = expr.constants(expr.parse(s))
        except expr.ExprError:
            nums = [float(n) for n in _ARG_NUMBER.findall(s)]
            quoted = " ".join(s.lower().split())
            if len(quoted) >= 2 and re.search(rf"(?<!\w){re.escape(quoted)}(?!\w)", low):
                return True  # quoted from the query ("BGB", "hello world")
            if any(not r[0].isdigit() for r in drift.shared_roots(drift.roots(s), query_roots)):
                return True  # shares a word of the query's subject (its numbers are judged as numbers)
            if names is not None and names(key, s):
                return True
        return any(number(n) for n in nums)

    def walk(v, key=None) -> bool:
        if key in options or isinstance(v, bool) or v is None:
            return False
        if isinstance(v, (int, float)):
            return number(v)
        if isinstance(v, str):
            return text(key, v)
        if isinstance(v, dict):
            return any(walk(x, k) for k, x in v.items())
        if isinstance(v, list):
            return any(walk(x, key) for x in v)
        return False

    return walk(args)
