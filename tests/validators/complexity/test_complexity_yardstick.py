"""The complexity rules against the labelled yardstick (tests/fixtures/complexity_labels, labelled by eye from
queries-dev and the quick start; its README gives the criteria). No teacher runs here: bench/complexity_labels.py
measures the teacher; these tests hold the rules to what the yardstick says, in seconds."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from mashbill.specs.loader import LIBRARY
from mashbill.validators.complexity.complexity import check_complexity
from mashbill.validators.complexity.complexity_rules import load_complexity_rules

YARDSTICK = Path(__file__).resolve().parents[2] / "fixtures" / "complexity_labels" / "labels.jsonl"
# The embedded teacher's sampled labels on every yardstick row, stored by
#   .venv/bin/python bench/complexity_labels.py --split all --mode sample --save-labels THIS_FILE
TEACHER_LABELS = YARDSTICK.with_name("teacher-smollm2-135m.json")
RULES = LIBRARY / "shared" / "rules"


@pytest.fixture(scope="module")
def rows():
    return [json.loads(line) for line in YARDSTICK.read_text(encoding="utf-8").splitlines() if line.strip()]


def _rejected(rs, query: str, label: str) -> bool:
    return any(v.severity == "reject" for v in check_complexity(rs, query, {"complexity": label}))


def test_the_yardstick_is_whole(rows):
    assert len(rows) >= 200
    assert {r["split"] for r in rows} == {"tune", "report"}
    assert all(r["label"] in ("trivial", "moderate", "complex", "memory_recall") and r["source"] and r["licence"]
               for r in rows)
    assert len({r["source"] for r in rows}) >= 12
    assert Counter(r["lang"] for r in rows)["de"] >= 30
    assert len({r["query"] for r in rows}) == len(rows)


@pytest.mark.parametrize("version,ceiling", [(1, 0), (2, 0), (3, 7)])
def test_rules_reject_labels_the_yardstick_calls_right_at_most_at_the_measured_ceiling(rows, version, ceiling):
    """@1 and @2 reject no right label. @3 rejects 7 of 213 (measured; 1 on the tune half, 6 on the report half): a
    70-word home-server sizing question called complex (CPLX007: no evidence cue, under 80 words); a tweet-sentiment
    task called trivial (CPLX008: "Positive" is a maths word to the not_lookup cue); two long pasted German paragraphs
    the yardstick calls moderate although its own criteria call a long pasted input complex, and three short
    questions that need a tool or an explanation ("when and where is june's birthday party", "what is a good rap album
    that came out this year", "What are the primary factors that influence consumer behavior?") called moderate
    (CPLX009)."""
    rs = load_complexity_rules(RULES / f"moe-complexity@{version}.yaml")
    wrong = [(r["label"], r["query"][:80]) for r in rows if _rejected(rs, r["query"], r["label"])]
    assert len(wrong) <= ceiling, wrong


def test_moe_complexity_2_rejects_more_wrong_complex_labels_on_the_report_half(rows):
    """The 135M teacher says `complex` for most requests; the share of those wrong `complex` labels the rules reject
    on the report half (measured: @1 0.260, @2 0.385; floor 0.35)."""
    report = [r for r in rows if r["split"] == "report" and r["label"] != "complex"]
    share = {}
    for version in (1, 2):
        rs = load_complexity_rules(RULES / f"moe-complexity@{version}.yaml")
        share[version] = sum(_rejected(rs, r["query"], "complex") for r in report) / len(report)
    assert share[2] >= 0.35 and share[2] > share[1], share


def test_moe_complexity_3_rejects_almost_every_wrong_complex_and_trivial_label_on_the_report_half(rows):
    """Every label each report-half request could wrongly get, rejected or not (measured for @3: complex 91 of 96,
    trivial 59 of 81; @2: 37 and 8; floors 0.9 and 0.6)."""
    rs = load_complexity_rules(RULES / "moe-complexity@3.yaml")
    report = [r for r in rows if r["split"] == "report"]
    for label, floor in (("complex", 0.9), ("trivial", 0.6)):
        wrong = [r for r in report if r["label"] != label]
        share = sum(_rejected(rs, r["query"], label) for r in wrong) / len(wrong)
        assert share >= floor, (label, share)


def _accepted_precision(rs, rows, labels):
    accepted = [(r, labels[r["query"]]) for r in rows
                if labels[r["query"]] is not None and not _rejected(rs, r["query"], labels[r["query"]])]
    return len(accepted), sum(lab == r["label"] for r, lab in accepted)


def test_what_moe_complexity_3_accepts_from_the_real_teacher_is_right_on_the_report_half(rows):
    """The stored SmolLM2-135M labels (real teacher output, see TEACHER_LABELS) through each rule set on the report
    half: @3 accepts 33 of 107, 24 right (precision 0.727; @2: 85 accepted, 26 right, 0.306). Floors: precision 0.7
    (and above @2's), accepted at least a fifth."""
    labels = json.loads(TEACHER_LABELS.read_text(encoding="utf-8"))["sample"]
    assert set(labels) == {r["query"] for r in rows}
    report = [r for r in rows if r["split"] == "report"]
    got = {v: _accepted_precision(load_complexity_rules(RULES / f"moe-complexity@{v}.yaml"), report, labels)
           for v in (2, 3)}
    (acc2, right2), (acc3, right3) = got[2], got[3]
    assert right3 / acc3 >= 0.7 > right2 / acc2, got
    assert acc3 >= 0.2 * len(report), got
