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
    # every accepted record of every kind passes validation: the replay's right answers are right and fit the window
    assert set(res["stages"][2].exit_codes) == {0}
    sel = res["selection"]
    assert sel["records"] == res["counts"]["complexity"]["inputs"]  # every complexity record was considered
    assert sel["examples"] + sel["excluded"] == sel["records"] and sel["examples"] > 0
    pulled = sum(sum(1 for _ in open(f, encoding="utf-8")) for f in (root / "run" / "pull").glob("*.jsonl"))
    assert pulled == res["frozen"] == sel["examples"]  # the pull holds every frozen example, once


def test_shards_checked_where_they_were_made_give_the_merged_store_the_same_validation(rehearsal):
    """The cluster's way (`mashbill slurm generate`): each shard's records checked in its own store with
    `validate --per-record`, merged again, and the merged store validated reading those checks, at volume and with
    the replay teacher's error mix: every verdict and mark (passed, token count, near-duplicate group) is what the
    rehearsal's validation of the merged store wrote, checking every record itself."""
    import subprocess

    from mashbill.factory.store import Store
    from tests.factory.rehearsal_run import MASHBILL

    def run_checked(args) -> str:  # exit 0: no accepted record is rejected, as in the rehearsal's own validation
        proc = subprocess.run([str(a) for a in args], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout

    root, _ = rehearsal
    run = root / "run"
    specs = sorted((run / "specs").glob("*.yaml"))
    shards = sorted((run / "shards").iterdir())
    for spec in specs:
        for shard in shards:
            run_checked([MASHBILL, "validate", spec, "--store", shard, "--per-record", "-q", "--audit-sample", "20"])
    again = root / "merged-again"
    run_checked([MASHBILL, "merge", again, *shards])
    reports = []
    for spec in specs:
        out = run_checked([MASHBILL, "validate", spec, "--store", again, "--audit-sample", "20", "--json"])
        reports.append(json.loads(out)["per_record"])
    assert all(r["checked_here"] == 0 and r["from_kept"] > 0 for r in reports), reports

    def validation(store):
        with Store.open(store, read_only=True) as st:
            return (st.sql("SELECT record_id, code, severity, detail FROM verdicts WHERE stage = 'validate' "
                           "ORDER BY ALL").to_pylist(),
                    st.sql("SELECT record_id, passed, n_tokens, near_group FROM record_validations "
                           "ORDER BY ALL").to_pylist())

    verdicts, marks = validation(run / "merged")
    assert validation(again) == (verdicts, marks)
    assert len(marks) == sum(r["from_kept"] for r in reports) and all(m["passed"] for m in marks)
    assert any(v["code"] == "DUP002" for v in verdicts) and any(m["near_group"] for m in marks)


def test_growth_flags_a_stage_that_grows_faster_than_n_log_n():
    from tests.factory.rehearsal_run import Stage, growth

    def stages(n, quadratic):
        return [Stage("linear", n, cpu_s=n / 1000), Stage("quadratic", n, cpu_s=quadratic)]

    lines, worst = growth({1000: stages(1000, 1.0), 10000: stages(10000, 100.0)})
    assert worst == "quadratic"
    assert "FASTER THAN n log n" in next(ln for ln in lines if "quadratic" in ln)
    assert "FASTER" not in next(ln for ln in lines if "linear" in ln)
