"""The paraphrase suite: requests written from classes of phrasing, not from rows of any public source, each with
its gold tool and operands, to measure whether the tool-routing cues hold on wording they were not grown on.

    .venv/bin/python bench/paraphrase_suite.py [--seed 23] [--per-class N] [--out bench/data/paraphrase-suite.jsonl]

Every class has templates in English and German; numbers are written as digits, words, decimals (2.5 / 2,5),
leading-dot decimals and with thousands separators (4,360 / 4.360); units as names, abbreviations and symbols, the
target unit before or after the quantity. Two sides:
- need a tool (`tool` is the gold tool, `operands` the numbers the request states, `plan` a plan that calls the
  gold tool with them): arithmetic notation, number words, functions (roots, log2, remainders), percentages, unit
  conversions, word problems, rates, time zones, minute and day shifts;
- look-alikes that need none (`tool` is ""): "evaluate" an argument or a review, "how many" in factual look-ups,
  lyrics and novels, numbers without a computation (years, versions, counts), unit and time-zone words without a
  quantity to convert, code requests that name numbers, questions about a maths concept, distances and durations
  asked as facts.

The same seed writes the same suite (`bench/triggers.py --suite` builds it in memory with the default seed).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SEED = 23
PER_CLASS = 150
OUT = Path(__file__).with_name("data") / "paraphrase-suite.jsonl"

_EN_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen " \
           "seventeen eighteen nineteen".split()
_EN_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_DE_ONES = "null eins zwei drei vier fünf sechs sieben acht neun zehn elf zwölf dreizehn vierzehn fünfzehn sechzehn " \
           "siebzehn achtzehn neunzehn".split()
_DE_TENS = "_ _ zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig neunzig".split()


def words_en(n: int) -> str:
    if n < 20:
        return _EN_ONES[n]
    if n < 100:
        return _EN_TENS[n // 10] + ("-" + _EN_ONES[n % 10] if n % 10 else "")
    if n < 1000:
        return _EN_ONES[n // 100] + " hundred" + (" " + words_en(n % 100) if n % 100 else "")
    return words_en(n // 1000) + " thousand" + (" " + words_en(n % 1000) if n % 1000 else "")


def words_de(n: int) -> str:
    if n < 20:
        return _DE_ONES[n]
    if n < 100:
        one = "ein" if n % 10 == 1 else _DE_ONES[n % 10]
        return (one + "und" if n % 10 else "") + _DE_TENS[n // 10]
    if n < 1000:
        head = "ein" if n // 100 == 1 else _DE_ONES[n // 100]
        return head + "hundert" + (words_de(n % 100) if n % 100 else "")
    head = "ein" if n // 1000 == 1 else words_de(n // 1000)
    return head + "tausend" + (words_de(n % 1000) if n % 1000 else "")


def digits(x: float, lang: str, sep: bool = False) -> str:
    """A number in digits as the language writes it (2.5 / 2,5; with sep, 4,360 / 4.360)."""
    if float(x) == int(x):
        s = f"{int(x):,}" if sep else str(int(x))
        return s.replace(",", ".") if lang == "de" else s
    s = f"{x:,}" if sep else f"{x}"
    if lang == "de":
        s = s.replace(",", "\0").replace(".", ",").replace("\0", ".")
    return s


class Num:
    """A number and the ways to write it: digits, words, a decimal, a leading-dot decimal, with separators."""

    def __init__(self, rng: random.Random, lang: str):
        self.rng, self.lang = rng, lang

    def pick(self, lo: int = 2, hi: int = 99, forms=("digit", "digit", "word", "decimal", "sep")) -> tuple[float, str]:
        r, form = self.rng, self.rng.choice(forms)
        if form == "word":
            v = r.choice([r.randint(2, 20), r.randint(21, 99), r.randint(1, 9) * 100, r.randint(1, 9) * 100 + r.randint(1, 99)])
            return float(v), (words_en(v) if self.lang == "en" else words_de(v))
        if form == "decimal":
            v = round(r.randint(lo, hi) + r.choice([0.5, 0.25, 0.75, 0.1, 0.2, 0.4]), 2)
            return v, digits(v, self.lang)
        if form == "dot" and self.lang == "en":
            v = r.choice([0.5, 0.25, 0.75, 0.2, 0.125])
            return v, str(v)[1:]
        if form == "sep":
            v = r.randint(1001, 98000)
            return float(v), digits(v, self.lang, sep=True)
        v = r.randint(lo, hi)
        return float(v), digits(v, self.lang)


def _calc(expression: str) -> list[dict]:
    return [{"task": "Compute the value asked for", "category": "precision_tools", "mcp_tool": "calculate",
             "mcp_args": {"expression": expression}}]


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) else repr(x)


# ------------------------------------------------------------------------------------------- tool-needing classes

_OPS = {"en": [("+", "+"), ("plus", "+"), ("-", "-"), ("minus", "-"), ("x", "*"), ("×", "*"), ("∙", "*"), ("*", "*"),
               ("times", "*"), ("multiplied by", "*"), ("/", "/"), ("÷", "/"), ("divided by", "/")],
        "de": [("+", "+"), ("plus", "+"), ("-", "-"), ("minus", "-"), ("x", "*"), ("×", "*"), ("∙", "*"), ("*", "*"),
               ("mal", "*"), ("multipliziert mit", "*"), ("/", "/"), ("÷", "/"), ("geteilt durch", "/"),
               ("durch", "/")]}
_WRAP = {"en": ["what is {e}?", "what's {e}", "{e} =", "calculate {e}", "how much is {e}?", "{e}", "compute {e} please",
                "can you work out {e}?", "{e} equals?", "quick question: {e}?", "solve {e}", "what does {e} come to?"],
         "de": ["was ist {e}?", "wie viel ist {e}?", "{e} =", "berechne {e}", "rechne {e}", "{e}", "was ergibt {e}?",
                "was kommt bei {e} raus?", "bitte {e} ausrechnen", "kannst du {e} ausrechnen?", "{e} ergibt?",
                "wie viel sind {e}?"]}


def arithmetic(rng, lang):
    n = Num(rng, lang)
    a, sa = n.pick(forms=("digit", "digit", "decimal", "sep", "dot"))
    b, sb = n.pick(forms=("digit", "digit", "decimal", "dot"))
    word, op = rng.choice(_OPS[lang])
    if word in ("-", "+", "/", "*", "x", "×", "∙", "÷") and rng.random() < 0.3:
        e = f"{sa}{word}{sb}" if word != "x" else f"{sa} x {sb}"
    else:
        e = f"{sa} {word} {sb}"
    q = rng.choice(_WRAP[lang]).format(e=e)
    return q, "calculate", [a, b], _calc(f"{_fmt(a)}{op}{_fmt(b)}")


def number_words(rng, lang):
    n = Num(rng, lang)
    a, sa = n.pick(forms=("word",))
    b, sb = n.pick(forms=("word", "digit"))
    if lang == "en":
        t, op = rng.choice([("divide {a} by {b}", "/"), ("multiply {a} by {b}", "*"), ("add {a} and {b}", "+"),
                            ("subtract {b} from {a}", "-"), ("what is {a} times {b}?", "*"), ("{a} plus {b}", "+"),
                            ("what's {a} divided by {b}", "/"), ("{a} minus {b} equals what?", "-"),
                            ("how much is {a} times {b}?", "*"), ("the product of {a} and {b}", "*"),
                            ("the sum of {a} and {b}", "+")])
    else:
        t, op = rng.choice([("teile {a} durch {b}", "/"), ("multipliziere {a} mit {b}", "*"), ("addiere {a} und {b}", "+"),
                            ("ziehe {b} von {a} ab", "-"), ("was ist {a} mal {b}?", "*"), ("{a} plus {b}", "+"),
                            ("was ist {a} geteilt durch {b}?", "/"), ("{a} minus {b} ergibt?", "-"),
                            ("wie viel ist {a} mal {b}?", "*"), ("das produkt von {a} und {b}", "*"),
                            ("die summe von {a} und {b}", "+")])
    q = t.format(a=sa, b=sb)
    return q[0].upper() + q[1:], "calculate", [a, b], _calc(f"{_fmt(a)}{op}{_fmt(b)}")


def functions(rng, lang):
    n = Num(rng, lang)
    a, sa = n.pick(lo=2, hi=999, forms=("digit", "digit", "decimal", "sep"))
    b, sb = n.pick(lo=2, hi=12, forms=("digit",))
    if lang == "en":
        t, e = rng.choice([("square root of {a}", "sqrt({a})"), ("what is the square root of {a}?", "sqrt({a})"),
                           ("log2 of {a}", "log2({a})"), ("log2({a})", "log2({a})"), ("log base 2 of {a}", "log2({a})"),
                           ("remainder of {a} divided by {b}", "{a} % {b}"), ("{a} mod {b}", "{a} % {b}"),
                           ("what is the remainder when {a} is divided by {b}?", "{a} % {b}"),
                           ("{a} to the power of {b}", "{a}**{b}"), ("{a} squared", "{a}**2"),
                           ("cube root of {a}", "{a}**(1/3)"), ("natural log of {a}", "ln({a})"),
                           ("{b}th root of {a}", "{a}**(1/{b})"), ("{a} raised to {b}", "{a}**{b}")])
    else:
        t, e = rng.choice([("Wurzel aus {a}", "sqrt({a})"), ("was ist die Quadratwurzel von {a}?", "sqrt({a})"),
                           ("log2 von {a}", "log2({a})"), ("log2({a})", "log2({a})"),
                           ("Logarithmus zur Basis 2 von {a}", "log2({a})"),
                           ("Rest von {a} geteilt durch {b}", "{a} % {b}"), ("{a} modulo {b}", "{a} % {b}"),
                           ("welcher Rest bleibt bei {a} durch {b}?", "{a} % {b}"),
                           ("{a} hoch {b}", "{a}**{b}"), ("{a} zum Quadrat", "{a}**2"),
                           ("Kubikwurzel von {a}", "{a}**(1/3)"), ("natürlicher Logarithmus von {a}", "ln({a})"),
                           ("{a} in der {b}. Potenz", "{a}**{b}")])
    q = t.format(a=sa, b=sb)
    ops = [a, b] if "{b}" in t else [a]
    return q[0].upper() + q[1:], "calculate", ops, _calc(e.format(a=_fmt(a), b=_fmt(b)))


def percent(rng, lang):
    n = Num(rng, lang)
    p, sp = n.pick(lo=2, hi=60, forms=("digit", "digit", "decimal"))
    x, sx = n.pick(lo=20, hi=9999, forms=("digit", "sep", "decimal"))
    if lang == "en":
        t = rng.choice(["What is {p}% of {x}?", "{p} percent of {x}", "calculate {p}% of {x}", "{p}% of ${x}?",
                        "how much is {p} percent of {x}?", "what's {p}% of {x} dollars", "find {p}% of {x}",
                        "{p}% off {x}: what is the discount?", "take {p} percent of {x}"])
    else:
        t = rng.choice(["Was sind {p} % von {x}?", "{p} Prozent von {x}", "berechne {p}% von {x}", "{p} % von {x} €?",
                        "wie viel sind {p} Prozent von {x}?", "wie viel ist {p}% von {x} Euro", "{p} Prozent aus {x}",
                        "rechne {p} % von {x} aus", "ermittle {p}% von {x}"])
    return t.format(p=sp, x=sx), "calculate", [p, x], _calc(f"{_fmt(p)}/100*{_fmt(x)}")


# (dimension) -> [(pint name, [names en], [names de], [abbreviations and symbols])]
_UNITS = {
    "length": [("km", ["kilometers", "kilometres"], ["Kilometer"], ["km"]), ("mile", ["miles"], ["Meilen"], ["mi"]),
               ("m", ["meters", "metres"], ["Meter"], ["m"]), ("foot", ["feet"], ["Fuß"], ["ft"]),
               ("inch", ["inches"], ["Zoll"], ["in.", "″"]), ("cm", ["centimeters"], ["Zentimeter"], ["cm"]),
               ("yard", ["yards"], ["Yards"], ["yd"]), ("micrometer", ["micrometers"], ["Mikrometer"], ["µm"]),
               ("mm", ["millimeters"], ["Millimeter"], ["mm"]), ("nautical_mile", ["nautical miles"], ["Seemeilen"], ["nmi"])],
    "mass": [("kg", ["kilograms"], ["Kilogramm"], ["kg"]), ("lb", ["pounds"], ["Pfund"], ["lb", "lbs", "lbm"]),
             ("g", ["grams"], ["Gramm"], ["g"]), ("oz", ["ounces"], ["Unzen"], ["oz"]),
             ("stone", ["stone"], ["Stone"], ["st"]), ("metric_ton", ["tonnes"], ["Tonnen"], ["t"])],
    "temperature": [("degC", ["degrees Celsius", "Celsius"], ["Grad Celsius"], ["°C"]),
                    ("degF", ["degrees Fahrenheit", "Fahrenheit"], ["Grad Fahrenheit"], ["°F"]),
                    ("kelvin", ["kelvin"], ["Kelvin"], ["K"])],
    "energy": [("kWh", ["kilowatt hours"], ["Kilowattstunden"], ["kWh"]), ("J", ["joules"], ["Joule"], ["J"]),
               ("kcal", ["kilocalories"], ["Kilokalorien"], ["kcal"]), ("MJ", ["megajoules"], ["Megajoule"], ["MJ"])],
    "volume": [("l", ["liters", "litres"], ["Liter"], ["l", "L"]), ("gallon", ["gallons"], ["Gallonen"], ["gal"]),
               ("ml", ["milliliters"], ["Milliliter"], ["ml"]), ("cup", ["cups"], ["Tassen"], ["cups"]),
               ("fl_oz", ["fluid ounces"], ["Flüssigunzen"], ["fl oz"])],
    "speed": [("km/h", ["kilometers per hour"], ["Kilometer pro Stunde"], ["km/h", "kph"]),
              ("mph", ["miles per hour"], ["Meilen pro Stunde"], ["mph"]), ("m/s", ["meters per second"], ["Meter pro Sekunde"], ["m/s"]),
              ("knot", ["knots"], ["Knoten"], ["kn"])],
    "area": [("m**2", ["square meters"], ["Quadratmeter"], ["m²", "sq m"]), ("ft**2", ["square feet"], ["Quadratfuß"], ["sq ft", "ft²"]),
             ("acre", ["acres"], ["Acres"], ["ac"]), ("hectare", ["hectares"], ["Hektar"], ["ha"])],
    "data": [("GB", ["gigabytes"], ["Gigabyte"], ["GB"]), ("MB", ["megabytes"], ["Megabyte"], ["MB"]),
             ("TB", ["terabytes"], ["Terabyte"], ["TB"]), ("GiB", ["gibibytes"], ["Gibibyte"], ["GiB"])],
    "pressure": [("bar", ["bar"], ["Bar"], ["bar"]), ("psi", ["psi"], ["psi"], ["psi"]), ("kPa", ["kilopascals"], ["Kilopascal"], ["kPa"])],
}


def _unit_name(rng, unit, lang, plural=True):
    canon, en, de, abbr = unit
    if rng.random() < 0.5:
        return rng.choice(abbr)
    return rng.choice(en if lang == "en" else de)


def units(rng, lang):
    n = Num(rng, lang)
    dim = rng.choice(sorted(_UNITS))
    u1, u2 = rng.sample(_UNITS[dim], 2)
    v, sv = n.pick(lo=1, hi=500, forms=("digit", "digit", "decimal", "sep", "word"))
    a, b = _unit_name(rng, u1, lang), _unit_name(rng, u2, lang)
    glued = f"{sv}{a}" if a in ("°C", "°F", "km", "kg", "mi", "lbs", "µm", "kWh", "ml", "m²") and sv[-1].isdigit() else f"{sv} {a}"
    if lang == "en":
        t = rng.choice(["convert {q} to {b}", "{q} in {b}", "how many {b} in {q}?", "{b} in {q}", "{q} equals what in {b}?",
                        "{q} = ? {b}", "{q} =? {b}", "what is {q} in {b}?", "{q} to {b}", "how many {b} are {q}?",
                        "{q} is how many {b}?", "{q} into {b} please", "what's {q} in {b}", "{q} converted to {b}"])
    else:
        t = rng.choice(["rechne {q} in {b} um", "{q} in {b}", "wie viele {b} sind {q}?", "{q} = ? {b}",
                        "was sind {q} in {b}?", "{q} nach {b}", "{q} umrechnen in {b}", "wie viel {b} sind {q}?",
                        "wie viele {b} ergeben {q}?", "{q} entsprechen wie vielen {b}?", "{q} in {b} umrechnen bitte"])
    q = t.format(q=glued, b=b)
    plan = [{"task": "Convert the quantity", "category": "precision_tools", "mcp_tool": "unit_convert",
             "mcp_args": {"value": v, "from_unit": u1[0], "to_unit": u2[0]}}]
    return q[0].upper() + q[1:], "unit_convert", [v], plan


_ITEMS = {"en": ["apples", "notebooks", "tickets", "pens", "shirts", "bottles of water", "boxes of tea"],
          "de": ["Äpfel", "Hefte", "Tickets", "Stifte", "Hemden", "Flaschen Wasser", "Packungen Tee"]}
_NAMES = ["Tom", "Mia", "Lena", "Omar", "Jonas", "Priya", "Ben", "Sara"]


def word_problem(rng, lang):
    n = Num(rng, lang)
    a, sa = n.pick(lo=2, hi=40, forms=("digit", "word"))
    b, sb = n.pick(lo=2, hi=90, forms=("digit", "decimal"))
    who, item = rng.choice(_NAMES), rng.choice(_ITEMS[lang])
    # (template, the expression that answers it): the gold plan computes from the stated numbers only
    if lang == "en":
        t, e = rng.choice([("{w} buys {a} {i} at ${b} each. What's the total?", "{a}*{b}"),
                           ("{w} buys {a} {i} for ${b} each. what is the total cost?", "{a}*{b}"),
                           ("A jacket costs ${b} and is on sale for {a}% off. What was the final price?", "{b}*(1-{a}/100)"),
                           ("{w} had {b} dollars and spent {a}. How much money is left?", "{b}-{a}"),
                           ("{w} bakes a dozen muffins a day for {a} days. How many muffins in total?", "12*{a}"),
                           ("{w} reads a third of a {b}-page book on Monday and {a} pages on Tuesday. How many pages are left?", "{b}-{b}/3-{a}"),
                           ("If {a} friends share a ${b} bill equally, how much does each pay?", "{b}/{a}"),
                           ("{w} earns ${b} an hour and works {a} hours. What does {w} make?", "{a}*{b}"),
                           ("A tank holds {b} liters and is filled at {a} liters per minute. How long until it is full?", "{b}/{a}"),
                           ("There are {a} boxes with {b} {i} in each. What's the total number of {i}?", "{a}*{b}")])
    else:
        t, e = rng.choice([("{w} kauft {a} {i} zu je {b} €. Wie viel kostet das insgesamt?", "{a}*{b}"),
                           ("{w} kauft {a} {i} für je {b} Euro. Was ist der Gesamtpreis?", "{a}*{b}"),
                           ("Eine Jacke kostet {b} € und ist um {a} % reduziert. Was ist der Endpreis?", "{b}*(1-{a}/100)"),
                           ("{w} hatte {b} Euro und gibt {a} aus. Wie viel Geld bleibt übrig?", "{b}-{a}"),
                           ("{w} backt {a} Tage lang jeden Tag ein Dutzend Muffins. Wie viele Muffins sind das insgesamt?", "12*{a}"),
                           ("{w} liest montags ein Drittel eines {b}-seitigen Buches und dienstags {a} Seiten. Wie viele Seiten fehlen noch?", "{b}-{b}/3-{a}"),
                           ("Wenn {a} Freunde eine Rechnung von {b} € teilen, wie viel zahlt jeder?", "{b}/{a}"),
                           ("{w} verdient {b} € pro Stunde und arbeitet {a} Stunden. Wie viel verdient {w}?", "{a}*{b}"),
                           ("Ein Tank fasst {b} Liter und wird mit {a} Litern pro Minute gefüllt. Wie lange dauert es, bis er voll ist?", "{b}/{a}"),
                           ("Es gibt {a} Kisten mit je {b} {i}. Wie viele {i} sind es zusammen?", "{a}*{b}")])
    q = t.format(w=who, a=sa, b=sb, i=item)
    ops = [x for x, k in ((a, "{a}"), (b, "{b}")) if k in t]
    return q, "calculate", ops, _calc(e.format(a=_fmt(a), b=_fmt(b)))


def rates(rng, lang):
    n = Num(rng, lang)
    d, sd = n.pick(lo=40, hi=900, forms=("digit", "digit", "decimal"))
    h, sh = n.pick(lo=2, hi=9, forms=("digit", "word", "decimal"))
    if lang == "en":
        t, e = rng.choice([("A car covers {d} km in {h} hours. What is its average speed?", "{d}/{h}"),
                           ("A train travels {d} miles in {h} hours: what is its speed?", "{d}/{h}"),
                           ("{h} kg of cheese cost ${d}. What is the price per kg?", "{d}/{h}"),
                           ("If {h} liters of paint cost {d} dollars, what does one liter cost?", "{d}/{h}"),
                           ("A cyclist rides {d} km in {h} hours; how fast is she going on average?", "{d}/{h}"),
                           ("The price went from ${h} to ${d}. What is the percentage change?", "({d}-{h})/{h}*100"),
                           ("Sales rose from {h} to {d} units. By what percent did they increase?", "({d}-{h})/{h}*100"),
                           ("A pump moves {d} liters in {h} minutes. What is its flow rate per minute?", "{d}/{h}")])
    else:
        t, e = rng.choice([("Ein Auto fährt {d} km in {h} Stunden. Wie hoch ist die Durchschnittsgeschwindigkeit?", "{d}/{h}"),
                           ("Ein Zug legt {d} km in {h} Stunden zurück: wie schnell fährt er?", "{d}/{h}"),
                           ("{h} kg Käse kosten {d} €. Was kostet ein Kilo?", "{d}/{h}"),
                           ("Wenn {h} Liter Farbe {d} Euro kosten, was kostet ein Liter?", "{d}/{h}"),
                           ("Eine Radfahrerin fährt {d} km in {h} Stunden; wie schnell ist sie im Schnitt?", "{d}/{h}"),
                           ("Der Preis stieg von {h} € auf {d} €. Um wie viel Prozent ist er gestiegen?", "({d}-{h})/{h}*100"),
                           ("Der Umsatz stieg von {h} auf {d} Stück. Wie groß ist die prozentuale Veränderung?", "({d}-{h})/{h}*100"),
                           ("Eine Pumpe fördert {d} Liter in {h} Minuten. Wie viel ist das pro Minute?", "{d}/{h}")])
    q = t.format(d=sd, h=sh)
    return q, "calculate", [d, h], _calc(e.format(d=_fmt(d), h=_fmt(h)))


_ZONES = [("PST", "America/Los_Angeles"), ("JST", "Asia/Tokyo"), ("EST", "America/New_York"), ("CET", "Europe/Berlin"),
          ("GMT", "Europe/London"), ("IST", "Asia/Kolkata"), ("AEST", "Australia/Sydney"), ("CST", "America/Chicago"),
          ("MSK", "Europe/Moscow"), ("SGT", "Asia/Singapore"), ("HKT", "Asia/Hong_Kong"), ("NZST", "Pacific/Auckland"),
          ("EET", "Europe/Athens"), ("BRT", "America/Sao_Paulo"), ("KST", "Asia/Seoul"), ("MEZ", "Europe/Berlin"),
          ("UTC", "UTC"), ("MST", "America/Denver"), ("ICT", "Asia/Bangkok"), ("PKT", "Asia/Karachi")]


def timezones(rng, lang):
    (z1, i1), (z2, i2) = rng.sample(_ZONES, 2)
    hh, mm = rng.randint(1, 12), rng.choice([0, 0, 15, 30, 45])
    if lang == "en":
        t = rng.choice([f"{hh}{rng.choice(['am', 'pm', ' am', ' pm'])}", f"{hh}:{mm:02d}", f"{hh}:{mm:02d} {rng.choice(['AM', 'PM'])}"])
        q = rng.choice(["{t} {a} to {b}", "convert {t} from {a} to {b}", "what time is {t} {a} in {b}?",
                        "If it's {t} in {a}, what time is it in {b}?", "{t} {a} in {b} time", "from {a} to {b}: {t}",
                        "{t} {a} is what time {b}?", "when it is {t} {a}, what time is it {b}?"])
    else:
        t = rng.choice([f"{hh} Uhr", f"{hh}:{mm:02d} Uhr", f"{hh}:{mm:02d}"])
        q = rng.choice(["{t} {a} in {b}", "rechne {t} von {a} nach {b} um", "wie spät ist es in {b}, wenn es {t} {a} ist?",
                        "{t} {a} nach {b}", "wenn es {t} {a} ist, wie viel Uhr ist es dann {b}?", "{t} {a} ist wie viel Uhr {b}?",
                        "von {a} nach {b}: {t}"])
    q = q.format(t=t, a=z1, b=z2)
    plan = [{"task": "Convert the clock time", "category": "precision_tools", "mcp_tool": "timezone_convert",
             "mcp_args": {"local_datetime": f"2025-01-15T{hh:02d}:{mm:02d}:00", "from_timezone": i1, "to_timezone": i2}}]
    return q[0].upper() + q[1:], "timezone_convert", [float(hh)], plan


def shifts(rng, lang):
    k = rng.choice([5, 10, 15, 20, 25, 30, 40, 45, 50, 90, 100, 120, 3, 7, 14, 21, 60])
    num = str(k) if rng.random() < 0.7 else (words_en(k) if lang == "en" else words_de(k))
    if lang == "en":
        unit = rng.choice(["minutes", "hours", "days", "weeks"])
        q = rng.choice([f"what time was it {num} {unit} ago?", f"what time will it be in {num} {unit}?",
                        f"what is the date {num} {unit} from today?", f"what date was it {num} {unit} ago?",
                        f"{num} {unit} from now, what time is it?", f"date {num} {unit} from today",
                        f"what day is it {num} {unit} from now?", f"time in {num} {unit}"])
    else:
        unit = rng.choice(["Minuten", "Stunden", "Tagen", "Wochen"])
        q = rng.choice([f"wie spät war es vor {num} {unit}?", f"wie spät ist es in {num} {unit}?",
                        f"welches Datum ist in {num} {unit}?", f"welches Datum war vor {num} {unit}?",
                        f"welcher Tag ist in {num} {unit}?", f"welche Uhrzeit ist es in {num} {unit}?",
                        f"Datum in {num} {unit}", f"welches Datum haben wir in {num} {unit}?"])
    plan = [{"task": "Shift the date", "category": "precision_tools", "mcp_tool": "date_add",
             "mcp_args": {"base_date": "2025-01-15", "days": k}}]
    return q[0].upper() + q[1:], "date_add", [float(k)], plan


TOOL_CLASSES = {"arithmetic": arithmetic, "number_words": number_words, "functions": functions, "percent": percent,
                "units": units, "word_problem": word_problem, "rates": rates, "timezones": timezones, "shifts": shifts}

# ------------------------------------------------------------------------------------------- look-alikes, no tool

_TOPICS = {"en": ["remote work", "nuclear power", "school uniforms", "a four-day week", "social media bans",
                  "rent control", "homework", "electric cars", "open-plan offices", "universal basic income"],
           "de": ["Homeoffice", "Atomkraft", "Schuluniformen", "die Viertagewoche", "ein Social-Media-Verbot",
                  "die Mietpreisbremse", "Hausaufgaben", "Elektroautos", "Großraumbüros", "das Grundeinkommen"]}
_PLANETS = {"en": ["Mars", "Jupiter", "Saturn", "Neptune", "Uranus", "Earth", "Venus"],
            "de": ["der Mars", "der Jupiter", "der Saturn", "der Neptun", "der Uranus", "die Erde", "die Venus"]}
_CITIES = ["Berlin", "Tokyo", "Lagos", "Lima", "Oslo", "Toronto", "Mumbai", "Vienna", "Cairo", "Sydney"]
_BOOKS = ["1984", "Fahrenheit 451", "Catch-22", "Slaughterhouse-Five", "The Three-Body Problem", "2001: A Space Odyssey",
          "Brave New World", "One Hundred Years of Solitude", "Ulysses", "Dune"]
_SONGS = ["99 Luftballons", "Summer of '69", "1979", "22", "7 Rings", "Hotel California", "Yesterday", "Bohemian Rhapsody",
          "Seven Nation Army", "Two Princes"]


def lookalike_evaluate(rng, lang):
    x = rng.choice(_TOPICS[lang])
    if lang == "en":
        return rng.choice([f"Evaluate the argument in this essay about {x}.", f"Please evaluate this review of a film about {x}.",
                           f"Can you evaluate my business plan for a startup on {x}?", f"Evaluate the pros and cons of {x}.",
                           f"How would you evaluate the claim that {x} saves money?",
                           f"Evaluate this paragraph for clarity: '{x} is the future.'",
                           f"Critically evaluate the 3 main arguments for {x}.",
                           f"Evaluate how well the author defends {x} in chapter 2."])
    return rng.choice([f"Bewerte das Argument in diesem Aufsatz über {x}.", f"Bitte bewerte diese Rezension eines Films über {x}.",
                       f"Kannst du meinen Businessplan zu {x} beurteilen?", f"Wäge die Vor- und Nachteile von {x} ab.",
                       f"Wie würdest du die Behauptung bewerten, dass {x} Geld spart?",
                       f"Evaluiere die 3 wichtigsten Argumente für {x}.",
                       f"Beurteile, wie gut der Autor {x} in Kapitel 2 verteidigt."])


def lookalike_how_many(rng, lang):
    p, c = rng.choice(_PLANETS[lang]), rng.choice(_CITIES)
    n = rng.randint(2, 9)
    if lang == "en":
        return rng.choice([f"How many moons does {p} have?", f"How many people live in {c}?",
                           f"How many players are on a rugby team?", f"How many episodes are in season {n} of Friends?",
                           f"How many books are in the Harry Potter series?", f"How many countries border {c}'s country?",
                           f"How many Oscars did the film Titanic win?", f"How many bones does an adult human have?",
                           f"How many times has {c} hosted the Olympics?", f"How many languages are spoken in {c}?",
                           f"How many strings does a standard guitar have?", f"How many symphonies did Beethoven write?"])
    return rng.choice([f"Wie viele Monde hat {p}?", f"Wie viele Einwohner hat {c}?", "Wie viele Spieler hat eine Rugbymannschaft?",
                       f"Wie viele Folgen hat Staffel {n} von Friends?", "Wie viele Bücher gibt es in der Harry-Potter-Reihe?",
                       f"Wie viele Sprachen werden in {c} gesprochen?", "Wie viele Oscars hat der Film Titanic gewonnen?",
                       "Wie viele Knochen hat ein erwachsener Mensch?", f"Wie oft war {c} Gastgeber der Olympischen Spiele?",
                       "Wie viele Saiten hat eine normale Gitarre?", "Wie viele Sinfonien hat Beethoven geschrieben?"])


def lookalike_lyrics_novel(rng, lang):
    b, s = rng.choice(_BOOKS), rng.choice(_SONGS)
    if lang == "en":
        return rng.choice([f"What are the lyrics of '{s}'?", f"Who wrote the novel {b}?", f"What is the novel {b} about?",
                           f"Summarize the plot of the novel {b}.", f"What do the lyrics of '{s}' mean?",
                           f"When was the novel {b} published?", f"Who sang '{s}' first?",
                           f"Is the novel {b} worth reading?", f"What genre is the song '{s}'?",
                           f"Explain the ending of {b}."])
    return rng.choice([f"Wie lautet der Songtext von '{s}'?", f"Wer hat den Roman {b} geschrieben?", f"Worum geht es im Roman {b}?",
                       f"Fasse die Handlung des Romans {b} zusammen.", f"Was bedeutet der Text von '{s}'?",
                       f"Wann ist der Roman {b} erschienen?", f"Wer hat '{s}' zuerst gesungen?",
                       f"Lohnt es sich, {b} zu lesen?", f"Erkläre das Ende von {b}."])


def lookalike_numbers(rng, lang):
    y, n, c = rng.randint(1900, 2023), rng.randint(2, 15), rng.choice(_CITIES)
    if lang == "en":
        return rng.choice([f"What happened in {y}?", f"Who won the World Cup in {y}?", f"Top {n} things to do in {c}",
                           f"Is the iPhone {n} worth it?", f"What was new in Windows {rng.choice([7, 8, 10, 11])}?",
                           f"Tell me about Apollo {rng.randint(7, 17)}.", f"Give me {n} tips for better sleep.",
                           f"What is the plot of Ocean's {rng.choice([11, 12, 13])}?", f"List {n} famous painters from {c}.",
                           f"Why was {y} an important year for {c}?", f"Recommend {n} books for a long flight.",
                           f"What does the number {n} symbolize in numerology?"])
    return rng.choice([f"Was geschah {y}?", f"Wer wurde {y} Weltmeister?", f"Die {n} besten Sehenswürdigkeiten in {c}",
                       f"Lohnt sich das iPhone {n}?", f"Was war neu in Windows {rng.choice([7, 8, 10, 11])}?",
                       f"Erzähl mir etwas über Apollo {rng.randint(7, 17)}.", f"Gib mir {n} Tipps für besseren Schlaf.",
                       f"Nenne {n} berühmte Maler aus {c}.", f"Warum war {y} ein wichtiges Jahr für {c}?",
                       f"Empfiehl mir {n} Bücher für einen langen Flug."])


def lookalike_unit_words(rng, lang):
    dim = rng.choice(sorted(_UNITS))
    u = rng.choice(_UNITS[dim])
    name = rng.choice(u[1] if lang == "en" else u[2])
    z = rng.choice(_ZONES)[0]
    c = rng.choice(_CITIES)
    if lang == "en":
        return rng.choice([f"What is a {name.rstrip('s')} and where does the name come from?", f"Why does the US still use {name}?",
                           f"Who invented the {name} scale?", "What is the history of the metric system?",
                           f"What time zone is {c} in?", f"Does {c} observe daylight saving time?",
                           f"What does {z} stand for?", f"Which countries use {name} in daily life?",
                           f"Is {z} the same as daylight time?", f"How is a {name.rstrip('s')} defined today?"])
    return rng.choice([f"Was ist eigentlich ein {name} und woher kommt der Name?", f"Warum nutzen die USA noch {name}?",
                       f"Wer hat die {name}-Skala erfunden?", "Was ist die Geschichte des metrischen Systems?",
                       f"In welcher Zeitzone liegt {c}?", f"Gibt es in {c} Sommerzeit?", f"Wofür steht {z}?",
                       f"Welche Länder verwenden {name} im Alltag?", f"Wie ist {name} heute definiert?"])


def lookalike_code(rng, lang):
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    if lang == "en":
        return rng.choice([f"Write a Python function that adds {a} and {b}.", f"Write a JavaScript function that converts {a} km to miles.",
                           f"Fix this code: print({a} + '{b}')", f"Write a SQL query that returns the top {a} customers.",
                           f"Write a bash script that sleeps {a} seconds and then prints {b}.",
                           f"Create a Python class for a timer that counts down from {a} minutes.",
                           f"Write a regex that matches numbers between {a} and {b}."])
    return rng.choice([f"Schreibe eine Python-Funktion, die {a} und {b} addiert.",
                       f"Schreibe eine JavaScript-Funktion, die {a} km in Meilen umrechnet.",
                       f"Korrigiere diesen Code: print({a} + '{b}')", f"Schreibe eine SQL-Abfrage, die die {a} besten Kunden liefert.",
                       f"Schreibe ein Bash-Skript, das {a} Sekunden wartet und dann {b} ausgibt.",
                       f"Erstelle eine Python-Klasse für einen Timer, der von {a} Minuten herunterzählt.",
                       f"Schreibe einen regulären Ausdruck für Zahlen zwischen {a} und {b}."])


_CONCEPTS = {"en": ["compound interest", "the area of a circle", "standard deviation", "a percentage change", "the median",
                     "a square root", "a logarithm", "average speed", "the volume of a sphere", "a weighted average"],
             "de": ["Zinseszins", "die Kreisfläche", "die Standardabweichung", "eine prozentuale Veränderung", "den Median",
                     "eine Quadratwurzel", "einen Logarithmus", "die Durchschnittsgeschwindigkeit", "das Kugelvolumen",
                     "einen gewichteten Mittelwert"]}


def lookalike_concepts(rng, lang):
    x = rng.choice(_CONCEPTS[lang])
    if lang == "en":
        return rng.choice([f"Explain how to calculate {x}.", f"What is the formula for {x}?", f"Why do we need {x}?",
                           f"Can you teach a 10-year-old what {x} means?", f"What is the difference between the mean and {x}?",
                           f"Give me an intuitive explanation of {x}.", f"Who first described {x}?",
                           f"What are common mistakes when students learn {x}?", f"Write a short quiz question about {x}."])
    return rng.choice([f"Erkläre, wie man {x} berechnet.", f"Wie lautet die Formel für {x}?", f"Wozu braucht man {x}?",
                       f"Erkläre einem Zehnjährigen {x}.", f"Gib mir eine anschauliche Erklärung für {x}.",
                       f"Wer hat {x} zuerst beschrieben?", f"Welche Fehler machen Schüler oft bei {x}?",
                       f"Schreibe eine kurze Quizfrage zu {x}."])


def lookalike_how_far_long(rng, lang):
    a, b = rng.sample(_CITIES, 2)
    p = rng.choice(_PLANETS[lang])
    if lang == "en":
        return rng.choice([f"How far is {a} from {b}?", f"How long is the flight from {a} to {b}?",
                           f"How old is the city of {a}?", f"How big is {p}?", f"How long does a day last on {p}?",
                           f"How tall is the tallest building in {a}?", f"How often do trains run between {a} and {b}?",
                           f"How much does a coffee cost in {a}?", f"How hot does it get in {a} in summer?"])
    return rng.choice([f"Wie weit ist {a} von {b} entfernt?", f"Wie lange dauert der Flug von {a} nach {b}?",
                       f"Wie alt ist die Stadt {a}?", f"Wie groß ist {p}?", f"Wie lange dauert ein Tag auf {p[4:]}?",
                       f"Wie hoch ist das höchste Gebäude in {a}?", f"Wie oft fahren Züge zwischen {a} und {b}?",
                       f"Was kostet ein Kaffee in {a}?", f"Wie heiß wird es im Sommer in {a}?"])


NONE_CLASSES = {"maths_concepts": lookalike_concepts, "how_far_long_facts": lookalike_how_far_long, "evaluate": lookalike_evaluate, "how_many_facts": lookalike_how_many,
                "lyrics_novel": lookalike_lyrics_novel, "numbers_no_maths": lookalike_numbers,
                "unit_zone_words": lookalike_unit_words, "code_with_numbers": lookalike_code}


def suite(seed: int = SEED, per_class: int = PER_CLASS) -> list[dict]:
    """The suite's rows: {id, side ("tool"|"none"), class, lang, query, tool, operands, plan}; distinct queries."""
    rng = random.Random(seed)
    out, seen = [], set()
    for lang in ("en", "de"):
        for side, classes in (("tool", TOOL_CLASSES), ("none", NONE_CLASSES)):
            # the no-tool classes have fewer templates: more tries, the same quota per side
            quota = per_class if side == "tool" else per_class * 2
            for name, make in classes.items():
                n = tries = 0
                while n < quota and tries < quota * 40:
                    tries += 1
                    if side == "tool":
                        q, tool, ops, plan = make(rng, lang)
                    else:
                        q, tool, ops, plan = make(rng, lang), "", [], None
                    if q.lower() in seen:
                        continue
                    seen.add(q.lower())
                    n += 1
                    out.append({"id": f"{lang}-{side}-{name}-{n}", "side": side, "class": name, "lang": lang,
                                "query": q, "tool": tool, "operands": ops, "plan": plan})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--per-class", type=int, default=PER_CLASS)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    rows = suite(args.seed, args.per_class)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    tool = sum(r["side"] == "tool" for r in rows)
    print(f"rows={len(rows)} need_tool={tool} need_none={len(rows) - tool} seed={args.seed} written={args.out}")


if __name__ == "__main__":
    main()
