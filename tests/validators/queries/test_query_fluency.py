"""SYN013, the fluency check of synthesized queries: the embedded SmolLM2's mean surprise per token, with a limit
per language. Real model, real fixture rows: the floors and ceilings are what bench/synth_quality.py measured on
the labelled yardstick and on real queries-dev queries, minus (plus) a margin. One model load per test process
(validators.queries.query_fluency caches it)."""

from __future__ import annotations

import statistics

import pytest

from mashbill.specs import LIBRARY, load_spec
from mashbill.validators.queries.queries import quality_codes, query_screen
from mashbill.validators.queries.query_fluency import MEASURED_LIMITS, mean_nll, not_fluent

from vhelpers import QUERIES_DEV as DEV
from vhelpers import QUERIES_SPEC as SPEC
from vhelpers import real_queries


def test_german_word_salad_above_the_limit_and_real_german_below(labelled):
    """Yardstick rows labelled garbled by eye are above the candidate German limit, real German requests below;
    a language without a limit is not checked."""
    by_query = {r["query"]: r for r in labelled}
    for q in ["Inzwilde einem Kalt?", "andier am folgroste Kommunspunkt (abzwimmel)?", "A nach 263 StGB vollendet?"]:
        assert by_query[q]["reason"] == "garbled"
        assert not_fluent(q, "de", MEASURED_LIMITS), (q, mean_nll(q))
    for q in ["was ist 7.5 minus 1000", "Wie viele Tage hat der Februar im Jahr 2028?"]:
        assert not_fluent(q, "de", MEASURED_LIMITS) is None, (q, mean_nll(q))
    assert not_fluent("Inzwilde einem Kalt?", "en", MEASURED_LIMITS) is None


def test_the_german_limit_drops_genuine_short_seeds():
    """Why no spec sets the German limit: short genuine requests with a paragraph, a numeral or a unit surprise
    the model as much as word salad (measured: 27 of the 119 German library seeds above 5.5)."""
    seeds = ["Welche Rechte gibt mir § 535 BGB als Mieter?", "Welche Zahl ist MCMLXXXIV?",
             "Rechne 2,5 Tonnen in Pfund um.", "Was sind typische Symptome eines Eisenmangels?"]
    assert sum(bool(not_fluent(q, "de", MEASURED_LIMITS)) for q in seeds) >= 3


def test_english_garble_is_not_more_surprising_than_real_english(labelled):
    """Why English has no limit: the teacher's own garbled English surprises it less than real users' requests
    (measured medians 3.4 and 4.3 nats/token). If a model change ever reverses this, an English limit is worth
    measuring again."""
    if DEV is None:
        pytest.skip("the shared queries-dev corpora are not beside this checkout")
    garbled = [r["query"] for r in labelled if r["lang"] == "en" and r["reason"] == "garbled"][:8]
    real = [t for t, lang in real_queries(DEV) if lang == "en" and len(t) < 120][::150][:8]
    assert statistics.median(mean_nll(q) for q in garbled) < statistics.median(mean_nll(q) for q in real)


def test_the_screen_drops_by_its_spec_limits(tmp_path):
    """`synthesis.filters.fluency` turns the check on in the screen, after the cheaper checks."""
    base = LIBRARY
    text = SPEC.read_text(encoding="utf-8")
    for key in ("file: ../", "path: ../", "output_schema: ../", "holdout: [../", "rules: ../"):
        text = text.replace(key, key.replace("../", f"{base}/"))
    text = text.replace("cell_fit: true}", "cell_fit: true, fluency: {de: 5.5}}")
    (tmp_path / "q.yaml").write_text(text, encoding="utf-8")
    spec = load_spec(tmp_path / "q.yaml")
    assert spec.spec.synthesis.filters.fluency == {"de": 5.5}
    assert spec.hash != load_spec(SPEC).hash
    on, off = query_screen(spec), query_screen(load_spec(SPEC))
    q = "Inzwilde einem Kalt?"
    assert "SYN013" in quality_codes(on, q, "de", "arithmetic", False, shape=False)
    assert "SYN013" not in quality_codes(off, q, "de", "arithmetic", False, shape=False)
    assert on.check("Wie viele Tage hat der Februar im Jahr 2028?", "de", "date") is None


def test_precision_on_the_report_half(labelled):
    """German rows of the report half: every SYN013 drop is not genuine (measured: 2 drops, both garbled; the
    report half holds 8 German rows, 1 genuine)."""
    rows = [r for r in labelled if r["half"] == "report" and r["lang"] == "de"]
    drops = [r for r in rows if not_fluent(r["query"], "de", MEASURED_LIMITS)]
    assert len(drops) >= 1 and all(not r["genuine"] for r in drops), [r["query"] for r in drops]


@pytest.mark.skipif(DEV is None, reason="the shared queries-dev corpora are not beside this checkout")
def test_real_german_queries_are_rarely_dropped():
    """German queries of queries-dev (mt_bench_x_de and MGSM, <= 300 characters; every 12th, the model reads them
    in seconds each on a busy machine): measured 1 of all 117 above the limit; at most 1 of the sample."""
    real = [t for t, lang in real_queries(DEV) if lang == "de"]
    assert len(real) > 100
    dropped = [t for t in real[::12] if not_fluent(t, "de", MEASURED_LIMITS)]
    assert len(dropped) <= 1, dropped
