"""The quick start's spec versions: it runs pinned single-shot versions (QUICKSTART_VERSIONS) under the newest
routing rule set; the yield versions (repair in either mode, votes, retrieved examples, repair pairs) exist, lock
and check, and stay opt-in (docs/yield.md, "The quick start")."""

from __future__ import annotations

import re
from pathlib import Path

from mashbill.cli.make.quickstart import QUICKSTART_SPECS, QUICKSTART_VERSIONS, quickstart_spec
from mashbill.factory.generate.repair import check_repair
from mashbill.specs import find_spec, load_spec
from mashbill.specs.lock import lock_problem
from mashbill.validators.plans.ruleset import DEFAULT_RULES


def test_the_quick_start_runs_its_pinned_single_shot_versions():
    assert set(QUICKSTART_VERSIONS) == {*QUICKSTART_SPECS, "quickstart-preference"}
    for name, version in QUICKSTART_VERSIONS.items():
        used = load_spec(quickstart_spec(name))
        assert used.spec.version == version and lock_problem(used) is None
        assert used.spec.repair is None and used.spec.samples is None and used.spec.examples is None
        assert "repair" not in used.spec.curation.preference.sources
        if used.spec.rules and used.spec.kind in ("plan", "preference"):  # the newest routing rule set
            assert used.file_paths["rules"].name == DEFAULT_RULES.name


def test_the_readmes_chain_names_the_spec_versions_the_quick_start_runs():
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    named = dict(re.findall(r"on snapshot (quickstart-[a-z]+)@1 \(spec @(\d+)\)", readme))
    assert named == {name: str(version) for name, version in QUICKSTART_VERSIONS.items()}


def test_the_opt_in_yield_versions_are_there_and_check():
    for ref in ("quickstart-complexity@5", "quickstart-plan@7", "quickstart-plan@8", "quickstart-plan@9",
                "quickstart-preference@6"):
        rs = load_spec(find_spec(ref))
        assert lock_problem(rs) is None
        check_repair(rs)
    plan, cx = load_spec(find_spec("quickstart-plan@7")), load_spec(find_spec("quickstart-complexity@5"))
    assert plan.spec.repair.max_attempts == 2 and plan.spec.repair.mode == "continue"
    assert "HR001" in plan.spec.repair.codes
    assert set(cx.spec.repair.codes) >= {"CPLX005", "CPLX007", "CPLX008"}
    assert load_spec(find_spec("quickstart-plan@8")).spec.examples is not None
    afresh = load_spec(find_spec("quickstart-plan@9")).spec.repair
    assert afresh.mode == "restart" and "HR001" in afresh.codes and "HR006" not in afresh.codes
    cfg = load_spec(find_spec("quickstart-preference@6")).spec.curation.preference
    assert "repair" in cfg.sources and cfg.source_spec.endswith("quickstart-plan@7.yaml")


def test_the_retrieved_label_version_shows_the_yardsticks_tune_half_only():
    """quickstart-complexity@6 (opt-in): its bank is the complexity yardstick's tune half with the gold labels, so
    bench/yield.py's report half, on which it was measured, is never shown to the teacher."""
    import json

    rs = load_spec(find_spec("quickstart-complexity@6"))
    assert lock_problem(rs) is None and rs.spec.repair is None and rs.spec.examples.k == 6
    assert "{{ retrieved_examples }}" in rs.spec.prompt.teacher.system
    labels = [json.loads(line) for line in (Path(__file__).resolve().parents[1] / "fixtures" / "complexity_labels"
                                            / "labels.jsonl").read_text(encoding="utf-8").splitlines()]
    tune = {r["query"]: r["label"] for r in labels if r["split"] == "tune"}
    assert {r.query: r.output["complexity"] for r in rs.bank} == tune
    assert {r.split for r in rs.bank} == {"train"} and {r.accepted_by for r in rs.bank} == {"review"}
