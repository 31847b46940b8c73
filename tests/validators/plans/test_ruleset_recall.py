"""memory-fit reads its recall phrases from the complexity rule set (recall_request.cues), never a copy: the routing
rule set's triggers find exactly what moe-complexity@1's `recall` cues find (a missing file: test_ruleset_load.py),
and a spec under moe-routing@4 hashes (and ships) the cue file with its rule set."""

from __future__ import annotations

import shutil

from mashbill.specs import find_spec, load_spec
from mashbill.specs.loader import LIBRARY
from mashbill.validators.complexity.complexity_rules import CompiledCues, load_complexity_rules
from mashbill.validators.plans.ruleset import load_ruleset
from mashbill.validators.plans.triggers import triggers_for

RULES = LIBRARY / "shared" / "rules"
QUERIES = ["What did I tell you about my flight?", "Weißt du noch, welche IP-Adresse ich dir genannt habe?",
           "Do you remember my dog's name?", "Wie war das Wetter?", "How do I remember names?",
           "Welche Farbe habe ich dir vorhin genannt?", "What is the capital of France?"]


def test_recall_phrases_are_the_complexity_rule_sets():
    rs = load_ruleset(RULES / "moe-routing@4.yaml")
    cues = load_complexity_rules(RULES / "moe-complexity@1.yaml").cues
    assert rs.recall_patterns == tuple(cues.recall)
    trig, compiled = triggers_for(rs), CompiledCues(cues)
    found = [trig.analyze(q).recall for q in QUERIES]
    assert found == [compiled.find("recall", q) for q in QUERIES]
    assert sum(f is not None for f in found) == 4


def test_a_spec_hashes_the_cue_file(tmp_path):
    rs = load_spec(find_spec("quickstart-plan@4"))
    assert rs.file_paths["rules.recall_cues"].name == "moe-complexity@1.yaml"
    assert "rules.recall_cues" not in load_spec(find_spec("quickstart-plan@3")).files  # older versions unchanged
    lib = tmp_path / "library"
    shutil.copytree(LIBRARY, lib)
    cue = lib / "shared" / "rules" / "moe-complexity@1.yaml"
    cue.write_text(cue.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert load_spec(lib / "archive" / "quickstart" / "quickstart-plan@4.yaml").hash != rs.hash
