"""Malformed specs fail with one line naming the file, the line, the field and what was expected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mashbill.errors import SpecError
from mashbill.specs import load_spec
from tests.conftest import run_cli


def _spec(tiny_specs: Path) -> Path:
    return tiny_specs / "tiny" / "tiny-plan@1.yaml"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_valid_spec_loads_and_hash_is_stable(tiny_specs):
    a = load_spec(_spec(tiny_specs))
    b = load_spec(_spec(tiny_specs))
    assert a.hash == b.hash and len(a.hash) == 64
    assert a.spec.kind == "plan" and len(a.seeds) == 12


def test_yaml_syntax_error_names_line(tiny_specs):
    p = _spec(tiny_specs)
    _edit(p, "kind: plan", "kind: [plan")
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.path == str(p.resolve()) and exc.value.line is not None
    assert "YAML syntax error" in str(exc.value)


def test_unknown_key_names_line_and_field(tiny_specs):
    p = _spec(tiny_specs)
    _edit(p, "  batch_size: 2", "  batch_size: 2\n  batchsize: 4")
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.field == "runtime.batchsize"
    assert exc.value.line == _line_of(p, "batchsize")
    assert "unknown key" in str(exc.value)


def test_wrong_type_names_field_and_value(tiny_specs):
    p = _spec(tiny_specs)
    _edit(p, "max_tokens: 48", "max_tokens: lots")
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.field == "teacher.sampling.max_tokens"
    assert exc.value.line == _line_of(p, "max_tokens")
    assert "lots" in str(exc.value) and "integer" in str(exc.value)


def test_missing_required_field(tiny_specs):
    p = _spec(tiny_specs)
    _edit(p, "output_schema: ../shared/tiny-plan@1.json\n", "")
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.field == "output_schema" and "missing" in str(exc.value)


def test_missing_referenced_file(tiny_specs):
    p = _spec(tiny_specs)
    _edit(p, "file: ../shared/tiny-tools@1.yaml", "file: ../shared/no-such-tools.yaml")
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.field == "tools.file" and exc.value.line == _line_of(p, "no-such-tools")
    assert "not found" in str(exc.value)


def test_invalid_output_schema(tiny_specs):
    schema = tiny_specs / "shared" / "tiny-plan@1.json"
    data = json.loads(schema.read_text())
    data["minItems"] = "one"
    schema.write_text(json.dumps(data))
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tiny_specs))
    assert exc.value.path == str(schema.resolve()) and "invalid JSON Schema" in str(exc.value)


def test_output_schema_not_json(tiny_specs):
    schema = tiny_specs / "shared" / "tiny-plan@1.json"
    schema.write_text('{"type": "array",\n  oops}')
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tiny_specs))
    assert exc.value.line == 2


def test_unknown_framing(tiny_specs):
    p = _spec(tiny_specs)
    _edit(p, "framings: [A, B]", "framings: [A, Z]")
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.field == "prompt.framings" and "'Z'" in str(exc.value)


def test_unknown_template_variable(tiny_specs):
    p = _spec(tiny_specs)
    _edit(p, 'user: "{{ query }}"', 'user: "{{ querry }}"')
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.field == "prompt.training.user" and "querry" in str(exc.value)


def test_unknown_taxonomy_category_in_rename(tiny_specs):
    tax = tiny_specs / "shared" / "tiny-taxonomy@1.yaml"
    _edit(tax, "    creative_writer: [creative_writing]", "    poet: [poetry]")
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tiny_specs))
    assert exc.value.path == str(tax.resolve()) and "poet" in str(exc.value)


def test_tool_example_must_match_its_argument_schema(tiny_specs):
    tools = tiny_specs / "shared" / "tiny-tools@1.yaml"
    _edit(tools, 'example: {expression: "2840 * 0.17"}', "example: {expr: 1}")
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tiny_specs))
    assert exc.value.field == "tools.calculate.example"
    assert exc.value.line == _line_of(tools, "example:")


def test_tool_args_must_be_a_valid_schema(tiny_specs):
    tools = tiny_specs / "shared" / "tiny-tools@1.yaml"
    _edit(tools, "type: object", "type: objekt")
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tiny_specs))
    assert exc.value.field == "tools.calculate.args"


def test_duplicate_key(tiny_specs):
    p = _spec(tiny_specs)
    _edit(p, "version: 1\n", "version: 1\nversion: 2\n")
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert "duplicate key" in str(exc.value) and exc.value.line == 3


def test_seed_file_row_errors_name_the_row(tiny_specs):
    seeds = tiny_specs / "shared" / "seeds.jsonl"
    seeds.write_text(seeds.read_text() + "{not json}\n")
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tiny_specs))
    assert exc.value.path == str(seeds.resolve()) and exc.value.line == 13


def test_csv_and_parquet_seeds_with_column_mapping(tiny_specs):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tiny_specs / "shared" / "q.csv").write_text("text,language\nHow far is the moon?,en\nWie spät ist es?,de\n")
    pq.write_table(pa.table({"prompt": ["Sort a list in Python"], "l": ["en"]}), tiny_specs / "shared" / "q.parquet")
    p = _spec(tiny_specs)
    _edit(p, "seeds:\n", "seeds:\n  - path: ../shared/q.csv\n    columns: {query: text, lang: language}\n"
                         "  - path: ../shared/q.parquet\n    columns: {query: prompt, lang: l}\n")
    rs = load_spec(p)
    assert rs.seeds[:3] == ({"query": "How far is the moon?", "lang": "en"}, {"query": "Wie spät ist es?", "lang": "de"},
                            {"query": "Sort a list in Python", "lang": "en"})


def test_runtime_knobs_do_not_change_the_hash_but_content_does(tiny_specs):
    p = _spec(tiny_specs)
    before = load_spec(p).hash
    _edit(p, "batch_size: 2", "batch_size: 64")
    assert load_spec(p).hash == before
    prompt = tiny_specs / "shared" / "tiny-prompt@1.yaml"
    _edit(prompt, "Turn the request into a plan.", "Turn the request into a plan!")
    assert load_spec(p).hash != before




def test_taxonomy_variation_is_deterministic_per_record(tiny_specs):
    from mashbill.factory.records import record_id
    from mashbill.specs import render_prompt

    rs = load_spec(_spec(tiny_specs))
    rid = record_id(rs.hash, rs.seeds[0])
    a, b = render_prompt(rs, rs.seeds[0], rid), render_prompt(rs, rs.seeds[0], rid)
    assert a == b
    shown = {tuple(render_prompt(rs, s, record_id(rs.hash, s)).taxonomy.names) for s in rs.seeds}
    assert len(shown) > 1  # variation really varies across records
    for s in rs.seeds:
        p = render_prompt(rs, s, record_id(rs.hash, s))
        assert {"research", "precision_tools"} <= set(p.taxonomy.names)
        # the teacher's system prompt is identical for every record: that is what the prefix cache reuses
        assert p.teacher_messages[0] == a.teacher_messages[0]
        assert p.training_messages[1]["content"] == s["query"]


def test_file_name_must_match_name_and_version(tiny_specs):
    p = _spec(tiny_specs)
    _edit(p, "version: 1", "version: 3")
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.field == "version" and "tiny-plan@1" in str(exc.value)


def test_only_yaml_files_with_a_kind_count_as_specs(tiny_specs):
    from mashbill.specs import find_spec_files

    (tiny_specs / "tiny" / "notes.yaml").write_text("just: notes\n")
    names = {p.name for p in find_spec_files(tiny_specs)}
    assert names == {"tiny-plan@1.yaml", "tiny-complexity@1.yaml"}


def test_shipped_library_passes_spec_check():
    proc = run_cli("spec", "check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 problem(s)" in proc.stdout


def test_editing_a_shipped_prompt_without_a_bump_fails_check(tmp_path):
    import shutil

    from mashbill.specs import LIBRARY

    lib = tmp_path / "library"
    shutil.copytree(LIBRARY, lib)
    prompt = lib / "shared" / "prompts" / "planner@1.yaml"
    prompt.write_text(prompt.read_text(encoding="utf-8") + "\n# a harmless-looking edit\n", encoding="utf-8")
    proc = run_cli("spec", "check", lib)
    assert proc.returncode == 1
    failing = {line.split()[2] for line in proc.stdout.splitlines() if line.startswith("FAIL spec ")}
    assert {"plan-moe@2", "quickstart-plan@2"} <= failing
    assert "complexity-moe@1" not in failing


@pytest.mark.parametrize("row,why", [("[" * 3000 + "]" * 3000, "nested deeper than 64 levels"),
                                     ('{"query": "x", "n": NaN}', "NaN is not JSON")], ids=["deep", "nan"])
def test_a_seed_row_python_cannot_read_safely_names_the_row(tiny_specs, row, why):
    seeds = tiny_specs / "shared" / "seeds.jsonl"
    seeds.write_text(seeds.read_text() + row + "\n")
    with pytest.raises(SpecError) as exc:
        load_spec(_spec(tiny_specs))
    assert exc.value.path == str(seeds.resolve()) and exc.value.line == 13 and why in str(exc.value)


@pytest.mark.parametrize("escape", ["\\ud800", "\\uDC00", "\\U0000D800", "\\ud83d\\ude00"])
def test_a_surrogate_escaped_in_the_spec_names_its_line(tiny_specs, escape):
    """YAML decodes "\\ud800" in a double-quoted string to a code point nothing after the loader can encode (the spec
    hash raised UnicodeEncodeError), and a \\u pair to two of them; the character itself or its \\U escape loads."""
    p = _spec(tiny_specs)
    seeds = '  - path: ../shared/seeds.jsonl\n    columns: {query: query, lang: lang}'
    _edit(p, seeds, '  - inline: [{query: "What is 2 + 2 \\U0001F600 😀?", lang: en}]')
    assert load_spec(p).seeds[0]["query"] == "What is 2 + 2 😀 😀?"
    _edit(p, "😀?", f"😀 {escape}?")
    with pytest.raises(SpecError) as exc:
        load_spec(p)
    assert exc.value.line == _line_of(p, "inline") and "holds a surrogate" in str(exc.value)
