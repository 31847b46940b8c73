"""Repair with the verdict (factory.generate.repair), through `mashbill generate` against the fault server: the conversation
goes on with the verdicts stated, every attempt is stored, the record holds the last one, the guard stops a teacher
that never fixes a code (exit 3), and a bad repair section stops `spec check` with file, line and field."""

from __future__ import annotations

import json

import yaml

from teacher_helpers import lock_spec, run_cli, sql, tag

REPAIR_MARK = "was rejected (repair"
REPAIR_MARK_DE = "wurde abgelehnt (Korrektur"


def _with_repair(path, repair: dict):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["repair"] = repair
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return lock_spec(path)


def _repair_turn(key: str) -> int | None:
    """The repair number a request asks for (None for a first answer)."""
    for mark in (REPAIR_MARK, REPAIR_MARK_DE):
        if mark in key:
            return int(key.split(mark, 1)[1].split()[0])
    return None


def test_a_rejected_record_is_repaired_with_its_verdict_and_every_attempt_is_stored(write_spec, fault_server, tmp_path):
    # even seeds answer against the schema first, then right once told; odd seeds are right at once
    def schedule(key, attempt):
        t = tag(key)
        return "schema" if t is not None and t % 2 == 0 and _repair_turn(key) is None else None

    server = fault_server(schedule=schedule)
    seeds = [{"query": f"q{i:03d} What is {i}% of 2840?", "lang": "de" if i == 2 else "en"} for i in range(6)]
    spec = _with_repair(write_spec(seeds=seeds, runtime={"concurrency": 1, "batch_size": 2}),
                        {"max_attempts": 2, "codes": ["SCHEMA001"]})
    store = tmp_path / "store"
    out = run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress", "--json", check=True)
    summary = json.loads(out.stdout)
    assert summary["accepted"] == 6 and summary["rejected"] == 0
    # the repair turns the server saw state the code, its meaning and its detail, in the request's language
    repairs = [k for k, _, _ in server.log if _repair_turn(k) is not None]
    assert len(repairs) == 3
    assert all("- SCHEMA001 (" in k for k in repairs)
    assert sum(REPAIR_MARK_DE in k for k in repairs) == 1 and sum("does not match the spec's output schema" in k
                                                                   for k in repairs) == 2
    # every attempt stored: first answers once each, repairs only for the even seeds, nothing overwritten
    rows = sql(store, "SELECT r.input, a.attempt, a.repairs, a.status, a.feedback IS NULL, a.verdicts "
                      "FROM record_attempts a JOIN records r USING (record_id) ORDER BY r.input, a.attempt")
    assert len(rows) == 9
    for inp, attempt, repairs_, status, no_feedback, verdicts in rows:
        even = tag(json.loads(inp)["query"]) % 2 == 0
        if attempt == 1:
            assert repairs_ is None and no_feedback and status == ("rejected" if even else "accepted")
            assert ("SCHEMA001" in verdicts) == even
        else:
            assert even and attempt == 2 and repairs_ == 1 and not no_feedback and status == "accepted"
    # the record that counts is the last attempt, and it is what the record row holds
    assert sql(store, "SELECT count(*) FROM records r JOIN record_attempts a USING (record_id) WHERE a.attempt = "
                      "(SELECT max(attempt) FROM record_attempts b WHERE b.record_id = r.record_id) "
                      "AND a.raw = r.raw AND a.status = r.status")[0][0] == 6
    # teacher calls carry their turn; accounting: repair success per code and teacher cost per accepted record
    assert sql(store, "SELECT turn, count(*) FROM teacher_calls WHERE record_id IN (SELECT record_id FROM records) "
                      "GROUP BY turn ORDER BY turn") == [(1, 6), (2, 3)]
    [(stats,)] = sql(store, "SELECT stats FROM runs")
    stats = json.loads(stats)
    assert stats["repair"] == {"turns": 3, "repaired": 3,
                               "by_code": {"SCHEMA001": {"tried": 3, "fixed": 3, "rate": 1.0}}}
    assert stats["teacher_s_per_accepted"] > 0 and stats["tokens_per_accepted"] >= 0
    assert summary["repair"] == stats["repair"] and summary["teacher_s_per_accepted"] > 0  # generate --json too


def test_a_restart_repair_asks_the_request_afresh_with_the_verdicts_and_without_the_rejected_answer(
        write_spec, fault_server, tmp_path):
    server = fault_server(schedule=lambda key, attempt: "schema" if tag(key) is not None and _repair_turn(key) is None
                          else None)  # seeds answer against the schema first, right when asked afresh
    seeds = [{"query": f"q{i:03d} What is {i}% of 2840?", "lang": "de" if i == 1 else "en"} for i in range(3)]
    spec = _with_repair(write_spec(seeds=seeds, runtime={"concurrency": 1, "batch_size": 1}),
                        {"max_attempts": 1, "codes": ["SCHEMA001"], "mode": "restart"})
    store = tmp_path / "store"
    run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress", check=True)
    asked = [(k, m) for (k, _, _), m in zip(server.log, server.messages) if tag(k) is not None]  # no probes
    first = {tag(k): m for k, m in asked if _repair_turn(k) is None}
    repairs = [(k, m) for k, m in asked if _repair_turn(k) is not None]
    assert len(first) == 3 and len(repairs) == 3
    for key, msgs in repairs:
        asked = first[tag(key)]
        # the same conversation as the first ask, no answer in it, and the last user turn is the request with the
        # verdicts after it
        assert [m["role"] for m in msgs] == [m["role"] for m in asked] and "assistant" not in {m["role"] for m in msgs}
        assert msgs[:-1] == asked[:-1] and msgs[-1]["content"].startswith(asked[-1]["content"] + "\n\n")
        said = msgs[-1]["content"][len(asked[-1]["content"]):]
        # the verdict in plain words, its code left out (a small teacher asked afresh writes it as a task)
        assert "SCHEMA001" not in said and ("does not match the spec's output schema" in said
                                            or "passt nicht zum Ausgabeschema" in said), said
        assert ("Eine frühere Antwort auf diese Anfrage wurde abgelehnt" in said) == (tag(key) == 1)
    # stored as in a conversation's repair: the attempt it repairs, the words it was asked with
    rows = sql(store, "SELECT attempt, repairs, status, feedback FROM record_attempts ORDER BY record_id, attempt")
    assert [(a, r, s) for a, r, s, _ in rows] == [(1, None, "rejected"), (2, 1, "accepted")] * 3
    assert all(f is None if a == 1 else "Ausgabeschema" in f or "output schema" in f for a, _, _, f in rows)


def test_a_restart_mode_changes_the_spec_hash_and_the_default_mode_does_not(write_spec, tmp_path):
    from mashbill.specs import load_spec

    spec = write_spec()
    h_plain = load_spec(_with_repair(spec, {"max_attempts": 1, "codes": ["SCHEMA001"]})).hash
    # written out at its default: a spec from before the field keeps its hash
    h_continue = load_spec(_with_repair(spec, {"max_attempts": 1, "codes": ["SCHEMA001"], "mode": "continue"})).hash
    h_restart = load_spec(_with_repair(spec, {"max_attempts": 1, "codes": ["SCHEMA001"], "mode": "restart"})).hash
    assert h_continue == h_plain != h_restart


def test_a_teacher_that_never_fixes_a_code_stops_being_asked(write_spec, fault_server, tmp_path):
    server = fault_server(schedule=lambda key, attempt: "schema" if tag(key) is not None or _repair_turn(key) else None)
    spec = _with_repair(write_spec(n=30, runtime={"concurrency": 1, "batch_size": 1}),
                        {"max_attempts": 3, "codes": ["SCHEMA001"], "guard": {"window": 4, "min_fix_rate": 0.5}})
    store = tmp_path / "store"
    proc = run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress")
    assert proc.returncode == 3, proc.stderr
    assert "repair guard" in proc.stderr and "SCHEMA001" in proc.stderr
    # the guard tripped on the 4th unfixed repair: no repair was asked after it, and the run stopped there
    assert len([k for k, _, _ in server.log if _repair_turn(k)]) == 4
    [(detail,)] = sql(store, "SELECT detail FROM events WHERE kind = 'repair_guard'")
    assert json.loads(detail)["code"] == "SCHEMA001" and json.loads(detail)["fix_rate"] == 0
    assert sql(store, "SELECT status FROM runs") == [("aborted",)]
    # what was asked is stored: every attempt of the records the run finished
    asked = len([k for k, _, _ in server.log if tag(k) is not None or _repair_turn(k)])
    assert sql(store, "SELECT count(*) FROM record_attempts")[0][0] == asked


def test_skip_stops_repairing_the_code_and_the_run_goes_on(write_spec, fault_server, tmp_path):
    server = fault_server(schedule=lambda key, attempt: "schema" if tag(key) is not None or _repair_turn(key) else None)
    spec = _with_repair(write_spec(n=12, runtime={"concurrency": 1, "batch_size": 3}),
                        {"max_attempts": 1, "codes": ["SCHEMA001"],
                         "guard": {"window": 3, "min_fix_rate": 0.5, "action": "skip"}})
    store = tmp_path / "store"
    proc = run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress", check=True)
    assert "completed" in proc.stdout
    assert len([k for k, _, _ in server.log if _repair_turn(k)]) == 3
    assert sql(store, "SELECT count(*), count(*) FILTER (status = 'rejected') FROM records")[0] == (12, 12)


def test_a_bad_repair_section_stops_spec_check_with_file_line_and_field(write_spec, tmp_path):
    spec = write_spec()
    for repair, field, words in (({"max_attempts": 2, "codes": ["NOPE123"]}, "repair.codes.0", "unknown code"),
                                 ({"max_attempts": 2, "codes": ["PLAN003", "DUP001"]}, "repair.codes.1",
                                  "not repairable"),
                                 ({"max_attempts": 2, "codes": ["HR005"]}, "repair.codes.0", "not a reject"),
                                 ({"max_attempts": 0, "codes": ["PLAN003"]}, "repair.max_attempts", "greater than"),
                                 ({"max_attempts": 1, "codes": ["PLAN003"], "mode": "again"}, "repair.mode",
                                  "'continue' or 'restart'")):
        _with_repair(spec, repair)
        proc = run_cli("spec", "check", spec)
        assert proc.returncode == 1, proc.stdout
        line = next(x for x in proc.stdout.splitlines() if x.startswith("FAIL"))
        assert f"{spec}:" in line and f"field '{field}'" in line and words in line, line
        lineno = int(line.split(f"{spec}:", 1)[1].split(":")[0])
        key = field.split(".")[1]
        text = spec.read_text(encoding="utf-8").splitlines()
        assert key in text[lineno - 1] or text[lineno - 1].strip().startswith("-"), (lineno, text[lineno - 1])
        # generate refuses it too, before any run exists (exit 2, one line)
        gen = run_cli("generate", spec, "--store", tmp_path / "s", "--base-url", "http://127.0.0.1:9/v1",
                      "--no-progress")
        assert gen.returncode == 2 and field in gen.stderr and "Traceback" not in gen.stderr


def test_merged_shards_keep_every_attempt_once(write_spec, fault_server, tmp_path):
    from test_shards_merge import shards

    server = fault_server(schedule=lambda key, attempt: "schema" if tag(key) is not None and tag(key) % 2 == 0 else None)
    spec = _with_repair(write_spec(n=12), {"max_attempts": 1, "codes": ["SCHEMA001"]})
    full = tmp_path / "full"
    run_cli("generate", spec, "--store", full, "--base-url", server.url, "--no-progress", check=True)
    parts = shards(spec, tmp_path, server.url, n=2)
    out = tmp_path / "merged"
    for _ in range(2):  # a second merge adds nothing
        run_cli("merge", out, *parts, check=True)
    query = "SELECT record_id, attempt, sample, status, raw, feedback FROM record_attempts ORDER BY 1, 2"
    assert sql(out, query) == sql(full, query) and len(sql(full, query)) == 12 + 6


def test_a_record_is_repaired_only_when_every_reject_is_a_named_code():
    """A reject the section leaves out keeps the record rejected whatever a repair fixes: it is not asked again."""
    from types import SimpleNamespace

    from mashbill.factory.generate.chains import Chains
    from mashbill.specs.model import Repair

    chains = Chains(SimpleNamespace(pick=None, repair=Repair(max_attempts=1, codes=["PLAN003", "HR001"])),
                    store=None, run_id="r", teacher=None, schema=None, acct=None, to_record=None)

    def row(*codes, severity="reject"):
        return {"attempt": 1, "sample": 0, "feedback": None, "status": "rejected", "raw": "[]", "output": [],
                "verdicts": [{"code": c, "severity": severity, "detail": "d"} for c in codes]}

    assert chains.step([row("PLAN003")], "en")[0] == "repair"
    assert chains.step([row("PLAN003", "HR001")], "en")[0] == "repair"
    assert chains.step([row("PLAN003", "HR006")], "en")[0] == "final"  # HR006 is not named
    assert chains.step([{**row("PLAN003"), "verdicts": row("PLAN003")["verdicts"] + row("HR006", severity="flag")[
        "verdicts"]}], "en")[0] == "repair"  # a flag is not a reject
    assert chains.step([row("PLAN003"), {**row("PLAN003"), "attempt": 2, "feedback": "f"}], "en")[0] == "final"
