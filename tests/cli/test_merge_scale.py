"""The scale rehearsal at 10K records in CI (bench/scale.py runs the same stages, tests/factory/rehearsal_run.py, at
100K and beyond): replay-teacher records of three kinds generated in 4 shards, two of them killed with SIGKILL after
their first commit and resumed, merged, validated, frozen, pulled and preflighted. It checks counts, never timings:
nothing lost, nothing duplicated, nothing failed, and the verdict counts are the replay teacher's error mix.

`train classify`, `export onnx` and `release check` follow in bench/scale.py; in CI the quick start's chain
(tests/cli/test_quickstart_chain.py) runs those commands, so this test stops after the preflight."""

from __future__ import annotations

import json

import pytest

from tests.factory.rehearsal_run import SHARE, rehearse

RECORDS = 10_000


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale")
    return root, rehearse(root / "run", RECORDS, shards=4, kill=2, until="preflight", log=lambda *a: None)


def test_nothing_is_lost_or_duplicated_after_two_shards_are_killed(rehearsal):
    _, res = rehearsal
    assert len(res["killed"]) == 2
    gen = res["stages"][0]
    assert gen.name == "generate" and -9 in gen.exit_codes  # the kills happened mid-run
    assert sorted(res["counts"]) == sorted(SHARE)
    assert sum(c["inputs"] for c in res["counts"].values()) == RECORDS
    for kind, c in res["counts"].items():
        assert c["records"] == c["distinct"] == c["inputs"], (kind, c)
        assert c["failed"] == 0, (kind, c)


def test_the_verdict_counts_are_the_error_mix_at_volume(rehearsal):
    _, res = rehearsal
    for kind, c in res["counts"].items():
        assert c["status_ok"] and c["codes_ok"], (kind, json.dumps(c, sort_keys=True))
        assert c["codes"].get("PARSE001") and c["codes"].get("TRUNC001"), (kind, c["codes"])


def test_every_stage_after_the_merge_ran_on_the_merged_store(rehearsal):
    root, res = rehearsal
    names = [s.name for s in res["stages"]]
    assert names == ["generate", "merge", "validate", "freeze", "pull", "preflight"]
    assert all(code in (0, 1) for s in res["stages"][1:] for code in s.exit_codes)
    sel = res["selection"]
    assert sel["records"] == res["counts"]["complexity"]["inputs"]  # every complexity record was considered
    assert sel["examples"] + sel["excluded"] == sel["records"] and sel["examples"] > 0
    pulled = sum(sum(1 for _ in open(f, encoding="utf-8")) for f in (root / "run" / "pull").glob("*.jsonl"))
    assert pulled == res["frozen"] == sel["examples"]  # the pull holds every frozen example, once


def test_growth_flags_a_stage_that_grows_faster_than_n_log_n():
    from tests.factory.rehearsal_run import Stage, growth

    def stages(n, quadratic):
        return [Stage("linear", n, cpu_s=n / 1000), Stage("quadratic", n, cpu_s=quadratic)]

    lines, worst = growth({1000: stages(1000, 1.0), 10000: stages(10000, 100.0)})
    assert worst == "quadratic"
    assert "FASTER THAN n log n" in next(ln for ln in lines if "quadratic" in ln)
    assert "FASTER" not in next(ln for ln in lines if "linear" in ln)
