"""moe-routing@6's cues for phrasing the @5 cues were not grown on (issue 23). Each class holds at least three
paraphrases written for this test, none of them a queries-dev row (checked against the labelled set), in English and
German where the class has both; the look-alikes that need no tool hold too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from vhelpers import QUERIES_DEV

from mashbill.specs.loader import LIBRARY
from mashbill.validators.plans.ruleset import load_ruleset
from mashbill.validators.plans.triggers import triggers_for

ROOT = Path(__file__).resolve().parents[3]
RULES = LIBRARY / "shared" / "rules"

CLASSES = {
    "leading-dot decimals": ("arithmetic", ["what is .5 + .25?", ".75 divided by 3", "how much is 12 × .2?"]),
    "bullet and spaced x as times": ("arithmetic", ["what is 14 ∙ 3?", "what's 6.5 x 4", "was ist 81 ∙ 7?"]),
    "operator words between digits anywhere": ("arithmetic", ["what does 84 divided by 7 come to?",
                                                              "quick question: 19.5 times 4?", "42 minus 17 equals?"]),
    "durch after a calculation question": ("arithmetic", ["was kommt bei 96 durch 8 raus?", "was ergibt 350 durch 7?",
                                                          "wie viel ist 81 durch 9?"]),
    "logarithms and remainders": ("arithmetic", ["log2 of 4096", "natural log of 20", "Logarithmus zur Basis 2 von 512",
                                                 "what is the remainder when 47 is divided by 6?",
                                                 "welcher Rest bleibt bei 47 durch 6?"]),
    "German powers": ("arithmetic", ["3 in der 4. Potenz", "12 zur 3. Potenz", "7,5 in der 2. Potenz"]),
    "number words": ("arithmetic", ["divide three hundred by four", "what is forty-two times eleven?",
                                    "teile achthundertsechsundachtzig durch einundfünfzig",
                                    "was ist dreihundertzwölf mal neun?"]),
    "quantity words as operands": ("arithmetic", ["1 dozen * 5", "half * 30", "3pi"]),
    "rates and totals": ("word_problem", ["A bus covers 240 km in 3 hours. What is its average speed?",
                                          "4 kg of rice cost $9. What is the price per kg?",
                                          "Ein Zug fährt 300 km in 2 Stunden. Wie schnell ist er?",
                                          "Der Preis stieg von 40 € auf 50 €. Um wie viel Prozent ist er gestiegen?"]),
    "a question closing a word problem": ("word_problem", [
        "Ana has 14 marbles. She gives a third of them away and buys 9 more. What is left in her bag?",
        "A shop sells 25 pens on Monday and 40 on Tuesday. Which number did it sell in total?",
        "Ein Bauer hat 30 Kühe. Er verkauft 12 und kauft 5 dazu. Welche Zahl an Kühen hat er jetzt?"]),
    "time zones from one to another": ("timezone", ["convert 6:30 am from CET to JST", "from PST to JST: 9pm",
                                                    "rechne 14:00 von MEZ nach EST um"]),
    "a date-time or a relative date plus a shift": ("date_add", ["12 Jan 2021 10:00:00 GMT + 5 hours",
                                                                 "2 days ago + 3 hours", "what is the time in 45 minutes"]),
    "vor N Tagen in a question about the time": ("date_add", ["wie spät war es vor 20 Minuten?",
                                                              "welches Datum war vor 45 Tagen?",
                                                              "wie spät ist es in 90 Minuten?"]),
    "day counts from one date to another": ("date_diff", ["number of days from 2020-03-01 and 2021-03-01",
                                                          "count the days from 2019-01-01 to 2019-06-30",
                                                          "wie viele Tage von 01.01.2024 bis 31.03.2024"]),
    "the unit asked for first": ("unit_conversion", ["hectares in 200 acres", "psi in 3 bar", "kilometers in 26 miles"]),
    "more connectors": ("unit_conversion", ["46 knots equals what in mph?", "10 lbs ?= kg",
                                            "3 Fuß entsprechen wie vielen Zentimetern?"]),
    "unit abbreviations, symbols and German names": ("unit_conversion", ["340mi to nmi", "233 lbm in kg",
                                                                         "12 Kilogramm in Pfund", "5 Tassen in Milliliter"]),
    "how-many phrases for units": ("unit_conversion", ["wie viel Milliliter sind 4 Tassen?",
                                                       "how much is 5 kg in pounds", "wieviel Gramm sind 3 Unzen?"]),
    "feet and inch marks": ("unit_conversion", ["6' 2\" in cm", "9\" to mm", "5'11\" in meters"]),
}

LOOKALIKES = {
    "evaluate an argument or a text": ["Critically evaluate the 3 main arguments for a four-day week.",
                                       "Evaluate how well the author defends rent control in chapter 2.",
                                       "Please evaluate my business plan with 3 revenue streams."],
    "what a concept means": ["Can you teach a 10-year-old what the area of a circle means?",
                             "Explain what compound interest means with 2 examples.",
                             "What is the formula for the volume of a sphere, explained for grade 8?"],
    "an impossible date": ["weekdays between feb 30, 2016 and mar 5, 2016", "days between 19/19/2014 and 20/24/2015",
                           "weeks between mar 3 2019 and mar 3 204567"],
    "a temperature below absolute zero": ["-40 kelvin in celsius", "-3 rankine in fahrenheit", "-12.5 kelvin in rankine"],
    "ordinals are no quantities": ["Wie viel Zeit blieb im vierten Viertel des 24. Spiels?",
                                   "How much time was left in the third quarter of game 7?",
                                   "Wie viele Tore fielen in der zweiten Halbzeit des 3. Spiels?"],
    "how many in a factual look-up": ["How many moons does Neptune have?", "How many languages are spoken in Lagos?",
                                      "Wie viele Sinfonien hat Beethoven geschrieben?"],
    "lyrics and novels": ["What are the lyrics of 'Summer of 69'?", "Who wrote the novel Catch-22?",
                          "Worum geht es im Roman 1984?"],
}


@pytest.fixture(scope="module")
def trig(ruleset):
    assert ruleset.version >= 6
    return triggers_for(ruleset)


@pytest.fixture(scope="module")
def dev_queries(tmp_path_factory):
    """The queries-dev rows of the labelled trigger set (lower-cased): no paraphrase here may be one of them. The
    set is written by its bench script, run as a command (tests never import a bench script)."""
    if QUERIES_DEV is None:
        pytest.skip("the shared queries-dev corpora are not beside this checkout")
    out = tmp_path_factory.mktemp("triggers") / "triggers-dev.jsonl"
    subprocess.run([sys.executable, str(ROOT / "bench" / "trigger_set.py"), "--queries", str(QUERIES_DEV),
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    return {json.loads(line)["query"].strip().lower() for line in out.read_text(encoding="utf-8").splitlines()}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_a_class_of_phrasing_fires_its_intent(trig, dev_queries, name):
    intent, queries = CLASSES[name]
    assert len(queries) >= 3
    for q in queries:
        assert q.strip().lower() not in dev_queries, f"{q!r} is a queries-dev row"
        got = trig.analyze(q).intents
        assert intent in got, f"{name}: {q!r} -> {sorted(got)}"


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_a_lookalike_fires_no_tool(trig, dev_queries, name):
    for q in LOOKALIKES[name]:
        assert q.strip().lower() not in dev_queries
        a = trig.analyze(q)
        assert not a.intents, f"{name}: {q!r} -> {a.evidence}"
        assert a.creative is None


def test_the_earlier_rule_set_reads_as_before():
    """@5 keeps its cues (its file and hash are unchanged): spelled numbers and the new classes stay unread there."""
    old = triggers_for(load_ruleset(RULES / "moe-routing@5.yaml"))
    assert old.rs.number_words is None and not old.rs.units.target_first
    for q in ("teile achthundertsechsundachtzig durch einundfünfzig", "hectares in 200 acres", "what is .5 + .25?"):
        assert not old.analyze(q).intents, q
