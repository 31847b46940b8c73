"""Issue 29: the faster record checker gives the verdicts it gave before (recorded from the checker before the speed
work, tests/validators/verdict_corpus.py): per case, per record, every code, severity and detail."""

from __future__ import annotations

from collections import Counter

import pytest

from verdict_corpus import QUERIES_DEV, recorded, verdict_tables


@pytest.fixture(scope="module")
def tables():
    return verdict_tables()


@pytest.mark.parametrize("case", ["synthetic", "crossed", "file-@4", "file-@3", "real", "dedup"])
def test_verdicts_are_the_recorded_ones(tables, case):
    if case == "real" and QUERIES_DEV is None:
        pytest.skip("shared/data/queries-dev is not beside this checkout")
    want, got = recorded()[case], tables[case]
    differ = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    assert not differ, (f"{len(differ)} record(s) differ, first {differ[0]}: recorded {want.get(differ[0])!r}, "
                        f"now {got.get(differ[0])!r}")


def test_the_recording_covers_the_rules():
    """The recording is no empty table: the cases reach the schema-free rules that cost the most time."""
    codes = Counter(c.split(":")[0] for t in recorded().values() for row in t.values()
                    for c in row.split("|")[0].split(","))
    for code in ("HR001", "HR002", "HR003", "HR006", "HR008", "ARG001", "ARG002", "ARG003", "DRIFT001", "FIT004",
                 "PLAN011", "COPY001", "DUP001"):
        assert codes[code] > 0, code
