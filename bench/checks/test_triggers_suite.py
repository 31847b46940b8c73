"""The paraphrase suite (bench/paraphrase_suite.py) and `bench/triggers.py --suite`: a seeded generator of requests
from classes of phrasing, with gold tools and operands, that the routing cues must hold on."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import paraphrase_suite  # bench/paraphrase_suite.py (bench/checks/conftest.py puts bench/ on the path)
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rows():
    return paraphrase_suite.suite()


def test_the_suite_is_large_bilingual_and_seeded(rows):
    sides = Counter((r["side"], r["lang"]) for r in rows)
    assert sides["tool", "en"] + sides["tool", "de"] >= 2000 and sides["none", "en"] + sides["none", "de"] >= 2000
    assert min(sides.values()) >= 1000
    assert len({r["query"].lower() for r in rows}) == len(rows)  # distinct requests
    assert paraphrase_suite.suite() == rows  # the same seed writes the same suite
    assert paraphrase_suite.suite(seed=24) != rows  # and another seed another


def test_every_tool_row_has_a_gold_plan_with_a_catalog_tool(rows, catalog):
    for r in rows:
        if r["side"] == "tool":
            assert r["tool"] in catalog.tools and r["operands"]
            assert [t["mcp_tool"] for t in r["plan"]] == [r["tool"]]
        else:
            assert r["tool"] == "" and r["plan"] is None


@pytest.mark.parametrize("n,en,de", [(300, "three hundred", "dreihundert"), (21, "twenty-one", "einundzwanzig"),
                                     (1999, "one thousand nine hundred ninety-nine", "eintausendneunhundertneunundneunzig")])
def test_numbers_as_words(n, en, de):
    assert paraphrase_suite.words_en(n) == en and paraphrase_suite.words_de(n) == de
    assert paraphrase_suite.digits(4360, "en", sep=True) == "4,360" and paraphrase_suite.digits(4360, "de", sep=True) == "4.360"
    assert paraphrase_suite.digits(2.5, "de") == "2,5"


def test_the_generator_writes_its_file(tmp_path):
    out = tmp_path / "suite.jsonl"
    res = subprocess.run([sys.executable, str(ROOT / "bench" / "paraphrase_suite.py"), "--per-class", "3", "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert f"rows={len(lines)}" in res.stdout and {r["lang"] for r in lines} == {"en", "de"}


def test_suite_rates_per_language_and_na_for_an_empty_denominator(ruleset, catalog):
    import triggers as bench

    from mashbill.validators.plans.plans import Shown
    from mashbill.validators.plans.triggers import triggers_for

    assert bench._rate(0, 0) == "n/a" and bench._rate(1, 4) == "0.2500"
    stats, _ = bench.suite_stats(ruleset, triggers_for(ruleset), catalog, Shown(None))
    for lang in ("en", "de"):
        hit, total = stats[lang, "recall"]
        fired, none = stats[lang, "false"]
        assert total >= 1000 and none >= 1000
        # the done-when of issue 23, per language
        assert hit / total >= 0.97 and fired / none <= 0.005
