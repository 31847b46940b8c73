"""The example bank of a spec's `examples` section (specs/examples.py): its bytes are in the spec hash, and a bad
bank or section stops loading (and `spec check`) with the file, the line and the field (docs/specs.md)."""

from __future__ import annotations

import json

import pytest
import yaml

from mashbill.errors import SpecError
from mashbill.specs import LIBRARY, find_spec, load_spec
from mashbill.specs.examples import load_bank, render_rows
from mashbill.specs.loader import spec_home

BASE = find_spec("quickstart-plan@8")  # archived: its references resolve from its kind's folder (spec_home)
PLAN = [{"task": "Compute 12 * 7.", "category": "precision_tools", "mcp_tool": "calculate",
         "mcp_args": {"expression": "12 * 7"}}]


def bank_row(i: int, query: str, **over) -> dict:
    return {"id": f"b-{i:03d}", "query": query, "lang": "en", "output": PLAN, "record_id": f"rec{i}",
            "spec": "quickstart-plan@7", "accepted_by": "gate", "split": "train", **over}


def write_bank(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def spec_with_bank(tmp_path, bank_rows=None, *, name: str = "bank-plan", **examples) -> "Path":  # noqa: F821
    """The quick-start plan spec @8 with absolute references, inline seeds and a bank of our own."""
    data = yaml.safe_load(BASE.read_text(encoding="utf-8"))
    home = spec_home(BASE)
    for key in ("output_schema", "rules"):
        data[key] = str((home / data[key]).resolve())
    for key in ("prompt", "taxonomy", "tools"):
        data[key]["file"] = str((home / data[key]["file"]).resolve())
    data["holdout"] = [str((home / h).resolve()) for h in data["holdout"]]
    data["trainer_profile"]["chat_template"] = str((home / data["trainer_profile"]["chat_template"]).resolve())
    data["seeds"] = [{"inline": [{"query": "What is 12 * 7?", "lang": "en"}]}]
    bank = tmp_path / "bank@1.jsonl"
    if bank_rows is not None:
        write_bank(bank, bank_rows)
    data["examples"] = {"bank": str(bank), "k": 3, **examples}
    data.update(name=name, version=1)
    path = tmp_path / f"{name}@1.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def test_the_bank_bytes_are_in_the_spec_hash(tmp_path):
    rows = [bank_row(1, "Compute 12 times 7."), bank_row(2, "Write a haiku about snow.")]
    path = spec_with_bank(tmp_path, rows)
    first = load_spec(path)
    assert first.files["examples.bank"] and len(first.bank) == 2
    assert load_spec(path).hash == first.hash  # stable
    write_bank(tmp_path / "bank@1.jsonl", [rows[0], {**rows[1], "query": "Write a haiku about snow!"}])
    assert load_spec(path).hash != first.hash  # one changed byte of the bank changes the spec's hash
    write_bank(tmp_path / "bank@1.jsonl", rows)
    assert load_spec(path).hash == first.hash
    other_k = spec_with_bank(tmp_path, rows, k=2)
    assert load_spec(other_k).hash != first.hash


def test_rows_render_as_worked_examples():
    rows = load_bank(LIBRARY / "shared" / "examples" / "quickstart-plans@1.jsonl")[:2]
    text = render_rows(rows, "plan")
    for row in rows:
        assert f"Request: {row.query}\nPlan: " in text
        assert json.dumps(row.output, ensure_ascii=False, separators=(",", ":")) in text


def test_the_shipped_bank_is_train_rows_none_a_quickstart_seed():
    rows = load_bank(LIBRARY / "shared" / "examples" / "quickstart-plans@1.jsonl")
    seeds = {json.loads(line)["query"].strip().casefold()
             for line in (LIBRARY / "seeds" / "quickstart.jsonl").read_text(encoding="utf-8").splitlines() if line}
    assert rows and all(r.split == "train" for r in rows)
    assert not [r.query for r in rows if r.query.strip().casefold() in seeds]


@pytest.mark.parametrize("case,field,line", [
    ("no query", "query", 2), ("no output", "output", 2), ("empty output", "output", 2),
    ("bad split", "split", 2), ("not json", None, 2), ("duplicate id", "id", 2), ("unknown key", "colour", 2),
])
def test_a_malformed_bank_row_names_file_line_and_field(tmp_path, case, field, line):
    good = bank_row(1, "Compute 12 times 7.")
    bad = {"no query": {k: v for k, v in bank_row(2, "x").items() if k != "query"},
           "no output": {k: v for k, v in bank_row(2, "Explain tides.").items() if k != "output"},
           "empty output": bank_row(2, "Explain tides.", output=[]),
           "bad split": bank_row(2, "Explain tides.", split="validation"),
           "duplicate id": bank_row(1, "Explain tides."),
           "unknown key": bank_row(2, "Explain tides.", colour="red")}.get(case)
    bank = tmp_path / "bank@1.jsonl"
    text = json.dumps(good) + "\n" + (json.dumps(bad) if bad is not None else "{not json") + "\n"
    path = spec_with_bank(tmp_path)
    bank.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert err.value.path == str(bank.resolve()) and err.value.line == line and err.value.field == field, str(err.value)


def test_a_missing_bank_and_k_below_one_name_the_spec_line_and_field(tmp_path):
    path = spec_with_bank(tmp_path)  # the bank file is never written
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert err.value.path == str(path) and err.value.field == "examples.bank" and err.value.line
    assert "not found" in str(err.value)
    path = spec_with_bank(tmp_path, [bank_row(1, "Compute 12 times 7.")], k=0)
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert err.value.field == "examples.k" and err.value.line and "greater than or equal to 1" in str(err.value)


def test_an_examples_section_the_teacher_template_never_uses_is_refused(tmp_path):
    path = spec_with_bank(tmp_path, [bank_row(1, "Compute 12 times 7.")])
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["prompt"]["teacher"]["system"] = data["prompt"]["teacher"]["system"].replace("{{ retrieved_examples }}", "")
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with pytest.raises(SpecError) as err:
        load_spec(path)
    assert err.value.field == "examples" and "retrieved_examples" in str(err.value)
