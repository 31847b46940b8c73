"""`validate --per-record` on shard stores, then `validate` on the store they were merged into: each record's own
checks are made where the record was made and kept in its store, the merge carries them, and the validation after
it reads them instead of checking those records again, with the verdicts, marks, token counts and report of a
validation that checked every record itself."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from mashbill.cli import main
from mashbill.factory.store import Store
from vhelpers import write_plan_records

SHARD_A = ("r1", "r3", "r5", "r7")  # r5: rejected at generation; r7 leaks into r6, the eval row in the other shard
SHARD_B = ("r2", "r4", "r6", "r8")  # r4 duplicates r1 of the other shard
WINDOW = ("--max-seq-len", "1536", "--audit-sample", "3", "--all")  # a cut target in every record, an audit sample


def _cli(*args) -> object:
    return CliRunner().invoke(main, [*map(str, args)], catch_exceptions=False)


def _validate(store, *args):
    return _cli("validate", "plan-moe", "--store", store, *WINDOW, *args)


def _stored(root) -> tuple[list, list]:
    with Store.open(root, read_only=True) as store:
        verdicts = store.sql("SELECT record_id, code, severity, detail FROM verdicts WHERE stage = 'validate' "
                             "ORDER BY ALL").to_pylist()
        marks = store.sql("SELECT record_id, passed, n_tokens, near_group FROM record_validations "
                          "ORDER BY record_id").to_pylist()
    return verdicts, marks


def _report(path) -> dict:
    d = json.loads(path.read_text(encoding="utf-8"))
    for key in ("wall_s", "source"):
        d.pop(key)
    for key in ("fast_s", "pieces_tokenized"):  # work done in this process, which kept checks spare
        d["span"].pop(key)
    d["span"]["audit"].pop("wall_s")
    return d


def _shards(tmp_path, *, per_record=("a", "b")) -> dict:
    shards = {}
    for name, ids in (("a", SHARD_A), ("b", SHARD_B)):
        shards[name] = tmp_path / f"shard_{name}"
        write_plan_records(shards[name], only=ids)
        if name in per_record:
            jobs = ("--jobs", "2") if name == "b" else ()  # one shard's checks made in worker processes
            result = _validate(shards[name], "--per-record", *jobs)
            assert result.exit_code == 1, result.output  # its records' own rejects (HR001, SPAN002, ...)
            assert "kept for the validation after the merge, none marked validated" in result.output
            with Store.open(shards[name], read_only=True) as store:
                assert store.sql("SELECT count(*) AS n FROM record_validations").to_pylist()[0]["n"] == 0
                assert store.sql("SELECT count(*) AS n FROM verdicts WHERE stage = 'validate'"
                                 ).to_pylist()[0]["n"] == 0
    return shards


def _merged(tmp_path, shards, name) -> object:
    merged = tmp_path / name
    result = _cli("merge", merged, shards["a"], shards["b"])
    assert result.exit_code == 0, result.output
    return merged


def test_kept_checks_give_the_validation_of_one_that_checked_every_record(tmp_path):
    shards = _shards(tmp_path)
    merged = _merged(tmp_path, shards, "merged")
    here = tmp_path / "here"
    shutil.copytree(merged, here)
    result = _validate(here, "--recheck", "--report", tmp_path / "here.json")
    assert result.exit_code == 1, result.output
    assert "with their kept own checks" not in result.output
    result = _validate(merged, "--report", tmp_path / "merged.json")
    assert result.exit_code == 1, result.output
    assert "validated 8 record(s)" in result.output and "(8 with their kept own checks)" in result.output
    kept, checked = _report(tmp_path / "merged.json"), _report(tmp_path / "here.json")
    own = kept.pop("per_record")
    assert own["from_kept"] == 8 and own["checked_here"] == 0
    assert "per_record" not in checked
    assert kept == checked
    assert _stored(merged) == _stored(here)
    verdicts, marks = _stored(merged)
    assert {"DUP001", "LEAK001", "PII001", "SPAN002", "SCHEMA001", "SCHEMA002", "HR001"} <= {v["code"] for v in
                                                                                          verdicts}
    assert len(marks) == 8 and all(m["n_tokens"] for m in marks if m["record_id"] != "r5")


def test_records_without_kept_checks_are_checked_where_the_merge_is(tmp_path):
    shards = _shards(tmp_path, per_record=("a",))
    merged = _merged(tmp_path, shards, "merged")
    here = tmp_path / "here"
    shutil.copytree(merged, here)
    assert _validate(here, "--recheck", "--report", tmp_path / "here.json").exit_code == 1
    result = _validate(merged, "--report", tmp_path / "merged.json")
    assert "(4 with their kept own checks)" in result.output
    kept = _report(tmp_path / "merged.json")
    assert kept.pop("per_record")["checked_here"] == 4
    assert kept == _report(tmp_path / "here.json") and _stored(merged) == _stored(here)
    # the other shard checked after the merge: merged again, its records' checks join those already there
    assert _validate(shards["b"], "--per-record").exit_code == 1
    assert _cli("merge", merged, shards["a"], shards["b"]).exit_code == 0
    result = _validate(merged, "--no-write")
    assert "(8 with their kept own checks)" in result.output, result.output
    with Store.open(merged, read_only=True) as store:
        assert store.sql("SELECT count(*) AS n FROM record_checks").to_pylist()[0]["n"] == 8  # none twice


def test_kept_checks_are_read_not_made_again_and_only_under_their_profile(tmp_path, monkeypatch):
    """A kept check altered in the merged store shows in the verdicts (so it was read, not remade); under other
    options, or by other code, the kept checks are not read, and the report says why."""
    shards = _shards(tmp_path)
    merged = _merged(tmp_path, shards, "merged")
    with Store.open(merged) as store:
        spec_hash, profile, item = store.sql("SELECT spec_hash, checks_profile, checked FROM record_checks "
                                             "WHERE record_id = 'r2'").to_pylist()[0].values()
        item = json.loads(item)
        hr001 = next(v for v in item["verdicts"] if v["code"] == "HR001")
        hr001["detail"] = "altered where it was kept"
        store.keep_record_checks(spec_hash, profile, [("r2", json.dumps(item))])
    other = tmp_path / "other"
    shutil.copytree(merged, other)
    result = _validate(merged, "--no-write", "--json")
    details = [e["detail"] for e in json.loads(result.output)["examples"]["HR001"]]
    assert "altered where it was kept" in details
    with Store.open(merged) as store:  # r2's check made over under another profile: r2 is checked here
        store.keep_record_checks(spec_hash, "0" * 32, [("r2", json.dumps(item))])
    report = json.loads(_validate(merged, "--no-write", "--json").output)
    assert report["per_record"]["from_kept"] == 7 and report["per_record"]["checked_here"] == 1
    assert any("of 1 record(s) kept in this store under another checks profile" in w for w in report["warnings"])
    assert "altered where it was kept" not in json.dumps(report)
    result = _validate(other, "--no-write", "--no-pii", "--json")
    report = json.loads(result.output)
    assert "per_record" not in report
    assert any("another checks profile" in w for w in report["warnings"])
    assert "altered where it was kept" not in json.dumps(report)
    from mashbill.validators import run_store

    monkeypatch.setattr(run_store, "code_digest", lambda: "another mashbill")
    report = json.loads(_validate(other, "--no-write", "--json").output)
    assert "per_record" not in report and any("another checks profile" in w for w in report["warnings"])


def test_per_record_and_recheck_are_refused_on_a_file(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"prompt": "Hi", "completion": "Hello"}) + "\n")
    for flag in ("--per-record", "--recheck"):
        result = _cli("validate", data, "--format", "prompt-completion", "--no-spans", flag)
        assert result.exit_code == 2 and f"{flag} works on a spec's stored records" in result.output


def test_per_record_with_no_write_keeps_nothing(tmp_path):
    write_plan_records(tmp_path / "s", only=SHARD_A)
    result = _validate(tmp_path / "s", "--per-record", "--no-write")
    assert result.exit_code == 1 and "; 0 kept for the validation after the merge" in result.output, result.output
    with Store.open(tmp_path / "s", read_only=True) as store:
        assert store.record_checks_held(store.sql("SELECT DISTINCT spec_hash FROM records").to_pylist()[0]
                                        ["spec_hash"]) == {}


def test_a_per_record_run_that_died_midway_is_run_again_without_a_check_twice(tmp_path, monkeypatch):
    """Kept checks are committed a batch at a time: a run that dies after its first batch leaves that batch's checks;
    run again, every record has one kept check (the first batch's replaced), and the merged store's validation reads
    them all."""
    from mashbill.specs import find_spec, load_spec
    from mashbill.validators.run_store import spec_options, validate_spec_records

    shard = tmp_path / "shard"
    write_plan_records(shard)
    rs = load_spec(find_spec("plan-moe"))
    real = Store.keep_record_checks
    calls = []

    def dies_after_the_first(self, *args):
        calls.append(args)
        if len(calls) > 1:
            raise KeyboardInterrupt  # as a killed run would stop: the first batch's transaction is committed
        return real(self, *args)

    monkeypatch.setattr(Store, "keep_record_checks", dies_after_the_first)
    with Store.open(shard) as store:
        try:
            validate_spec_records(rs, store, spec_options(rs, audit_sample=3), include_all=True, per_record=True,
                                  batch_size=3)
        except KeyboardInterrupt:
            pass
        assert store.sql("SELECT count(*) AS n FROM record_checks").to_pylist()[0]["n"] == 3
    monkeypatch.setattr(Store, "keep_record_checks", real)
    result = _cli("validate", "plan-moe", "--store", shard, "--all", "--per-record", "--audit-sample", "3")
    assert "8 kept for the validation after the merge" in result.output, result.output
    with Store.open(shard, read_only=True) as store:
        rows = store.sql("SELECT record_id, count(*) AS n FROM record_checks GROUP BY ALL").to_pylist()
    assert len(rows) == 8 and all(r["n"] == 1 for r in rows)
    result = _cli("validate", "plan-moe", "--store", shard, "--all", "--audit-sample", "3", "--no-write")
    assert "(8 with their kept own checks)" in result.output, result.output
