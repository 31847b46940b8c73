"""`mashbill validate SPEC --store DIR` on stored records: verdicts land in the store (stage 'validate'), a rerun
replaces them, and the routing rules, schema, dedup, leakage and span checks all report."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mashbill.cli import main
from mashbill.factory.records import Record, SpecRef, Verdict
from mashbill.factory.store import Store
from mashbill.specs import find_spec, load_spec, render_prompt
from vhelpers import CALC, GENERAL, assert_known_codes, report_and_verdicts, write_plan_records

@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    write_plan_records(root)
    return root


def _validate(store_dir, *args):
    return CliRunner().invoke(main, ["validate", "plan-moe", "--store", str(store_dir), *map(str, args)],
                              catch_exceptions=False)


def _stored(store_dir):
    with Store.open(store_dir, read_only=True) as store:
        rows = store.sql("SELECT record_id, code FROM verdicts WHERE stage = 'validate' ORDER BY 1, 2").to_pylist()
        events = store.sql("SELECT validation_id, counts AS detail FROM validation_runs").to_pylist()
        covered = store.sql("SELECT count(DISTINCT record_id) AS n FROM record_validations").to_pylist()[0]["n"]
        accepted = store.sql("SELECT count(*) AS n FROM records WHERE status = 'accepted'").to_pylist()[0]["n"]
        assert covered == (accepted if events else 0)  # every validated record is marked covered
        other = store.sql("SELECT count(*) AS n FROM verdicts WHERE stage = 'generate'").to_pylist()[0]["n"]
    return [(r["record_id"], r["code"]) for r in rows], events, other


def test_spec_records(store_dir, tmp_path):
    out = tmp_path / "r.json"
    res = _validate(store_dir, "--max-seq-len", 1536, "--report", out)
    assert res.exit_code == 1, res.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["records"] == 7  # accepted records only
    got, events, generate_verdicts = _stored(store_dir)
    codes = {}
    for rid, code in got:
        codes.setdefault(rid, set()).add(code)
    assert all("SPAN002" in codes[r] for r in ("r1", "r2", "r3", "r4", "r6", "r7", "r8"))
    assert "HR001" in codes["r2"] and "HR001" not in codes["r1"]
    assert "HR003" in codes["r3"]
    assert "DUP001" in codes["r4"]
    assert "LEAK001" in codes["r7"] and "LEAK001" not in codes["r6"]
    assert "SCHEMA001" in codes["r8"] and "PII001" in codes["r8"]
    assert "r5" not in codes and generate_verdicts == 1
    assert len(events) == 1 and json.loads(events[0]["detail"])["SPAN002"] == 7
    assert report["rules"]["rule_set"] == "moe-routing@8"
    assert_known_codes(report)

    # a rerun with the spec's own window replaces the earlier verdicts instead of adding to them
    res = _validate(store_dir, "--report", out)
    assert res.exit_code == 1, res.output  # rule findings remain
    got2, events, _ = _stored(store_dir)
    assert not any(code.startswith("SPAN") for _, code in got2)
    assert {c for _, c in got} - {"SPAN002", "SPAN003"} == {c for _, c in got2}
    assert len(got2) == len([g for g in got if not g[1].startswith("SPAN")])
    assert len(events) == 2

    # --all includes the record rejected at generation (its output did not parse)
    res = _validate(store_dir, "--all", "--no-write", "--report", out)
    assert res.exit_code == 1, res.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["records"] == 8 and report["counts"]["SCHEMA002"] == 1
    assert _stored(store_dir)[0] == got2  # --no-write left the store alone


def test_unknown_spec_hash(tmp_path):
    with Store.open(tmp_path / "s"):
        pass
    res = CliRunner().invoke(main, ["validate", "plan-moe", "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and "no accepted records of plan-moe@8" in res.output


def test_a_store_whose_records_were_all_rejected_says_so_not_other_hashes(tmp_path):
    """Case 13: every record of the spec was rejected at generation, under the spec's own hash."""
    rs = load_spec(find_spec("plan-moe"))
    ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
    with Store.open(tmp_path / "s") as store:
        run = store.begin_run(spec_name=rs.spec.name, spec_version=rs.spec.version, spec_hash=rs.hash, kind="plan",
                              backend="test", model="m", model_sha256=None, model_info=None, sampling={})
        prompt = render_prompt(rs, {"query": "What is 17% of 2840?"}, "x")
        store.write_batch(run, [Record("x", "plan", {"query": "What is 17% of 2840?"}, None, "{", ref, "rejected",
                                       prompt.training_messages, prompt.meta())],
                          {"x": [Verdict("PARSE001", "reject", "not JSON")]}, [])
    res = CliRunner().invoke(main, ["validate", "plan-moe", "--store", str(tmp_path / "s")])
    assert res.exit_code == 2 and f"no accepted records of {rs.ref}" in res.output
    assert "all rejected (1)" in res.output and "--all" in res.output
    assert "other content hashes" not in res.output


def test_the_record_checker_for_the_factory():
    from mashbill.factory.codes import CODES
    from mashbill.validators.checker import RecordChecker
    from mashbill.validators.plans.ruleset import load_ruleset

    rs = load_spec(find_spec("plan-moe"))
    checks = [RecordChecker.for_spec(rs).factory_check()]
    ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
    prompt = render_prompt(rs, {"query": "What is 17% of 2840?"}, "x")
    rec = Record("x", "plan", {"query": "What is 17% of 2840?"}, GENERAL, "", ref, "accepted",
                 prompt.training_messages, prompt.meta())
    verdicts = [v for check in checks for v in check(rec)]
    assert [v.code for v in verdicts] == ["HR001"] and verdicts[0].stage == "generate"
    ok = Record("y", "plan", {"query": "What is 17% of 2840?"}, CALC, "", ref, "accepted", prompt.training_messages,
                prompt.meta())
    assert [v for check in checks for v in check(ok)] == []
    rule_codes = {r.code for r in load_ruleset(rs.file_paths["rules"]).rules}
    assert rule_codes <= set(CODES) and all(CODES[c].source == "rules" for c in rule_codes)


def _validated_in_batches(root, batch: int, jobs: int = 1) -> tuple[dict, list]:
    """The plan-moe records of the store at `root`, every status, validated in batches of `batch` records by `jobs`
    processes under a 1,536-token window (a cut in every batch) with an audit sample of 3 (fewer than the examples:
    the audit picks by position): ``report_and_verdicts`` of the report."""
    from mashbill.specs.model import TrainerProfile
    from mashbill.validators.run_store import spec_options, validate_spec_records

    rs = load_spec(find_spec("plan-moe"))
    tp = rs.spec.trainer_profile
    with Store.open(root, read_only=True) as store:
        opts = spec_options(rs, audit_sample=3)
        opts.profile = TrainerProfile(tokenizer=tp.tokenizer, max_seq_len=1536, chat_template=tp.chat_template,
                                      truncation_side=tp.truncation_side, loss=tp.loss)
        rep = validate_spec_records(rs, store, opts, include_all=True, write=False, batch_size=batch, jobs=jobs)
    return report_and_verdicts(rep)


def test_a_validation_in_batches_gives_the_verdicts_and_report_of_one_pass(store_dir):
    """The store is read a batch at a time; batches of 1-3 records (the eval row, the PII row, a duplicate and a
    leak in other batches than the rows they meet) give what one batch of all gives: every verdict in order, every
    report section and count, the audit's sample drawn from every example."""
    whole, verdicts = _validated_in_batches(store_dir, 10_000)
    for batch in (1, 2, 3):
        assert _validated_in_batches(store_dir, batch) == (whole, verdicts), batch
    codes = {c for _, vs in verdicts for c, _ in vs}
    assert {"DUP001", "LEAK001", "PII001", "SPAN002", "SCHEMA001", "SCHEMA002", "HR001"} <= codes
    assert whole["eval_split"] == 1 and whole["records"] == 8 and whole["span"]["audit"]["audited"] == 3
    assert [k for k, _ in verdicts][-1] == "r6"  # the eval row comes after the train rows, as the checks see them


def test_a_store_written_in_another_order_gives_the_same_validation(store_dir, tmp_path):
    """The store gives its batches in the order it keeps the records: the same records written in another order
    (the duplicate and the leak met before the rows they meet) give the same verdicts, report and audit sample,
    the keys in id order (train rows, then the eval row), in batches of 1, 3 or all, in one process or two."""
    shuffled = tmp_path / "shuffled"
    write_plan_records(shuffled, order=["r7", "r4", "r8", "r2", "r6", "r1", "r5", "r3"])

    def run(root, batch, jobs=1):
        d, verdicts = _validated_in_batches(root, batch, jobs)
        d.pop("source")
        d["span"].pop("pieces_tokenized")  # a worker process keeps its own piece cache
        return d, verdicts

    whole = run(store_dir, 10_000)
    assert [k for k, _ in whole[1]] == ["r1", "r2", "r3", "r4", "r5", "r7", "r8", "r6"]
    for batch in (1, 3, 10_000):
        assert run(shuffled, batch) == whole, batch
    assert run(shuffled, 3, jobs=2) == whole


def test_worker_processes_give_the_verdicts_report_and_stored_counts_of_one_process(store_dir, tmp_path):
    """--jobs: the records' rules, token spans and personal data checked in two worker processes (a part of one or
    two records each, so both workers check some and their parts are joined in order) give every verdict in order,
    every report section and count, and the same stored verdicts, marks and token counts as one process. Only how
    many pieces were tokenized may differ: each worker keeps its own cache."""
    import shutil

    def run(batch, jobs):
        d, verdicts = _validated_in_batches(store_dir, batch, jobs)
        assert d["span"].pop("pieces_tokenized") > 0
        return d, verdicts

    whole = run(10_000, 1)
    assert run(10_000, 2) == whole
    assert run(3, 2) == whole
    assert {"DUP001", "LEAK001", "PII001", "SPAN002", "SCHEMA001", "SCHEMA002", "HR001"} <= {
        c for _, vs in whole[1] for c, _ in vs}

    def stored(jobs):
        copy = tmp_path / f"jobs{jobs}"
        shutil.copytree(store_dir, copy)
        with Store.open(copy, read_only=True) as store:
            before = [r["validation_id"] for r in store.sql("SELECT validation_id FROM validation_runs").to_pylist()]
        result = _validate(copy, "--all", "--jobs", jobs, "--audit-sample", 3, "-q")
        assert result.exit_code == 1, result.output  # rejects found, as in one process
        with Store.open(copy, read_only=True) as store:
            verdicts = store.sql("SELECT record_id, code, severity, detail FROM verdicts WHERE stage = 'validate' "
                                 "ORDER BY ALL").to_pylist()
            marks = [m for m in store.sql("SELECT validation_id, record_id, passed, n_tokens, near_group "
                                          "FROM record_validations ORDER BY record_id").to_pylist()
                     if m.pop("validation_id") not in before]
        return verdicts, marks

    one, two = stored(1), stored(2)
    assert two == one and len(one[1]) == 8 and all(m["n_tokens"] for m in one[1] if m["record_id"] != "r5")


def test_jobs_are_refused_on_a_file_and_a_worker_sees_a_changed_spec(tmp_path):
    from mashbill.validators import run_store as run_mod
    from mashbill.validators.errors import ValidationInputError

    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"prompt": "Hi", "completion": "Hello"}) + "\n")
    result = CliRunner().invoke(main, ["validate", str(data), "--format", "prompt-completion", "--jobs", "2",
                                       "--no-spans"])
    assert result.exit_code == 2 and "--jobs works on a spec's stored records" in result.output
    result = CliRunner().invoke(main, ["validate", "plan-moe", "--jobs", "0"])
    assert result.exit_code == 2 and "--jobs" in result.output
    # a worker loads the spec itself: one whose content hash moved since the validation began is refused, in words
    rs = load_spec(find_spec("plan-moe"))
    with pytest.raises(ValidationInputError, match="changed during the validation"):
        run_mod._worker_check(str(rs.path), "0" * 64, run_mod.spec_options(rs), [])
    assert "0" * 64 not in run_mod._WORKER


def test_a_worker_killed_mid_validation_ends_it_in_one_line_with_nothing_written(tmp_path):
    """A worker process of --jobs killed with SIGKILL (as the kernel's OOM killer would): the command exits 2 with
    a last line that says so, it does not hang, and the store holds no validation run (nothing half-written)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    rs = load_spec(find_spec("plan-moe"))
    ref = SpecRef(rs.spec.name, rs.spec.version, rs.hash)
    prompt = render_prompt(rs, {"query": "What is 17% of 2840?", "lang": "en"}, "r")
    records = [Record(f"r{i:05d}", "plan", {"query": f"What is {i}% of {2840 + i}?", "lang": "en"}, CALC,
                      json.dumps(CALC), ref, "accepted", prompt.training_messages, {**prompt.meta(), "lang": "en"})
               for i in range(4000)]  # enough work that the workers are still checking when one is killed
    with Store.open(tmp_path / "store") as store:
        run = store.begin_run(spec_name=rs.spec.name, spec_version=rs.spec.version, spec_hash=rs.hash, kind="plan",
                              backend="test", model="test", model_sha256=None, model_info=None, sampling={})
        store.write_batch(run, records, {}, [])
    proc = subprocess.Popen([str(Path(sys.executable).with_name("mashbill")), "validate", "plan-moe", "--store",
                             str(tmp_path / "store"), "--jobs", "2", "-q"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def workers() -> list[int]:
        try:
            kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        except OSError:
            return []
        out = []
        for k in kids:
            try:
                cmd = Path(f"/proc/{k}/cmdline").read_bytes()
            except OSError:
                continue
            if b"spawn_main" in cmd and b"resource_tracker" not in cmd:
                out.append(int(k))
        return out

    while proc.poll() is None and not workers():  # wait for a worker to exist, however slow the machine
        time.sleep(0.05)
    found = workers()
    assert found, "the command ended before any worker started"
    os.kill(found[0], signal.SIGKILL)
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    assert proc.returncode == 2, (out, err)
    # the last line is the command's; Python 3.11's executor thread may print its own traceback before it when the
    # kill lands while it cleans up (bench/RESULTS.md)
    assert "a worker process of --jobs 2 ended without a result" in err.strip().splitlines()[-1]
    with Store.open(tmp_path / "store", read_only=True) as store:
        assert store.sql("SELECT count(*) AS n FROM validation_runs").to_pylist()[0]["n"] == 0
