"""Exact and near duplicates (MinHash/LSH, keep-one) and leakage against holdout sets and the eval split."""

from __future__ import annotations

import json
import random

import pytest

from mashbill.validators.data.dedup import dedup, normalize, signatures
from mashbill.validators.data.leakage import HoldoutItem, leakage, load_holdout
from mashbill.validators.errors import ValidationInputError

BASE = [
    "Wie viele Tage liegen zwischen dem 1. März und dem 24. Dezember 2024?",
    "Write a Tetris clone in Python with pygame and a scoring system.",
    "Was bedeutet § 823 Abs. 2 BGB für einen Radfahrer, der nachts ohne Licht fährt?",
    "Explain the difference between a process and a thread in operating systems.",
    "Berechne den Heizwärmebedarf eines Einfamilienhauses mit 150 m² Wohnfläche.",
    "How do I configure a reverse proxy for two backend services with nginx?",
]


def _shingles(t, k=5):
    t = normalize(t)
    t = t if len(t) >= k else t.ljust(k)
    return {t[i:i + k] for i in range(len(t) - k + 1)}


def test_normalize():
    assert normalize("  Hello,   WORLD!! ") == "hello world"
    assert normalize("Straße – ÄRGER") == "strasse ärger"


def test_signature_estimates_track_jaccard():
    rng = random.Random(1)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 40))) for _ in range(150)]
    sig = signatures([normalize(t) for t in texts])
    errors = []
    for _ in range(600):
        a, b = rng.randrange(150), rng.randrange(150)
        A, B = _shingles(texts[a]), _shingles(texts[b])
        errors.append(abs((sig[a] == sig[b]).mean() - len(A & B) / len(A | B)))
    assert sum(errors) / len(errors) < 0.05
    assert (sig[0] == signatures([normalize(texts[0])])[0]).all()  # deterministic


def test_exact_and_near_duplicates_keep_the_first(ruleset):
    cfg = ruleset.checks.dedup
    texts = list(BASE)
    texts.append("  WIE VIELE TAGE liegen zwischen dem 1. März und dem 24. Dezember 2024 ")  # exact after normalising
    texts.append("Write a Tetris clone in Python with pygame and a scoring system!!")  # exact
    texts.append("Please write a Tetris clone in Python with pygame and a scoring system.")  # near (J 0.89)
    texts.append("Write a Tetris clone in Python using pygame and a scoring system.")  # J 0.75: not a near duplicate
    texts.append("Was bedeutet § 823 Abs. 2 BGB für einen Radfahrer, der nachts ohne Licht fährt? Danke!")  # near
    keys = [f"r{i}" for i in range(len(texts))]
    res = dedup(keys, texts, cfg)
    by = {k: [v.code for v in vs] for k, vs in res.verdicts.items()}
    assert by == {"r6": ["DUP001"], "r7": ["DUP001"], "r8": ["DUP002"], "r10": ["DUP002"]}
    assert "of r0" in res.verdicts["r6"][0].detail
    assert "kept r1" in res.verdicts["r8"][0].detail and "kept r2" in res.verdicts["r10"][0].detail
    assert res.summary()["near_clusters"] == 2 and res.exact_groups == 2


def test_distinct_texts_have_no_duplicates(ruleset):
    res = dedup([f"k{i}" for i in range(len(BASE))], BASE, ruleset.checks.dedup)
    assert res.verdicts == {}


def test_holdout_files(tmp_path):
    (tmp_path / "h.txt").write_text("first query\n\nsecond query\n", encoding="utf-8")
    (tmp_path / "h.jsonl").write_text(json.dumps({"prompt": "a prompt"}) + "\n" + json.dumps({"question": "q"}) + "\n",
                                      encoding="utf-8")
    (tmp_path / "bench.json").write_text(json.dumps({"name": "b", "test_cases": [
        {"id": "c1", "type": "single_turn", "prompt": "Wie viel ist 17 % von 2840?"},
        {"id": "c2", "type": "multi_turn", "turns": ["hi", "und was ist 18 %?"]}]}), encoding="utf-8")
    assert [i.text for i in load_holdout(tmp_path / "h.txt")] == ["first query", "second query"]
    assert [i.source for i in load_holdout(tmp_path / "h.jsonl")] == ["h.jsonl:1", "h.jsonl:2"]
    got = load_holdout(tmp_path / "bench.json")
    assert [(i.source, i.text) for i in got] == [("bench.json:c1", "Wie viel ist 17 % von 2840?"),
                                                 ("bench.json:c2", "und was ist 18 %?")]
    (tmp_path / "bad.jsonl").write_text('{"nothing": 1}\n', encoding="utf-8")
    with pytest.raises(ValidationInputError, match=r"bad.jsonl:1: holdout row has no"):
        load_holdout(tmp_path / "bad.jsonl")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe")
    with pytest.raises(ValidationInputError, match="not UTF-8"):
        load_holdout(tmp_path / "bin.txt")
    with pytest.raises(ValidationInputError, match="cannot read"):
        load_holdout(tmp_path / "missing.txt")


def test_leakage(ruleset):
    hold = [HoldoutItem("bench:1", BASE[2]), HoldoutItem("bench:2", "Erkläre Photosynthese in zwei Sätzen."),
            HoldoutItem("bench:3", BASE[5])]
    train = ["Was bedeutet § 823 Abs. 2 BGB für einen Radfahrer, der nachts ohne Licht fährt??",  # identical
             "Bitte: How do I configure a reverse proxy for two backend services with nginx? Kurz.",  # contains
             "Was bedeutet § 823 Abs. 2 BGB für einen Fahrradfahrer, der nachts ohne Licht fährt?",  # near
             BASE[0], BASE[3]]
    verdicts, summary = leakage([f"t{i}" for i in range(5)], train, hold, ruleset.checks.leakage,
                                ruleset.checks.dedup)
    assert sorted(verdicts) == ["t0", "t1", "t2"]
    assert all(v[0].code == "LEAK001" and v[0].severity == "reject" for v in verdicts.values())
    assert "bench:1" in verdicts["t0"][0].detail and "identical" in verdicts["t0"][0].detail
    assert "bench:3" in verdicts["t1"][0].detail and "contains" in verdicts["t1"][0].detail
    assert "bench:1" in verdicts["t2"][0].detail and "Jaccard" in verdicts["t2"][0].detail
    assert summary == {"holdout_items": 3, "leaked": 3}


def test_normalisation_keeps_operators_between_operands(ruleset):
    assert normalize("Q(sqrt(2)*sqrt(3))") != normalize("Q(sqrt(2)+sqrt(3))")
    assert normalize("What is 7 - 3?") == normalize("what is 7-3") != normalize("what is 7+3")
    assert normalize("e-mail, km/h") == "e mail km h"  # a hyphen or slash between words is not an operator
    res = dedup(["a", "b"], ["Q(sqrt(2)*sqrt(3))", "Q(sqrt(2)+sqrt(3))"], ruleset.checks.dedup)
    assert not any(v.code == "DUP001" for vs in res.verdicts.values() for v in vs)


def test_holdout_lines_end_at_newline_only(tmp_path):
    p = tmp_path / "bench.jsonl"
    rows = [{"query": "Was ist\u0085 7 hoch 5?"}, {"query": "Line\u2028two"}]
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    items = load_holdout(p)
    assert [i.text for i in items] == [r["query"] for r in rows] and items[1].source == "bench.jsonl:2"


SHORT = [
    # (training query, holdout item): the commonest real leak, a benchmark query with words added or moved
    ("Wie viel ist 7167 geteilt durch 28 ? Bitte genau.", "Wie viel ist 7167 geteilt durch 28?"),
    ("Wie viel ist 7167 geteilt durch 28?", "Wie viel ist 7167 geteilt durch 28 ? Bitte genau."),
    ("Hey, what is 7 to the power of 5?", "What is 7 to the power of 5"),
    ("Was ist 7 hoch 5?", "Was ist 7 hoch 5? Danke"),
]


@pytest.mark.parametrize("train,held", SHORT)
def test_leakage_catches_short_queries_with_a_suffix_prefix_or_punctuation_change(train, held, ruleset):
    verdicts, summary = leakage(["r1"], [train], [HoldoutItem("bench:1", held)], ruleset.checks.leakage,
                                ruleset.checks.dedup)
    assert [v.code for v in verdicts.get("r1", [])] == ["LEAK001"] and summary["leaked"] == 1


def test_leakage_containment_needs_most_of_the_text(ruleset):
    held = [HoldoutItem("bench:1", "Write a poem about the sea in the style of Goethe, with four stanzas and rhymes."),
            HoldoutItem("bench:2", "What is 17 + 4?")]
    train = ["Write a poem about the sea", "How do I compute what is 17 + 4 in Excel, and how do I format cells?"]
    verdicts, _ = leakage(["a", "b"], train, held, ruleset.checks.leakage, ruleset.checks.dedup)
    assert verdicts == {}
