"""File mode applies the routing rules through the one record checker: the taxonomy from --spec or from each row's
own system prompt (the report says which), and `skipped: [...]` where a rule cannot be applied."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mashbill.cli import main
from mashbill.specs import find_spec, load_spec, render_prompt

CALC = [{"task": "Berechne 17 * 23.", "category": "precision_tools", "mcp_tool": "calculate",
         "mcp_args": {"expression": "17 * 23"}}]
ROWS = [
    # (query, plan, codes that must fire)
    ("Was ist 17 * 23?", [{"task": "Berechne 17 * 23.", "category": "general"}], {"HR001"}),
    ("Was regelt § 242 BGB?", [{"task": "Erkläre § 242 BGB.", "category": "legal_advisor"}], {"HR003"}),
    ("Write a haiku about autumn rain.", [{"task": "Write a haiku about autumn rain.", "category": "horoscope_reader"}],
     {"PLAN003", "FIT001"}),
    ("Was ist 17 * 23?", CALC, set()),
    # moe-routing@3 and later: a run-together identifier as a search query
    ("What is the capital of Canada?", [{"task": "Find the capital of Canada.", "category": "research",
                                         "search_query": "capital_of_canada"}], {"PLAN009"}),
    # moe-routing@4: a translation request without a translation task, the same task twice
    ("Translate 'good morning' into French.", [{"task": "Find a greeting.", "category": "research",
                                                "search_query": "good morning greeting"}], {"FIT002"}),
    ("Wie spät ist es in Tokio?", [{"task": "Uhrzeit in Tokio nachschlagen.", "category": "research",
                                    "search_query": "Uhrzeit Tokio"},
                                   {"task": "Uhrzeit in Tokio nachschlagen", "category": "research",
                                    "search_query": "Tokio Zeit"}], {"PLAN010"}),
    # moe-routing@4: a task that restates the prompt's own output note instead of the request
    ("Wie hoch ist der Mount Everest?", [{"task": "Answer with the JSON array only.", "category": "research",
                                          "search_query": "Mount Everest Höhe"}], {"COPY002"}),
]


def _rows(spec: str):
    rs = load_spec(find_spec(spec))
    for i, (q, plan, codes) in enumerate(ROWS):
        p = render_prompt(rs, {"query": q}, f"row{i}")
        yield list(p.training_messages), json.dumps(plan, ensure_ascii=False), codes


def _write(path, rows, fmt="messages"):
    with open(path, "w", encoding="utf-8") as f:
        for prompt, target, _ in rows:
            if fmt == "messages":
                obj = {"messages": prompt + [{"role": "assistant", "content": target}]}
            else:
                obj = {"prompt": prompt, "completion": [{"role": "assistant", "content": target}]}
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")
    return path


def _validate(*args):
    return CliRunner().invoke(main, ["validate", *map(str, args), "--no-spans", "--no-expectations", "--no-pii",
                                     "--no-dedup"],
                              catch_exceptions=False)


@pytest.mark.parametrize("fmt", ["messages", "prompt-completion"])
def test_file_mode_reports_plan_and_hr_codes_with_the_spec(tmp_path, fmt):
    rows = list(_rows("plan-moe"))
    f = _write(tmp_path / "plans.jsonl", rows, fmt)
    out = tmp_path / "r.json"
    res = _validate(f, "--format", fmt, "--spec", "plan-moe", "--report", out)
    assert res.exit_code == 1, res.output
    report = json.loads(out.read_text(encoding="utf-8"))
    for i, (_, _, codes) in enumerate(rows):
        got = {e["record"] for c in codes for e in report["examples"].get(c, [])}
        assert all(f"plans.jsonl:{i + 1}" in got for _ in codes), (i, report["examples"])
    assert set(report["counts"]) == {"HR001", "HR003", "PLAN003", "FIT001", "PLAN009", "FIT002", "PLAN010", "COPY002"}
    assert report["rules"]["rule_set"] == "moe-routing@8" and report["rules"]["taxonomy_from"] == {"spec": 8}
    assert report["rules"]["skipped"] == []
    assert "rules: moe-routing@8 (taxonomy from spec 8)" in res.output and "HR001" in res.output


def test_file_mode_reads_the_taxonomy_from_the_system_prompt(tmp_path):
    rows = list(_rows("quickstart-plan"))
    f = _write(tmp_path / "plans.jsonl", rows)
    out = tmp_path / "r.json"
    res = _validate(f, "--format", "messages", "--report", out)
    report = json.loads(out.read_text(encoding="utf-8"))
    assert res.exit_code == 1 and report["rules"]["taxonomy_from"] == {"system prompt": 8}
    assert set(report["counts"]) == {"HR001", "HR003", "PLAN003", "FIT001", "PLAN009", "FIT002", "PLAN010", "COPY002"}
    assert "taxonomy from system prompt 8" in res.output


def test_file_mode_says_which_rules_it_skipped(tmp_path):
    rows = [([{"role": "user", "content": q}], json.dumps(plan), codes) for q, plan, codes in ROWS]
    f = _write(tmp_path / "bare.jsonl", rows)
    out = tmp_path / "r.json"
    res = _validate(f, "--format", "messages", "--report", out)
    report = json.loads(out.read_text(encoding="utf-8"))
    skipped = report["rules"]["skipped"]
    assert any(s.startswith("category-shown: no taxonomy shown") and "(8 record(s))" in s for s in skipped)
    for rule_id, code in (("creative-fit", "FIT001"), ("translation-fit", "FIT002"), ("memory-fit", "FIT003")):
        assert any(s.startswith(f"{rule_id}: no taxonomy shown") for s in skipped) and code not in report["counts"]
    assert any(s.startswith("no-parroting: no worked examples") for s in skipped)
    assert any(s.startswith("no-prompt-echo: no teacher prompt") for s in skipped) and "COPY002" not in report["counts"]
    assert "PLAN003" not in report["counts"] and {"HR001", "HR003"} <= set(report["counts"])
    assert "skipped: category-shown" in res.output
    res = _validate(f, "--format", "messages", "--no-rules", "--report", out)
    assert res.exit_code == 0 and json.loads(out.read_text())["rules"]["skipped"] == ["all rules: --no-rules"]


def test_file_mode_reads_a_runaway_target_as_no_plan_or_a_finding(tmp_path):
    """A target a looping model wrote ("[" until its token limit, a 2,000-term calculate expression) is no plan or a
    finding for that row; the file's other rows are checked as ever (Python's reader would raise RecursionError)."""
    rows = list(_rows("plan-moe"))[:4]
    prompt = rows[0][0]
    long_sum = [{"task": "Add the ones.", "category": "precision_tools", "mcp_tool": "calculate",
                 "mcp_args": {"expression": "+".join(["1"] * 2000)}}]
    rows += [(prompt, "[" * 5000, set()), (prompt, json.dumps(long_sum), set())]
    f = _write(tmp_path / "plans.jsonl", rows)
    out = tmp_path / "r.json"
    res = _validate(f, "--format", "messages", "--spec", "plan-moe", "--report", out)
    report = json.loads(out.read_text(encoding="utf-8"))
    assert res.exit_code == 1 and {"HR001", "HR003", "PLAN003", "FIT001"} <= set(report["counts"])
    assert "all rules: the target is not a JSON plan (1 record(s))" in report["rules"]["skipped"]
    assert [e["record"] for e in report["examples"]["ARG004"]] == ["plans.jsonl:6"]
