"""The Hyperscan prefilter in front of the rule sets' patterns (issue 29): a pattern it does not name for a text
cannot match that text, so the answers are the patterns' own; texts outside U+0000-U+036F (but for the masks'
placeholder brackets ⟨ ⟩) run every pattern."""

from __future__ import annotations

import re

import pytest

from mashbill.specs.loader import LIBRARY
from mashbill.validators.complexity.complexity import cues_for
from mashbill.validators.complexity.complexity_rules import (CUE_GROUPS, CompiledCues, compile_cues,
                                                              load_complexity_rules)
from mashbill.validators.data.synthetic import corpus
from mashbill.validators.plans.ruleset import load_ruleset
from mashbill.validators.plans.triggers import Triggers
from mashbill.validators.prefilter import PatternSet, Prefiltered, enabled, superset_pattern

from verdict_corpus import real_queries

pytestmark = pytest.mark.skipif(not enabled(), reason="Hyperscan is not installed on this platform")
RULES = LIBRARY / "shared" / "rules"


def _texts() -> list[str]:
    real = real_queries()
    texts = [r.query for r in corpus(200, seed=11)] + real[::2]
    texts += [t.upper() for t in real[1::40]] + [t.title() for t in real[3::40]]  # case: the cues are re.I
    texts += ["", " ", "7", "ſ s ß ẞ k K ǅ ǆ", "straße STRASSE Straße", "İstanbul ı i", "ÀÉÎÕÜ àéîõü", "x\u036f y",
              "x\u0370 y", "Привет, сколько будет 7 * 8?", "東京は今何時ですか", "3 pm est to cet", "§ 823 abs. 2 bgb",
              "vom 1.3. bis 24.12.", "din en iso ٩٠٠١", "x² + y²", "a\nb\r\nc", "tab\there",
              "am ⟨date⟩ um ⟨time⟩ in ⟨ip⟩", "⟨DATE⟩⟨⟩⟩⟨", "wie viel ist ⟨para⟩ ⟨act⟩ § 5", "⟨date⟩ Привет"]
    return texts


def _check(pattern_objects, texts) -> tuple[int, int]:
    """Every prefiltered pattern's answer equals its pattern's on every text (as found, for lower-cased and original
    texts); returns (pattern runs skipped, texts the prefilter left alone)."""
    wrapped = [p for p in pattern_objects if isinstance(p, Prefiltered)]
    assert wrapped, "no pattern is behind the prefilter"
    skipped = bypassed = 0
    for text in texts:
        for t in (text, text.lower()):
            cands = wrapped[0]._set.candidates(t)
            bypassed += cands is None
            for p in wrapped:
                want, got = p.rx.search(t), p.search(t)
                assert (want and (want.span(), want.groups())) == (got and (got.span(), got.groups())), \
                    (p.pattern[:80], t)
                assert p.rx.sub("⟨x⟩", t) == p.sub("⟨x⟩", t)
                skipped += cands is not None and p._index not in cands
    return skipped, bypassed


@pytest.mark.parametrize("version", [2, 6, 7])
def test_trigger_patterns_answer_what_they_answer_without_the_prefilter(version):
    tr = Triggers(load_ruleset(RULES / f"moe-routing@{version}.yaml"))
    objects = list(tr.contexts.values()) + [m[0] for m in tr.masks] + tr.citations + [tr.impl, tr.recall]
    for level in tr.by_level:
        objects += [rx for _, _, trig in level for rx, *_ in trig]
    for trig in [tr.creative, tr.translation, *tr.categories.values()]:
        objects += [t[0] for t in trig]
    texts = _texts()
    skipped, bypassed = _check(objects, texts)
    assert skipped > 10 * len(texts)  # most patterns are skipped on most texts: the point of it
    assert bypassed >= 4  # the Cyrillic, Japanese, Arabic-digit and U+0370 texts ran every pattern
    masked = [tr.mask(q.lower()) for q in real_queries()]
    held = [t for t in masked if "⟨" in t]
    assert len(held) >= 10 and all(tr.prefilter.candidates(t) is not None for t in held)  # placeholders are scanned
    _check(objects, held)


@pytest.mark.parametrize("version", [1, 3])
def test_complexity_cues_answer_what_they_answer_without_the_prefilter(version, monkeypatch):
    rules = load_complexity_rules(RULES / f"moe-complexity@{version}.yaml")
    cues = cues_for(rules)
    monkeypatch.setenv("MASHBILL_PREFILTER", "0")
    unfiltered = CompiledCues(rules.cues)  # every alternative runs
    assert unfiltered.prefilter is None
    alternations = {group: compile_cues(getattr(rules.cues, group)) for group in CUE_GROUPS}
    texts = _texts()
    skipped = 0
    for text in texts:  # a group's first match, alternative by alternative, is its alternation's first match
        for t in (text, text.lower()):
            may = cues.prefilter.candidates(t)
            for alts in cues.alternatives.values():
                for index, rx in alts:
                    if may is not None and index not in may:  # a skipped alternative cannot match
                        skipped += 1
                        assert rx.search(t) is None, (rx.pattern[:80], t)
            found = cues.find_groups(CUE_GROUPS, t)
            for group, joined in alternations.items():
                want = joined.search(t) if joined is not None else None
                assert cues.find(group, t) == found[group] == (want.group(0) if want else None), (group, t)
            assert unfiltered.find_groups(CUE_GROUPS, t) == found
    assert skipped > 10 * len(texts)  # most alternatives are skipped on most texts: the point of it


@pytest.mark.parametrize("pattern, text", [
    (r"(?i)straße", "STRAßE"), (r"(?i)s", "ſ"), (r"(?i)k", "K"), (r"\bwort\b", "ein wort."), (r"(?<!\w)ab", "ab"),
    (r"(a)\1", "aa"), (r"(?P<x>b)?(?(x)c|d)", "d"), (r"x{2,500}", "x" * 300), (r"[^\W\d_]+", "über"), (r"\s+", "\u00a0"),
    (r".", "\n"), (r"(?s).", "\n"), (r"^a$", "a"), (r"(?m)^b", "a\nb"), (r"(?i:É)", "é"), (r"\Aé\Z", "é"),
    (r"[^a]", "⟨"), (r"x.⟩", "x⟨⟩"), (r"(?i)⟨date⟩", "⟨DATE⟩"), (r"\W+", "⟨⟩"), (r"(a)\1⟩", "aa⟩"), (r"[⟨-⟩]", "⟩"),
])
def test_a_converted_pattern_matches_where_the_pattern_matches(pattern, text):
    """Superset by construction: case folding, word boundaries, lookarounds, back-references, conditionals,
    long repeats, Unicode classes, anchors, scoped flags."""
    ps = PatternSet()
    p = ps.add(re.compile(pattern))
    hit = re.compile(pattern).search(text)
    assert p.search(text) == hit or (hit and p.search(text).span() == hit.span())
    if hit:
        assert p._index in ps.candidates(text), superset_pattern(re.compile(pattern))


def test_a_pattern_it_cannot_convert_always_runs():
    ps = PatternSet()
    verbose = ps.add(re.compile(r"a  b  # spaces are not part of it", re.VERBOSE))
    plain = ps.add(re.compile(r"zzz"))
    assert verbose.search("ab").group(0) == "ab" and verbose._index in ps.candidates("ab")
    assert plain._index not in ps.candidates("ab") and plain.search("ab") is None


def test_a_pattern_added_after_a_scan_is_asked_about_texts_scanned_before():
    ps = PatternSet()
    first = ps.add(re.compile(r"kilo"))
    assert first.search("3 kilo 7 %") is not None  # the text's candidates are kept: {first}
    later = ps.add(re.compile(r"\d+ %"))
    assert later.search("3 kilo 7 %").group(0) == "7 %"


def test_pii_patterns_answer_what_they_answer_without_the_prefilter():
    from mashbill.validators.data import pii

    texts = _texts() + ["Mein Name ist Anna Schmidt, Tel. 0171-2345678", "IBAN DE89 3704 0044 0532 0130 00 bitte",
                        "Dear Mr. Smith,\nregards\nJohn Doe", "call +49 30 1234567 or (555) 123-4567",
                        "Sehr geehrte Frau Dr. Müller-Lüdenscheidt, Durchwahl 030/123456"]
    skipped, _ = _check([pii.PHONE, pii.IBAN, pii.NAME, pii.TITLED], texts)
    assert skipped > len(texts)
    for text in texts[-5:]:  # and the findings themselves
        assert {f.code for f in pii.find_pii(text)} & {"PII002", "PII003", "PII004"}


def test_a_compiled_database_is_kept_in_the_cache_and_a_damaged_one_is_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("MASHBILL_CACHE", str(tmp_path))
    patterns = [re.compile(r"\b(?:kilo|gram)s?\b"), re.compile(r"\d+\s*%")]

    def fresh():
        ps = PatternSet()
        wrapped = [ps.add(p) for p in patterns]
        return ps, wrapped

    ps, wrapped = fresh()
    assert ps.candidates("12 % of 3 kilos") == {0, 1}
    kept = list((tmp_path / "hyperscan").glob("*.hsdb"))
    assert len(kept) == 1
    ps2, wrapped2 = fresh()
    assert ps2.candidates("12 % of 3 kilos") == {0, 1} and ps2.candidates("nothing") == frozenset()
    kept[0].write_bytes(b"[]\ngarbage")  # a damaged cache file: compiled again, and written anew
    ps3, wrapped3 = fresh()
    assert wrapped3[1].search("12 %").group(0) == "12 %" and ps3.candidates("kilo") == {0}
    assert kept[0].read_bytes() != b"[]\ngarbage"


def test_prefilter_0_runs_every_pattern_itself(monkeypatch):
    """`mashbill --help`: MASHBILL_PREFILTER=0 runs every rule pattern without the prefilter."""
    rx = re.compile(r"\d+ kg")
    monkeypatch.setenv("MASHBILL_PREFILTER", "0")
    assert PatternSet().add(rx) is rx
    monkeypatch.setenv("MASHBILL_PREFILTER", "1")
    assert isinstance(PatternSet().add(rx), Prefiltered) and PatternSet().add(None) is None
