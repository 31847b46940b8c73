"""Trigger evaluation details that the per-rule fixtures do not pin down directly."""

from __future__ import annotations

import re

import pytest

from mashbill.errors import SpecError
from mashbill.validators.plans.ruleset import load_ruleset
from mashbill.validators.plans.triggers import _fast_boundary, _lower_pattern, triggers_for


@pytest.fixture(scope="module")
def trig(ruleset):
    return triggers_for(ruleset)


@pytest.mark.parametrize("query,law,paragraphs", [
    ("Was bedeutet § 823 Abs. 2 BGB für Radfahrer?", "BGB", ("823",)),
    ("Wann greifen §§ 280, 281 BGB?", "BGB", ("280", "281")),
    ("Greift § 1004 I 2 BGB?", "BGB", ("1004",)),
    ("Ist § 263a StGB einschlägig?", "StGB", ("263a",)),
    ("Was regelt Art. 6 Abs. 1 lit. f DSGVO?", "DSGVO", ("6",)),
    ("What does Section 242 of the German Civil Code say?", "BGB", ("242",)),
    ("Was steht in § 433 des Bürgerlichen Gesetzbuches?", "BGB", ("433",)),
])
def test_citations(trig, query, law, paragraphs):
    cites = trig.analyze(query).citations
    assert cites, f"no citation found in {query!r}"
    assert cites[0].law == law
    assert cites[0].paragraphs == paragraphs


@pytest.mark.parametrize("query", ["Was ist ein Paragraph?", "Erkläre das Mietrecht.", "Section 5 of my report",
                                   "Art. 5 of the contract"])
def test_no_citation(trig, query):
    assert trig.analyze(query).citations == ()


@pytest.mark.parametrize("query,intent", [
    ("Wie viel ist 17 × 23?", "arithmetic"),
    ("Berechne die Summe 1 bis 1000.", "arithmetic"),
    ("What is 1847 * 23 + 519?", "arithmetic"),
    ("Welcher Wochentag war der 15.07.2024?", "weekday"),
    ("How many days are there between 2024-03-01 and 2024-12-24?", "date_diff"),
    ("Rechne 100 km/h in m/s um.", "unit_conversion"),
    ("What is the broadcast address of 10.0.0.0/8?", "subnet"),
    ("Compute the SHA-256 of 'hello'.", "hashing"),
    ("Encode 'Hallo Welt' as base64.", "base64"),
    ("Was ist der ggT von 48 und 18?", "gcd_lcm"),
    ("Zerlege 360 in Primfaktoren.", "prime_factors"),
    ("Median of 3, 9, 4, 12 and 7?", "statistics"),
])
def test_intents(trig, query, intent):
    assert intent in trig.analyze(query).intents


@pytest.mark.parametrize("query", [
    "Welche Pflichten legt die Richtlinie 2001/83/EG Herstellern auf?",
    "Berechne den Heizwärmebedarf nach DIN V 4108-6.",
    "Beweise, dass 1+2+…+n = n(n+1)/2.",
    "Explain the bias-variance tradeoff.",
    "Ruf mich unter 0171-2345678 an.",
    "Why is MD5 considered insecure?",
    "Write a Python function that computes the factorial of n.",
    "Das Meeting ist am 15.07.2024 um 14:30.",
    "Installiere Python 3.11.4 auf Ubuntu 22.04.",
])
def test_no_precision_intent(trig, query):
    assert trig.analyze(query).intents == {}


def test_generic_calculation_yields_to_the_specific_intent(trig):
    got = trig.analyze("Compute the mean and standard deviation of 4, 8, 15, 16, 23, 42.")
    assert set(got.intents) == {"statistics"}


@pytest.mark.parametrize("query,term", [
    ("Implementiere den A*-Algorithmus in Python.", "A*"),
    ("Implement Bellman-Ford in Rust.", "Bellman-Ford"),
    ("Schreib mir ein Schachspiel in Python.", "Schachspiel"),
    ("Write a minimax bot for tic-tac-toe.", "minimax"),
    ("Schreibe einen JSON-Parser in Go.", "JSON-Parser"),
])
def test_implementation_domains(trig, query, term):
    assert trig.analyze(query).impl == term


def test_explaining_is_not_implementing(trig):
    assert trig.analyze("Wie funktioniert der A*-Algorithmus?").impl is None


def test_case_insensitive_rewrite_is_equivalent():
    patterns = [r"(?<!\w)(?:Heiz\w*|U-Wert|bgb)(?!\w)", r"(?<!\w)(?:§|art)\s*(?P<para>\d+)", r"\S+\s[A-Z]{2}\d",
                r"(?<!\w)a\*", r"\N{SECTION SIGN}\s*\d+"]
    texts = ["Der U-Wert nach § 12 BGB", "heizlast art 5 ab DE12", "A* und § 3", "§ 823 ist ART 5"]
    for p in patterns:
        fast = re.compile(_fast_boundary(_lower_pattern(p)))
        slow = re.compile(p, re.IGNORECASE)
        for t in texts:
            a = [m.span() for m in fast.finditer(t.lower())]
            b = [m.span() for m in slow.finditer(t)]
            assert a == b, (p, t)


def test_rule_set_errors_name_file_line_and_field(tmp_path):
    good = load_ruleset().model_dump(mode="json")
    import yaml

    bad = dict(good, masks=[{"name": "x", "replace": "X", "pattern": "(unclosed"}])
    f = tmp_path / "bad@1.yaml"
    f.write_text(yaml.safe_dump(bad, allow_unicode=True), encoding="utf-8")
    with pytest.raises(SpecError) as exc:
        load_ruleset(f)
    assert "invalid regular expression" in str(exc.value) and str(f) in str(exc.value) and exc.value.line

    bad = dict(good, unknown_key=1)
    f.write_text(yaml.safe_dump(bad, allow_unicode=True), encoding="utf-8")
    with pytest.raises(SpecError, match="unknown key"):
        load_ruleset(f)

    intents = dict(good["intents"])
    intents["arithmetic"] = {"tools": ["calculate"], "triggers": [{"any": ["x"], "all": ["no_such_context"]}]}
    f.write_text(yaml.safe_dump(dict(good, intents=intents), allow_unicode=True), encoding="utf-8")
    with pytest.raises(SpecError, match="unknown context 'no_such_context'"):
        load_ruleset(f)


@pytest.mark.parametrize("query,intent", [
    ("How many kilograms are 185 pounds?", "unit_conversion"),
    ("convert 1stone to lbs", "unit_conversion"),
    ("10 electronvolts to foot pounds", "unit_conversion"),
    ("Wie viele Kilometer sind 26 Meilen?", "unit_conversion"),
    ("10:00AM MST to PST", "timezone"),
    ("Wie spät ist es in Tokio, wenn es in Berlin 15 Uhr ist?", "timezone"),
    ("Workdays between jan 3 2013 and jan 4 2013", "date_diff"),
    ("3 days before 21st March", "date_add"),
    ("Seven times seven", "arithmetic"),
    ("cos(2pi)", "arithmetic"),
    ("Tom has 5 apples and buys 3 more. How many apples does he have now?", "word_problem"),
    ("Cody isst dreimal mehr Kekse als Amir. Wenn Amir 5 Kekse isst, wie viele Kekse essen dann beide?", "word_problem"),
])
def test_real_query_shapes(trig, query, intent):
    assert intent in trig.analyze(query).intents


@pytest.mark.parametrize("query", [
    "convert 5 oz to yards",  # no conversion between a mass and a length
    "The shop is open from 7 am to 9 pm.",  # "am" and "pm" are words before they are units
    "I have 3 people in 2 cars.",
    "Set an alarm for 12 weeks from today at 8am",
    "Hutton published a two-volume version of his ideas in 1795.",
    "29.7% of all households were made up of individuals.",
    "Fulton Street was converted into a pedestrian mall in 1964.",
    "What is the date today?",
])
def test_real_query_non_triggers(trig, query):
    assert trig.analyze(query).intents == {}


def test_unit_conversion_inside_a_word_problem_yields_to_it(trig):
    got = trig.analyze("If there are 16 cups in a gallon, how many gallons does she drink in 30 days at 8 cups a day?")
    assert set(got.intents) == {"word_problem"}


def test_yields_to_cycle_is_refused(tmp_path):
    import yaml

    good = load_ruleset().model_dump(mode="json")
    intents = dict(good["intents"])
    intents["gcd_lcm"] = dict(intents["gcd_lcm"], triggers=[dict(intents["gcd_lcm"]["triggers"][0],
                                                                  yields_to=["word_problem"])])
    f = tmp_path / "cycle@1.yaml"
    f.write_text(yaml.safe_dump(dict(good, intents=intents), allow_unicode=True), encoding="utf-8")
    with pytest.raises(SpecError, match="yields_to cycle"):
        load_ruleset(f)


def test_timezone_convert_is_a_catalog_tool_with_its_runtime_shape(ruleset, catalog):
    from mashbill.validators.plans.plans import Shown
    from mashbill.validators.plans.routing import check_plan

    query = "1pm EDT into UTC+2"
    good = [{"task": "Convert the time.", "category": "precision_tools", "mcp_tool": "timezone_convert",
             "mcp_args": {"local_datetime": "2024-07-15T13:00:00", "from_timezone": "America/New_York",
                          "to_timezone": "Etc/GMT-2"}}]
    assert [v.code for v in check_plan(ruleset, query, good, Shown(None), catalog)] == []
    bad = [dict(good[0], mcp_args={"time": "13:00"})]
    assert "PLAN007" in {v.code for v in check_plan(ruleset, query, bad, Shown(None), catalog)}


def test_requires_by_substring_is_the_escaped_alternation():
    """Issue 29: a trigger's `requires` strings are tested as substrings (AnyOf), not as a regex alternation; on every
    rule set's strings and on texts holding one, none, or part of one, both say the same."""
    import re

    from mashbill.specs.loader import LIBRARY
    from mashbill.validators.plans.ruleset import load_ruleset
    from mashbill.validators.plans.triggers import AnyOf

    seen = 0
    for version in range(2, 7):
        rs = load_ruleset(LIBRARY / "shared" / "rules" / f"moe-routing@{version}.yaml")
        reqs = [t.requires for i in rs.intents.values() for t in i.triggers if t.requires]
        for words in reqs:
            rx = re.compile("|".join(re.escape(w.lower()) for w in words))
            for text in ["", "nothing here", *(f"x {w.lower()} y" for w in words), *(w.lower()[:-1] for w in words)]:
                assert bool(AnyOf(words).search(text)) == bool(rx.search(text)), (words, text)
                seen += 1
    assert seen > 100


def test_a_query_is_analysed_once_per_distinct_query():
    """Issue 29: records that share a query share its trigger analysis (kept for the last MEMO queries)."""
    from mashbill.validators.plans import triggers as trig
    from mashbill.validators.plans.ruleset import load_ruleset

    t = trig.Triggers(load_ruleset())
    calls = []
    analyse = t._analyze
    t._analyze = lambda q: calls.append(q) or analyse(q)
    first = t.analyze("What is 1847 * 23 + 519?")
    assert t.analyze("What is 1847 * 23 + 519?") is first and calls == ["What is 1847 * 23 + 519?"]
    assert first.intents == analyse("What is 1847 * 23 + 519?").intents and first.intents
    for i in range(trig.MEMO):
        t.analyze(f"query {i}")
    assert len(t._memo) == trig.MEMO  # bounded: the oldest query made room
    t.analyze("What is 1847 * 23 + 519?")
    assert calls.count("What is 1847 * 23 + 519?") == 2
