"""The one percentile summary: nearest-rank percentiles of a list of numbers.

Nearest rank (not interpolation) so that every figure shown is a value that occurred: a token length,
a latency that some call took.
"""

from __future__ import annotations

from collections.abc import Sequence


def percentiles(values: Sequence[float], qs: Sequence[int] = (50, 95, 99)) -> dict:
    """{"n", "min", "p<q>" for each q, "max", "mean"}; every figure None when there are no values."""
    v = sorted(values)
    if not v:
        return {"n": 0, "min": None, **{f"p{q}": None for q in qs}, "max": None, "mean": None}

    def rank(q: float):
        return v[min(len(v) - 1, max(0, int(round(q / 100 * (len(v) - 1)))))]

    return {"n": len(v), "min": v[0], **{f"p{q}": rank(q) for q in qs}, "max": v[-1],
            "mean": round(sum(v) / len(v), 4)}
