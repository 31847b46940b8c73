"""The first-character gate in front of the trigger patterns (issue 29): it answers what the pattern answers, and it
does skip patterns whose first characters a text lacks."""

from __future__ import annotations

import random
import re

import pytest

from mashbill.specs.loader import LIBRARY
from mashbill.validators.prefilter import Gated, first_set
from mashbill.validators.ruleset import load_ruleset
from mashbill.validators.synthetic import corpus
from mashbill.validators.triggers import Triggers

from verdict_corpus import real_queries


@pytest.mark.parametrize("pattern, first, decimal", [
    (r"abc", {"a"}, False),
    (r"\bfoo|bar", {"f", "b"}, False),
    (r"(?<![\w.:])\d{1,2}:\d\d", set(), True),
    (r"x?y", {"x", "y"}, False),
    (r"[a-c]oo", {"a", "b", "c"}, False),
    (r"(?:⟨time⟩|\d)\s*pm", {"⟨"}, True),
    (r"(?=ab)a", {"a"}, False),
])
def test_first_set_of_a_pattern(pattern, first, decimal):
    assert first_set(re.compile(pattern)) == (frozenset(first), decimal)


@pytest.mark.parametrize("pattern", [r"a*", r".x", r"(?i)abc", r"\w+", r"[^a]b", r"x|", r"(?:a|b?)"])
def test_unbounded_patterns_always_run(pattern):
    assert first_set(re.compile(pattern)) is None
    assert not Gated(re.compile(pattern)).absent("zzz")


def _patterns(tr: Triggers) -> list[Gated]:
    out = list(tr.contexts.values()) + [m[0] for m in tr.masks] + tr.citations
    for level in tr.by_level:
        for _, _, trig in level:
            out += [rx for rx, *_ in trig] + [t[4] for t in trig if t[4] is not None]
    for trig in [tr.creative, tr.translation, *tr.categories.values()]:
        out += [t[0] for t in trig] + [t[3] for t in trig if t[3] is not None]
    return out


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rng = random.Random(29)
    qs = [r.query for r in corpus(120, seed=3)] + real_queries()[::5]
    qs += ["", "7", "3 pm est to cet", "§ 823 abs. 2 bgb", "ſum of ı", "Ⅻ ٣ ²"]  # digits of other scripts, folds
    return [q.lower() for q in qs] + [q[:rng.randint(0, len(q))] for q in qs]


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6])
def test_gated_patterns_answer_what_the_patterns_answer(version, texts):
    tr = Triggers(load_ruleset(LIBRARY / "shared" / "rules" / f"moe-routing@{version}.yaml"))
    skipped = 0
    for g in _patterns(tr):
        assert isinstance(g, Gated)
        for t in texts:
            want, got = g.rx.search(t), g.search(t)
            assert (want and (want.span(), want.groups())) == (got and (got.span(), got.groups())), (g.pattern, t)
            assert [m.span() for m in g.rx.finditer(t)] == [m.span() for m in g.finditer(t)]
            skipped += g.absent(t)
    assert skipped > 0  # the gate is no pass-through
