"""specs.holdout: one reading of holdout files and one "same query" rule for the leakage check and the retrieved
examples, so what the gate calls leaked is never shown to the teacher as an example."""

from __future__ import annotations

import json

import pytest

from mashbill.factory.generate.examples import is_held_out
from mashbill.specs.holdout import HoldoutFileError, normalize, read_holdout
from mashbill.validators.data.leakage import HoldoutItem, leakage, load_holdout
from mashbill.validators.errors import ValidationInputError

HOLD = ["Was bedeutet § 823 Abs. 2 BGB für einen Radfahrer, der nachts ohne Licht fährt?",
        "How do I configure a reverse proxy for two backend services with nginx?",
        "What is 7 - 3?"]
CASES = [HOLD[0] + "?",  # identical after normalisation
         "Bitte: " + HOLD[1] + " Kurz.",  # contains a holdout query
         "Was bedeutet § 823 Abs. 2 BGB für einen Fahrradfahrer, der nachts ohne Licht fährt?",  # near
         "what is 7-3",  # the same arithmetic
         "What is 7 + 3?",  # another operator: not the same query
         "Explain the difference between a process and a thread in operating systems."]


def test_the_leakage_check_and_the_example_exclusion_agree():
    from mashbill.validators.plans.ruleset import load_ruleset

    ruleset = load_ruleset()
    items = [HoldoutItem(f"h:{i}", t) for i, t in enumerate(HOLD)]
    leaked, _ = leakage([f"t{i}" for i in range(len(CASES))], CASES, items, ruleset.checks.leakage,
                        ruleset.checks.dedup)
    excluded = {f"t{i}" for i, t in enumerate(CASES) if is_held_out(t, [normalize(h) for h in HOLD])}
    assert excluded == set(leaked) == {"t0", "t1", "t2", "t3"}


def test_a_bad_holdout_row_names_the_file_and_line_in_both_layers(tmp_path):
    p = tmp_path / "bench.jsonl"
    p.write_text(json.dumps({"query": "ok"}) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(HoldoutFileError, match=r"bench\.jsonl:2: holdout row is not JSON"):
        read_holdout(p)
    with pytest.raises(ValidationInputError, match=r"bench\.jsonl:2: holdout row is not JSON"):
        load_holdout(p)


def test_ascii_words_without_the_regular_expression_are_the_expressions():
    """`normalize`'s ASCII path (str.translate) gives what the regular expression gives, on every ASCII character
    and runs of them (underscores, control characters, the \\x1c-\\x1f separators str.split also splits on)."""
    import random

    from mashbill.specs.holdout import _NON_ALNUM, _words

    rng = random.Random(29)
    alphabet = [chr(c) for c in range(128)] + ["_", " ", "a", "7", "Z"] * 8
    texts = ["", "_", "__a__", "a_b", "\x1c a\x1fb\t", " x ", "1,000.5"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(5000)]
    for text in texts:
        assert _words(text) == _NON_ALNUM.sub(" ", text).strip(), repr(text)
    assert _words("Grüße_aus Köln!") == _NON_ALNUM.sub(" ", "Grüße_aus Köln!").strip() == "Grüße aus Köln"
