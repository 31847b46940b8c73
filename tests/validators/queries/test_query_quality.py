"""The quality checks of synthesized queries (SYN009-SYN012): each on English and German rows, and the whole
screen against the labelled yardstick (tests/validators/fixtures/synth-labelled, README beside it) and against real
queries of shared/data/queries-dev. The floors and ceilings are the figures bench/synth_quality.py measured on the
report half, minus (plus) a margin: a change to a check that loses precision or drops more real queries fails here."""

from __future__ import annotations

import hashlib
import json

import pytest

from mashbill.errors import SpecError
from mashbill.specs import LIBRARY, load_spec
from mashbill.validators.plans.ruleset import load_ruleset
from mashbill.validators.plans.triggers import triggers_for
from mashbill.validators.queries.queries import REQUEST_OPENERS, quality_codes, query_screen
from mashbill.validators.queries.query_quality import assistant_voice, cell_fit, needs_context, several_requests

from vhelpers import QUERIES_DEV as DEV
from vhelpers import QUERIES_SPEC as SPEC
from vhelpers import ROOT
from vhelpers import real_queries


@pytest.fixture(scope="module")
def screen():
    return query_screen(load_spec(SPEC))


def test_context_references_without_their_content():
    dropped = ["What are the specifics of these regulations?", "How does it work?", "How to fix it?",
               "Which of the above items is incorrect?", "Write a short poem based on the following title:",
               "Is there any other way to remove duplicates?", "Fasse diesen Text in drei Sätzen zusammen.",
               "Wie funktioniert das genau?"]
    kept = ["Summarise this text: 'The meeting moves to Friday at 10.'",  # the text is given
            "Translate the following sentence into German: 'See you tomorrow.'",
            "What does it mean when your baby comes out feet first?",  # real (NQ), an idiom, not a reference
            "Why does my Docker container exit with code 137?",
            "Übersetze diesen Satz ins Englische: 'Bis morgen.'"]
    assert [t for t in dropped if needs_context(t) is None] == []
    assert [t for t in kept if needs_context(t) is not None] == []
    # the memory-recall cell refers to the conversation by design
    assert needs_context("How does it work?", "memory_recall") is None


def test_several_requests_in_one():
    en, de = REQUEST_OPENERS["en"], REQUEST_OPENERS["de"]
    assert several_requests("What is climate? How does it affect us?", en)
    assert several_requests("What are common side effects of metformin? Some include nausea and headaches.", en)
    assert several_requests("Hello There! 1. How can I make a website? 2. How do I learn React?", en)
    assert several_requests("Was ist Photosynthese? Welche Pflanzen nutzen sie?", de)
    # one request with its context, or with a constraint, is one request
    assert several_requests("My Docker container exits immediately with code 137. What should I check?", en) is None
    assert several_requests("Describe a vivid character. Answer in fewer than two paragraphs.", en) is None
    assert several_requests("Berechne 12.750 geteilt durch 17 und runde auf zwei Nachkommastellen.", de) is None


def test_the_assistants_voice():
    assert assistant_voice("Is there anything else I can help with?")
    assert assistant_voice("A user asked how a carrier's liability is limited?")
    assert assistant_voice("Kann ich dir sonst noch helfen?")
    assert assistant_voice("Can you help me plan a trip to Lisbon?") is None
    assert assistant_voice("Was ist die Hauptstadt von Kanada?") is None


def test_the_cell_fit_uses_the_rule_sets_triggers():
    trig = triggers_for(load_ruleset())

    def fit(text, cell, trap=False):
        return cell_fit(text, cell, trap, trig.analyze(text))

    assert fit("How many kilometers are 12 miles?", "unit_conversion") is None
    assert fit("Rechne 20 Grad Celsius in Fahrenheit um.", "unit_conversion") is None
    assert fit("What does this unit of measurement look like?", "unit_conversion")
    assert fit("How many usable hosts are in 10.0.8.0/22?", "subnet") is None
    assert fit("How many host will be available for this subnet?", "subnet")
    assert fit("Was regelt § 626 BGB bei einer fristlosen Kündigung?", "legal_paragraph") is None
    assert fit("Can I delete my subscription online in Germany?", "legal_paragraph")
    assert fit("Does § 17 DSGVO cover old newsletters?", "legal-paragraph", trap=True) is None
    assert fit("Implement Dijkstra's algorithm in Go.", "research-before-code", trap=True) is None
    assert fit("create a custom game with multiple stages", "research-before-code", trap=True)
    assert fit("My server has 640 GB and uses 37.5% of it, how many GB are free?", "precision-first", True) is None
    assert fit("In science, can you explain how it works?", "precision-first", trap=True)
    assert fit("What is 18 % of 4,360?", "percentage") is None
    assert fit("What is the new price?", "percentage")
    assert fit("Give me the SHA-256 hash of the string 'kaffee'.", "hash_base64") is None
    assert fit("How to get the SHA-256 hash of the given string", "hash_base64")
    assert fit("What did I tell you earlier about the backup window?", "memory_recall") is None
    assert fit("In which environment would you deploy the server?", "memory_recall")
    assert fit("Explain the difference between weather and climate.", "general") is None  # no evidence asked
    assert fit("Wie sagt man 'Guten Appetit' auf Japanisch?", "translation") is None
    assert fit("Übersetze ins Englische", "translation")  # nothing to translate
    assert fit("How many /64 subnets are in 2001:db8:abcd::/48?", "subnet") is None


def test_the_library_seeds_pass_their_cells_quality_checks(screen):
    """The seeds are what a genuine query of each cell looks like (the shape checks are older: "Hi there!" is
    shorter than min_chars). None of the 52 quick-start seeds fails its cell's quality checks; of the 183 in
    moe-seeds.jsonl two German unit conversions do ("120 km/h in Metern pro Sekunde": the rule set's unit
    matcher does not know the German unit names)."""
    failed = {}
    for name in ("quickstart.jsonl", "moe-seeds.jsonl"):
        rows = [json.loads(line) for line in (ROOT / "specs" / "library" / "seeds" / name)
                .read_text(encoding="utf-8").splitlines() if line.strip()]
        failed[name] = [r["query"] for r in rows
                        if quality_codes(screen, r["query"], r["lang"], r.get("type"), False, shape=False)]
    assert failed["quickstart.jsonl"] == []
    assert len(failed["moe-seeds.jsonl"]) <= 2, failed["moe-seeds.jsonl"]


def test_the_yardstick_halves_follow_the_stable_hash(labelled):
    """Tune and report halves are fixed by the query's hash, so a relabel can never move a row between them."""
    assert len(labelled) >= 300
    for r in labelled:
        even = hashlib.sha256(r["query"].encode()).digest()[0] % 2 == 0
        assert r["half"] == ("tune" if even else "report"), r["query"]
        assert r["genuine"] == (r["reason"] is None)
        assert r["reason"] in (None, "garbled", "needs-context", "concatenated", "wrong-cell", "echo", "other")


def test_the_screen_on_the_report_half(screen, labelled):
    """Measured (bench/synth_quality.py --half report): the genuine share of what the screen keeps rose from 0.20
    to 0.45, with 0.75 of the non-genuine dropped and each new check's drops >= 0.96 non-genuine."""
    rows = [r for r in labelled if r["half"] == "report"]
    cells = [r["cell"].split("/") for r in rows]  # type (or trap rule) / language / plain|trap
    codes = [quality_codes(screen, r["query"], lang, t, kind == "trap") for r, (t, lang, kind) in zip(rows, cells)]
    kept = [r for r, c in zip(rows, codes) if not c]
    bad = [r for r in rows if not r["genuine"]]
    precision = sum(r["genuine"] for r in kept) / len(kept)
    recall = sum(1 for r, c in zip(rows, codes) if c and not r["genuine"]) / len(bad)
    assert precision >= 0.40 and recall >= 0.68, (precision, recall)
    for code in ("SYN009", "SYN010", "SYN011", "SYN012"):
        drops = [r for r, c in zip(rows, codes) if code in c]
        assert drops and sum(not r["genuine"] for r in drops) / len(drops) >= 0.9, code


@pytest.mark.skipif(DEV is None, reason="the shared queries-dev corpora are not beside this checkout")
def test_real_queries_are_rarely_dropped(screen):
    """Real users' requests (queries-dev JSON Lines rows and MGSM, English and German, <= 300 characters): the
    quality checks drop 1.1% (measured; mostly two questions in one); the ceiling is 1.6%."""
    real = real_queries(DEV)
    assert len(real) > 3000 and sum(lang == "de" for _, lang in real) > 100
    dropped = [t for t, lang in real if quality_codes(screen, t, lang, None, False, shape=False)]
    assert len(dropped) <= 0.016 * len(real), dropped[:5]


def test_the_cell_fit_needs_a_rule_set(tmp_path):
    text = SPEC.read_text(encoding="utf-8").replace("rules: ../shared/rules/moe-routing@2.yaml", "")
    text = text.replace("file: ../", f"file: {LIBRARY}/").replace("path: ../", f"path: {LIBRARY}/")
    text = text.replace("output_schema: ../", f"output_schema: {LIBRARY}/")
    text = text.replace("holdout: [../", f"holdout: [{LIBRARY}/")
    (tmp_path / "q.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match="cell_fit needs a rule set"):
        query_screen(load_spec(tmp_path / "q.yaml"))
