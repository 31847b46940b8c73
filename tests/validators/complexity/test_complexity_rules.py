"""The complexity rule set: a broken file is refused at load with one line naming the file, line and field; file-mode
validation (`mashbill validate FILE --spec quickstart-complexity` or `--rules moe-complexity@1.yaml`) applies the rules
to each row's label, with the history turns of a multi-turn row."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mashbill.cli import main
from mashbill.errors import SpecError
from mashbill.specs import find_spec, load_spec, render_prompt
from mashbill.specs.loader import LIBRARY
from mashbill.validators.complexity.complexity_rules import load_complexity_rules
from mashbill.validators.plans.ruleset import load_rules

RULES_FILE = LIBRARY / "shared" / "rules" / "moe-complexity@1.yaml"


def _variant(tmp_path, old: str, new: str):
    text = RULES_FILE.read_text(encoding="utf-8")
    assert old in text
    text = text.replace(old, new, 1)
    p = tmp_path / "my-complexity.yaml"
    p.write_text(text, encoding="utf-8")
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if new.splitlines()[0].strip() in ln)
    return p, line


@pytest.mark.parametrize("old,new,field,says", [
    ("  - id: recall-cue\n", "  - id: recall-clue\n", "rules.0.id",
     "unknown complexity rule id 'recall-clue' (did you mean 'recall-cue'?)"),
    ("  long_words: 80 ", "  long_words: -80 ", "bounds.long_words", "greater than or equal to 1"),
    ("  recall_broad:\n", "  recall_broad:\n    - '(?:wie war'\n", "cues.recall_broad.0", "invalid regular expression"),
    ("    severity: flag\n", "    severity: warn\n", "rules.5.severity", "'reject', 'penalty' or 'flag'"),
    ("  - id: heuristic-agrees\n    code: CPLX006\n", "  - id: heuristic-agrees\n    code: CPLX001\n",
     "rules.5.code", "duplicate rule code 'CPLX001'"),
])
def test_a_broken_rule_file_is_one_line_with_file_line_and_field(tmp_path, old, new, field, says):
    p, line = _variant(tmp_path, old, new)
    for load in (load_complexity_rules, load_rules):  # load_rules sends `kind: complexity` files there
        with pytest.raises(SpecError) as err:
            load(p)
        msg = str(err.value)
        assert "\n" not in msg and msg.startswith(f"{p}:") and f"field '{field}'" in msg and says in msg, msg
        assert err.value.line is not None and abs(err.value.line - line) <= 1


ROWS = [  # (query, label, history messages before it, codes that must fire)
    ("Weißt du noch, welche IP-Adresse ich dir vorhin genannt habe?", "complex", [], {"CPLX001", "CPLX006"}),
    ("How many kilograms are 185 pounds?", "complex", [], {"CPLX005", "CPLX006"}),
    ("Compare PostgreSQL and MongoDB for a logistics system.", "complex", [], set()),
    ("And the second one?", "memory_recall",
     [{"role": "user", "content": "Name two rivers in Spain."}, {"role": "assistant", "content": "Ebro and Tajo."}],
     set()),
    ("And the second one?", "memory_recall", [], {"CPLX004", "CPLX006"}),
]


def _write(tmp_path, with_system: bool):
    rs = load_spec(find_spec("quickstart-complexity"))
    path = tmp_path / "labels.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i, (q, label, history, _) in enumerate(ROWS):
            msgs = list(render_prompt(rs, {"query": q}, f"row{i}").training_messages) if with_system else \
                [{"role": "user", "content": q}]
            msgs = msgs[:-1] + history + msgs[-1:]
            msgs.append({"role": "assistant", "content": json.dumps({"complexity": label})})
            f.write(json.dumps({"messages": msgs}, ensure_ascii=False) + "\n")
    return path


@pytest.mark.parametrize("how", ["spec", "rules"])
def test_file_mode_applies_the_complexity_rules(tmp_path, how):
    f = _write(tmp_path, with_system=how == "spec")
    out = tmp_path / "r.json"
    extra = ["--spec", "quickstart-complexity"] if how == "spec" else ["--rules", str(RULES_FILE)]
    res = CliRunner().invoke(main, ["validate", str(f), "--format", "messages", *extra, "--report", str(out),
                                    "--no-spans", "--no-expectations", "--no-pii", "--no-dedup"],
                             catch_exceptions=False)
    assert res.exit_code == 1, res.output
    report = json.loads(out.read_text(encoding="utf-8"))
    rule_set = "moe-complexity@3" if how == "spec" else "moe-complexity@1"  # the latest quick-start spec names @3
    assert report["rules"]["rule_set"] == rule_set
    for i, (_, _, _, codes) in enumerate(ROWS):
        got = {c for c, ex in report["examples"].items() for e in ex if e["record"] == f"labels.jsonl:{i + 1}"}
        assert got == codes, (i, got, report["examples"])
    assert f"rules: {rule_set}" in res.output and "CPLX001" in res.output


def _cues_with_recall(patterns: list[str]):
    cues = load_complexity_rules(LIBRARY / "shared" / "rules" / "moe-complexity@3.yaml").cues
    return cues.model_copy(update={"recall": patterns})


@pytest.mark.parametrize("patterns, text", [
    (["abc", "ab"], "xxabc"), (["ab", "abc"], "xxabc"),  # the same start: the earlier alternative wins
    (["b+", "ab"], "aab bb"), (["c", "a"], "abc"),  # the leftmost start wins, whatever the order
    (["(?=b)", "a"], "ab"), (["x*", "a"], "ab"), (["^b", "b$"], "ab\nb"),  # empty matches, anchors (re.M)
    (["\\bwort\\b", "wor"], "ein wort."), (["zz", "yy"], "ab"),
])
def test_a_cue_group_finds_its_alternations_first_match(patterns, text):
    """CompiledCues.find searches alternative by alternative; the answer is Python's for the joined alternation."""
    from mashbill.validators.complexity.complexity_rules import CompiledCues, compile_cues

    cues = CompiledCues(_cues_with_recall(patterns))
    want = compile_cues(patterns).search(text)
    assert len(cues.alternatives["recall"]) == len(patterns)
    assert cues.find("recall", text) == (want.group(0) if want else None)


def test_a_cue_group_with_capturing_groups_is_searched_whole():
    """A back-reference counts groups across the joined alternation: such a group keeps its one pattern."""
    from mashbill.validators.complexity.complexity_rules import CompiledCues

    patterns = ["(x)y", "(a)\\1"]  # in the alternation \1 is the first alternative's group: never "aa"
    cues = CompiledCues(_cues_with_recall(patterns))
    assert len(cues.alternatives["recall"]) == 1  # the alternation itself
    assert cues.find("recall", "aa") is None and cues.find("recall", "xy") == "xy"
