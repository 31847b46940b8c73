"""The quick start's spec versions: the yield versions (repair, samples, repair pairs) exist, lock and check,
and stay opt-in: the quick start uses the latest single-shot version of each spec (docs/yield.md)."""

from __future__ import annotations

from mashbill.cli.make.quickstart import QUICKSTART_SPECS, quickstart_spec
from mashbill.factory.generate.repair import check_repair
from mashbill.specs import find_spec, load_spec
from mashbill.specs.lock import lock_problem


def test_the_quick_start_uses_single_shot_versions_and_the_yield_versions_are_there():
    for name in (*QUICKSTART_SPECS, "quickstart-preference"):
        used = load_spec(quickstart_spec(name))
        assert used.spec.repair is None and used.spec.samples is None
        assert "repair" not in used.spec.curation.preference.sources
        latest = load_spec(find_spec(name))
        assert latest.spec.version > used.spec.version and lock_problem(latest) is None
        check_repair(latest)
    plan, cx = load_spec(find_spec("quickstart-plan@7")), load_spec(find_spec("quickstart-complexity@5"))
    assert plan.spec.repair.max_attempts == 2 and "HR001" in plan.spec.repair.codes
    assert set(cx.spec.repair.codes) >= {"CPLX005", "CPLX007", "CPLX008"}
    pref = load_spec(find_spec("quickstart-preference@6"))
    assert "repair" in pref.spec.curation.preference.sources
    assert pref.spec.curation.preference.source_spec.endswith("quickstart-plan@7.yaml")
