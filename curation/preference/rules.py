"""Scoring the verdicts of plans that curation builds itself (edited plans, teacher samples, corrections).

The plans are checked by the one record checker (`mashbill.validators.checker.RecordChecker.for_spec`), exactly as
`mashbill validate` checks stored records; this module only turns its verdicts into codes and scores.
"""

from __future__ import annotations

from typing import Sequence

from mashbill.factory.records import Verdict

FAILING = ("reject", "penalty")


def failing_codes(verdicts: Sequence[Verdict]) -> list[str]:
    return sorted({v.code for v in verdicts if v.severity in FAILING})


def score(verdicts: Sequence[Verdict]) -> int:
    """Higher is better: 0 for a clean plan, -2 per reject finding, -1 per penalty."""
    return -sum(2 if v.severity == "reject" else 1 for v in verdicts if v.severity in FAILING)
