"""moe-routing@8 (issue 27): two wrong plans that quick starts accepted under @7. A German bedtime story planned as
one research task that copies the request with "Leuchtrufflemär" for "Leuchtturmwärter" (creative_writer not shown):
two classes, each caught alone, a garbled copy of the request (COPY003) and a creative request planned as research
only where the creative category is not shown (FIT001). And "What did I say earlier about the port of the staging
server?" planned as creative_writer (memory_recall not shown): a creative writer invents what was said (FIT003). The
fixture files hold the EN/DE cases; these tests compare the versions."""

from __future__ import annotations

import pytest
import yaml

from mashbill.specs.loader import LIBRARY
from mashbill.validators.plans.drift import garbled
from mashbill.validators.plans.plans import Shown
from mashbill.validators.plans.routing import check_plan
from mashbill.validators.plans.ruleset import load_ruleset

RULES = LIBRARY / "shared" / "rules"
STORY = "Schreib eine kurze Gutenachtgeschichte über einen Leuchtturmwärter und eine Möwe."
# the record's taxonomy as the quick start showed it (meta.taxonomy_shown): no creative_writer
SHOWN = Shown(frozenset(["mail_classify", "vision", "memory_recall", "devops_sre", "reasoning", "data_analyst",
                         "code_reviewer", "agentic_coder", "math", "technical_support", "legal_advisor", "translation",
                         "general", "science", "medical_consult", "research", "precision_tools", "dynamic"]),
              {"technical_support": "it_support", "science": "scientific_analysis"})
ACCEPTED = [{"category": "research", "id": "t1",
             "search_query": "Schreib eine kurze Gutenachtgeschichte über einen Leuchtrufflemär; eine Möwe",
             "task": "Schreib eine kurze Gutenachtgeschichte über einen Leuchtrufflemär und eine Möwe."}]


@pytest.fixture(scope="module")
def v7():
    return load_ruleset(RULES / "moe-routing@7.yaml")


@pytest.fixture(scope="module")
def v8():
    return load_ruleset(RULES / "moe-routing@8.yaml")


def _rejects(rs, plan, catalog, shown=SHOWN, query=STORY):
    return [v for v in check_plan(rs, query, plan, shown, catalog) if v.severity == "reject"]


def test_the_quick_starts_plan_passes_at_7_and_is_refused_twice_at_8(v7, v8, catalog):
    assert _rejects(v7, ACCEPTED, catalog) == []
    got = _rejects(v8, ACCEPTED, catalog)
    assert sorted(v.code for v in got) == ["COPY003", "FIT001"]
    copy = next(v for v in got if v.code == "COPY003")
    assert "'Leuchtrufflemär' for 'Leuchtturmwärter'" in copy.detail and "task 1 (t1)" in copy.detail


def test_a_recall_question_planned_as_creative_writing_passes_at_7_and_is_fit003_at_8(v7, v8, catalog):
    query = "What did I say earlier about the port of the staging server?"
    shown = Shown(frozenset(["general", "creative_writer", "research", "precision_tools", "dynamic"]))
    plan = [{"id": "t1", "category": "creative_writer", "task": query}]
    assert _rejects(v7, plan, catalog, shown, query) == []
    assert [v.code for v in _rejects(v8, plan, catalog, shown, query)] == ["FIT003"]
    general = [{"id": "t1", "category": "general", "task": query}]
    assert _rejects(v8, general, catalog, shown, query) == []


def test_each_class_alone(v8, catalog):
    """The story copied right but planned as research: FIT001 alone. The garbled copy as a general task: COPY003."""
    research = [{**ACCEPTED[0], "task": STORY, "search_query": "Gutenachtgeschichte Leuchtturmwärter Möwe"}]
    assert [v.code for v in _rejects(v8, research, catalog)] == ["FIT001"]
    general = [{"id": "t1", "category": "general", "task": ACCEPTED[0]["task"]}]
    assert [v.code for v in _rejects(v8, general, catalog)] == ["COPY003"]
    right = [{"id": "t1", "category": "general", "task": STORY}]
    assert _rejects(v8, right, catalog) == []


@pytest.mark.parametrize("written,meant,why", [
    ("Leuchtturmwärtern", "Leuchtturmwärter", "an inflection"),
    ("Leuchtturmwärter", "Leuchturmwärter", "a spelling fix"),
    ("Leuchtturm", "Leuchtturmwärter", "a compound's part"),
    ("Gutenachtgeschichten", "Gutenachtgeschichte", "a plural"),
])
def test_what_is_not_garbled(written, meant, why):
    query = f"Schreib eine kurze Gutenachtgeschichte über einen {meant} und eine Möwe."
    assert garbled(query, query.replace(meant, written)) is None, why


def test_a_text_that_is_no_copy_is_not_compared_word_by_word():
    """Under 60% of the task's words the query's (in order): a rewording, whose new words are the teacher's own."""
    assert garbled(STORY, "Eine Geschichte zum Einschlafen: Leuchtrufflemär trifft Möwe") is None
    assert garbled(STORY, ACCEPTED[0]["task"]) == ("Leuchtrufflemär", "Leuchtturmwärter")


def test_translation_cannot_be_given_the_creative_switch(tmp_path):
    text = (RULES / "moe-routing@8.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    data["translation_request"]["not_search_only"] = True
    bad = tmp_path / "bad@8.yaml"
    bad.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.raises(Exception, match="translation_request.not_search_only"):
        load_ruleset(bad)
