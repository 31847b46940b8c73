"""Spelled numbers read as digits with text2num (validators/plans/numwords.py), only for a rule set that asks for it."""

from __future__ import annotations

import pytest

from mashbill.specs.loader import LIBRARY
from mashbill.validators.plans import numwords
from mashbill.validators.plans.ruleset import load_ruleset

RULES = LIBRARY / "shared" / "rules"


@pytest.mark.parametrize("text,expected", [
    ("divide three hundred by four", "divide 300 by 4"),
    ("what is nine hundred ninety-seven times twelve?", "what is 997 times 12?"),
    ("teile achthundertsechsundachtzig durch einundfünfzig", "teile 886 durch 51"),
    ("was ist zweitausendvierhundert geteilt durch zwölf?", "was ist 2400 geteilt durch 12?"),
])
def test_compound_numbers_in_both_languages(text, expected):
    assert numwords.digitize(text, ("en", "de")) == expected


@pytest.mark.parametrize("text", [
    "Wie viel Zeit blieb im vierten Viertel?",  # an ordinal states no quantity
    "Bill starts on the third floor",
    "the twenty-first century",
    "one of the best",  # small isolated words stay words
])
def test_ordinals_and_small_isolated_words_stay_words(text):
    assert numwords.digitize(text, ("en", "de")) == text


def test_ordinals_are_kept_beside_converted_numbers():
    assert numwords.digitize("a third of the twenty-five pieces", ("en", "de")) == "a third of the 25 pieces"


def test_a_rule_set_opts_in():
    new, old = load_ruleset(RULES / "moe-routing@6.yaml"), load_ruleset(RULES / "moe-routing@5.yaml")
    assert new.number_words is not None and old.number_words is None
    q = "Add seven hundred and twelve"
    assert numwords.for_rules(old, q) == q and numwords.readings(old, q) == []
    assert numwords.for_rules(new, q) == "Add 712"
    # "and" may join two operands as well as the parts of one number: both readings are offered
    assert numwords.readings(new, q) == ["Add 712", "Add 700 , 12"]


def test_text_without_number_words_is_returned_as_is():
    text = "Convert 5 km to miles"
    assert numwords.digitize(text, ("en", "de")) is text
