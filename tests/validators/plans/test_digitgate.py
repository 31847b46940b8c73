"""The digit gate in front of the trigger patterns (issue 29): a pattern every match of which holds a digit is not run
on a text without one, and answers what it answered before."""

from __future__ import annotations

import re

import pytest

from mashbill.specs.loader import LIBRARY
from mashbill.validators.data.synthetic import corpus
from mashbill.validators.plans.digitgate import DigitGated, gated, has_digit, needs_digit
from mashbill.validators.plans.ruleset import load_ruleset
from mashbill.validators.plans.triggers import Triggers
from mashbill.validators.prefilter import Prefiltered

from verdict_corpus import real_queries


@pytest.mark.parametrize("pattern, needs", [
    (r"\d", True), (r"a\d+b", True), (r"[0-9]{2}", True), (r"(?:x\d|\dy)", True), (r"7", True),
    (r"\d*", False), (r"a|\d", False), (r"(?=\d)a", False), (r"[\dx]", False), (r"[^\d]", False), (r"\w+", False),
    (r"(?:\d)?x", False), (r"²", False),
])
def test_which_patterns_need_a_digit(pattern, needs):
    assert needs_digit(re.compile(pattern)) is needs
    assert isinstance(gated(re.compile(pattern)), DigitGated) is needs


def test_digits_of_other_scripts_count():
    assert has_digit("٣ apples") and has_digit("x 7") and not has_digit("x² and Ⅻ")
    g = gated(re.compile(r"\d+"))
    assert g.search("٣").group(0) == "٣" and g.search("x²") is None and g.sub("N", "a ٣ b") == "a N b"


def _patterns(tr: Triggers) -> list:
    """Every pattern the triggers run on a query's texts, as the digit gate sees it (behind the prefilter, if any)."""
    out = list(tr.contexts.values()) + [m[0] for m in tr.masks] + tr.citations
    for level in tr.by_level:
        out += [rx for _, _, trig in level for rx, *_ in trig]
    for trig in [tr.creative, tr.translation, *tr.categories.values()]:
        out += [t[0] for t in trig]
    return [getattr(rx, "rx", rx) if isinstance(rx, Prefiltered) else rx for rx in out]


@pytest.mark.parametrize("version", [2, 6])  # the first and the latest rule set (the others share their patterns)
def test_gated_patterns_answer_what_the_patterns_answer(version):
    tr = Triggers(load_ruleset(LIBRARY / "shared" / "rules" / f"moe-routing@{version}.yaml"))
    texts = [q.lower() for q in [r.query for r in corpus(150, seed=3)] + real_queries()[::6]]
    texts += ["", "3 pm est to cet", "vom 1.3. bis 24.12.", "din en iso ٩٠٠١", "seven plus eight", "x² + y²"]
    gates = [g for g in _patterns(tr) if isinstance(g, DigitGated)]
    assert len(gates) >= 10
    skipped = 0
    for g in gates:
        for t in texts:
            want, got = g.rx.search(t), g.search(t)
            assert (want and (want.span(), want.groups())) == (got and (got.span(), got.groups())), (g.pattern, t)
            assert g.rx.sub("⟨x⟩", t) == g.sub("⟨x⟩", t)
            skipped += not has_digit(t)
    assert skipped > 0
