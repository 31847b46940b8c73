"""`mashbill validate` on files: the acceptance check from issue 3, and bad input."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from mashbill.cli import main
from mashbill.validators.data.synthetic import corpus
from tests.validators.vhelpers import assert_known_codes, vocab


@pytest.fixture(scope="module")
def reference_like(tmp_path_factory):
    """A messages JSONL shaped like the reference's failed run: ~2,500-token system prompts (5 framings, varied
    category blocks), short queries, JSON plan targets."""
    path = tmp_path_factory.mktemp("ref") / "planner_chat.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for r in corpus(40, seed=11, correction_share=0.0):
            f.write(json.dumps({"messages": list(r.messages)}, ensure_ascii=False) + "\n")
    return path


def _run(*args):
    return CliRunner().invoke(main, ["validate", *map(str, args)], catch_exceptions=False)


def test_reference_failure_is_caught(reference_like, tmp_path):
    out = tmp_path / "report.json"
    res = _run(reference_like, "--format", "messages", "--tokenizer", vocab("qwen2"), "--max-seq-len", 1536,
               "--report", out, "--no-expectations")
    assert res.exit_code == 1, res.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["records"] == 40
    assert report["counts"]["SPAN002"] == 40 and report["records_by_code"]["SPAN002"] == 40
    assert report["counts"]["SPAN003"] == 40  # the prompt alone exceeds the window
    assert report["span"]["share_cut"] == 1.0 and report["span"]["tokens"]["p50"] > 2400
    assert report["span"]["audit"]["mismatches"] == 0
    assert "generation" in report["warnings"][0]  # qwen2's own template has no generation markers
    assert "SPAN002" in res.output and "FAIL: 40 of 40" in res.output


def test_reference_passes_with_a_larger_window(reference_like, tmp_path):
    out = tmp_path / "report.json"
    res = _run(reference_like, "--format", "messages", "--tokenizer", vocab("qwen2"), "--chat-template", "chatml",
               "--max-seq-len", 4096, "--report", out, "--no-rules")  # synthetic plans: the rules would reject
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["records"] == 40 and report["ok"] and report["rejected_records"] == 0
    assert not any(c.startswith("SPAN") for c in report["counts"])
    assert report["span"]["margin"]["min"] > 0 and report["warnings"] == []
    assert report["expectations"]["success"] is True


def test_bad_rows_are_reported_and_valid_rows_still_checked(tmp_path):
    p = tmp_path / "mixed.jsonl"
    good = {"messages": [{"role": "user", "content": "Mail an a.b@example.com: wie viel ist 2+2?"},
                         {"role": "assistant", "content": "4"}]}
    with open(p, "wb") as f:
        f.write(json.dumps(good).encode() + b"\n")
        f.write(json.dumps({"prompt": "a", "completion": "b"}).encode() + b"\n")
        f.write(b"not json\n")
        f.write(b'{"messages": "\xff"}\n')
        f.write(json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode() + b"\n")
    out = tmp_path / "r.json"
    res = _run(p, "--format", "messages", "--tokenizer", "embedded:smollm2-135m-instruct", "--max-seq-len", 2048,
               "--report", out, "--no-expectations")
    assert res.exit_code == 1
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["records"] == 5
    assert report["counts"]["FMT001"] == 2 and report["counts"]["FMT002"] == 1 and report["counts"]["FMT003"] == 1
    assert report["counts"]["PII001"] == 1  # the valid row was still checked
    assert_known_codes(report)
    assert report["span"]["examples"] == 1
    assert report["problems"][0].startswith("mixed.jsonl:2:")
    assert any(p.startswith("mixed.jsonl:4: not UTF-8") for p in report["problems"])


@pytest.mark.parametrize("args,message", [
    (["--tokenizer", "TOKDIR", "--max-seq-len", "64"], "not a tokenizer folder"),
    (["--tokenizer", "NOTGGUF", "--max-seq-len", "64"], "not a GGUF file"),
    (["--tokenizer", "/no/such/tokenizer.gguf", "--max-seq-len", "64"], "tokenizer not found"),
    (["--tokenizer", "LLAMA3", "--max-seq-len", "64"], "has no chat template"),
    (["--max-seq-len", "64"], "needs --tokenizer"),
])
def test_user_errors_are_one_line(tmp_path, args, message):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "q"},
                                             {"role": "assistant", "content": "a"}]}) + "\n", encoding="utf-8")
    (tmp_path / "tokdir").mkdir()
    (tmp_path / "x.gguf").write_text("hello", encoding="utf-8")
    args = [{"TOKDIR": str(tmp_path / "tokdir"), "NOTGGUF": str(tmp_path / "x.gguf"),
             "LLAMA3": str(vocab("llama-bpe"))}.get(a, a) for a in args]
    res = CliRunner().invoke(main, ["validate", str(data), "--format", "messages", *args])
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output
    assert len([line for line in res.output.splitlines() if line.startswith("error:")]) == 1


def test_empty_file(tmp_path):
    (tmp_path / "e.jsonl").write_bytes(b"")
    res = CliRunner().invoke(main, ["validate", str(tmp_path / "e.jsonl"), "--format", "messages", "--no-spans"])
    assert res.exit_code == 2 and "e.jsonl: the file is empty" in res.output


def test_prompt_completion_and_preference_files(tmp_path):
    pc = tmp_path / "pc.jsonl"
    pc.write_text("\n".join(json.dumps(r) for r in [
        {"prompt": [{"role": "user", "content": "Erkläre DNS."}],
         "completion": [{"role": "assistant", "content": "DNS löst Namen auf. " * 40}]},
        {"prompt": "Translate to German: good morning\n", "completion": "Guten Morgen"},
    ]) + "\n", encoding="utf-8")
    out = tmp_path / "r.json"
    res = _run(pc, "--format", "prompt-completion", "--tokenizer", "embedded:smollm2-135m-instruct",
               "--max-seq-len", 64, "--report", out, "--no-expectations")
    report = json.loads(out.read_text(encoding="utf-8"))
    assert res.exit_code == 1 and report["span"]["loss"] == "completion-only"
    assert report["records_by_code"] == {"SPAN001": 1}
    pref = tmp_path / "pref.jsonl"
    pref.write_text(json.dumps({"prompt": [{"role": "user", "content": "Hi"}],
                                "chosen": [{"role": "assistant", "content": "Hello! " * 30}],
                                "rejected": [{"role": "assistant", "content": "Go away."}]}) + "\n", encoding="utf-8")
    res = _run(pref, "--format", "preference", "--tokenizer", "embedded:smollm2-135m-instruct",
               "--max-seq-len", 48, "--report", out, "--no-expectations")
    report = json.loads(out.read_text(encoding="utf-8"))
    assert res.exit_code == 1 and report["span"]["examples"] == 2
    assert "[chosen]" in report["examples"]["SPAN001"][0]["detail"]
    assert "SPAN001" in report["counts"] and report["counts"]["SPAN001"] == 1  # only the long chosen reply is cut


def test_profile_from_spec_holdout_and_eval_split(tmp_path):
    rows = [("What is 17% of 2840?", '[{"task":"17% of 2840","category":"precision_tools"}]'),
            ("Erkläre mir den Unterschied zwischen TCP und UDP in zwei Sätzen.", "[]"),
            ("Wie viele Tage liegen zwischen dem 2024-03-01 und dem 2024-12-24?", "[]")]
    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": q},
                                                       {"role": "assistant", "content": a}]})
                              for q, a in rows) + "\n", encoding="utf-8")
    ev = tmp_path / "eval.jsonl"
    ev.write_text(json.dumps({"messages": [{"role": "user", "content": rows[1][0]},
                                           {"role": "assistant", "content": "[]"}]}) + "\n", encoding="utf-8")
    hold = tmp_path / "bench.txt"
    hold.write_text("What is 17 % of 2840 ?\n", encoding="utf-8")
    out = tmp_path / "r.json"
    res = _run(data, "--format", "messages", "--spec", "plan-moe", "--holdout", hold, "--eval", ev, "--report", out,
               "--no-expectations")
    report = json.loads(out.read_text(encoding="utf-8"))
    assert res.exit_code == 1
    assert report["span"]["tokenizer"] == "embedded:smollm2-135m-instruct" and report["span"]["max_seq_len"] == 4096
    assert report["records_by_code"]["LEAK001"] == 2
    leaks = {e["record"]: e["detail"] for e in report["examples"]["LEAK001"]}
    assert "bench.txt:1" in leaks["train.jsonl:1"] and "eval:eval.jsonl:1" in leaks["train.jsonl:2"]
    assert report["leakage"]["holdout_items"] == 2


def test_spec_mode_reads_mashbill_store_and_prints_json(cli_store, tmp_path):
    from tests.cli.conftest import invoke

    store = cli_store.copy(tmp_path / "store")
    res = invoke("validate", cli_store.spec, "--no-spans", "--no-expectations", "--json",
                 env={"MASHBILL_STORE": str(store)})
    report = json.loads(res.stdout)
    assert report["records"] == 25  # the accepted records of the store MASHBILL_STORE names
    assert res.exit_code == (1 if report["rejected_records"] else 0), res.output
    nowhere = invoke("validate", cli_store.spec, "--no-spans", env={"MASHBILL_STORE": str(tmp_path / "none")})
    assert nowhere.exit_code == 2 and str(tmp_path / "none") in nowhere.stderr, nowhere.output


def test_spec_mode_reads_no_seed_row(tmp_path, monkeypatch):
    """Stored records are found by the spec's hash, which hashes the seed files without reading them; a 500,000-row
    seed file was 2.5% of a rehearsal's validation (issue 29), and every --jobs worker loads the spec again."""
    import yaml

    from mashbill.factory.store import Store
    from mashbill.specs import load_spec, loader
    from tests.cli.conftest import invoke
    from tests.curation.conftest import SEEDS, SHARED, add_records, spec_yaml

    shutil.copytree(SHARED, tmp_path / "lib" / "shared")
    data = spec_yaml("seed-file")
    data["seeds"] = [{"path": "seeds.jsonl"}]
    spec = tmp_path / "lib" / "plan" / "seed-file@1.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (spec.parent / "seeds.jsonl").write_text(
        "".join(json.dumps({"query": q, "lang": lang, "type": t}) + "\n" for q, lang, t, _ in SEEDS), encoding="utf-8")
    with Store.open(tmp_path / "store") as store:
        add_records(store, load_spec(spec))

    def refuse(*args, **kwargs):
        raise AssertionError("validate read the seed rows")

    monkeypatch.setattr(loader, "read_seed_rows", refuse)
    res = invoke("validate", spec, "--no-spans", "--no-expectations", "--json",
                 env={"MASHBILL_STORE": str(tmp_path / "store")})
    assert json.loads(res.stdout)["records"] == len(SEEDS), res.output


def test_the_help_names_the_default_rule_set():
    from mashbill.validators.plans.ruleset import DEFAULT_RULES

    res = CliRunner().invoke(main, ["validate", "--help"], terminal_width=200)
    assert res.exit_code == 0 and f"else {DEFAULT_RULES.stem})" in " ".join(res.output.split())
