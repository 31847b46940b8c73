"""The plan yardstick (tests/fixtures/plan_labels): the fixture is whole (rows, sources, verbatim text, names from
the taxonomy and the tool catalog, operands the query states, balanced halves, licences, the README's counts), and
`right_in_store` counts the right plans among the accepted records of a real DuckDB store."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from mashbill.exporters.evaluation.plan_yardstick import PATH, TAXONOMY, load_rows, right_in_store
from mashbill.specs.loader import LIBRARY, load_catalog, load_taxonomy

ROOT = Path(__file__).resolve().parents[3]
DEV = next((p / "data" / "queries-dev" for p in (ROOT.parent / "shared", ROOT.parent.parent / "shared")
            if (p / "data" / "queries-dev").is_dir()), None)
QUICKSTART = "mashbill_quickstart"
CATALOG = LIBRARY / "shared" / "tools" / "precision-tools@2.yaml"


@pytest.fixture(scope="module")
def rows():
    return load_rows("all")


def test_the_yardstick_is_whole(rows):
    assert len(rows) >= 150 and len({r["query"] for r in rows}) == len(rows)
    dev = [r for r in rows if r["source"] != QUICKSTART]
    assert len(dev) >= 100 and len({r["source"] for r in dev}) >= 8
    assert Counter(r["lang"] for r in rows)["de"] >= 30 and {r["lang"] for r in rows} == {"en", "de"}
    for r in rows:
        assert r["licence"] and r["source_file"] and isinstance(r["trap"], bool), r["query"]
        assert isinstance(r["wrong_if"], str) and len(r["wrong_if"].split()) >= 2, r["query"]
    assert sum(r["trap"] for r in rows) >= 20


def test_the_quick_start_seeds_are_all_there(rows):
    seeds = [json.loads(line) for line in (LIBRARY / "seeds" / "quickstart.jsonl").read_text(encoding="utf-8")
             .splitlines() if line.strip()]
    mine = {r["query"]: r for r in rows if r["source"] == QUICKSTART}
    assert set(mine) == {s["query"] for s in seeds}
    assert all(mine[s["query"]]["lang"] == s["lang"] for s in seeds)


@pytest.mark.skipif(DEV is None, reason="the shared queries-dev corpora are not beside this checkout")
def test_every_queries_dev_row_is_verbatim_in_its_source_file(rows):
    texts: dict[str, str] = {}
    for r in rows:
        if r["source"] == QUICKSTART:
            continue
        path = DEV / r["source_file"]
        text = texts.setdefault(r["source_file"], path.read_text(encoding="utf-8"))
        q = r["query"]
        forms = (q, json.dumps(q)[1:-1], json.dumps(q, ensure_ascii=False)[1:-1], q.replace('"', '""'))
        assert any(f in text for f in forms), f"{r['source_file']}: {q!r} not found"
        folder = path.parent
        while not (folder / "SOURCE.txt").is_file():
            folder = folder.parent
        licence_file = (folder / "SOURCE.txt").read_text(encoding="utf-8")
        assert r["licence"].split(" ")[0] in licence_file, (r["source"], r["licence"])


def _names(cats) -> list[str]:
    return [n for c in cats for n in (c if isinstance(c, list) else [c])]


def test_names_come_from_the_taxonomy_and_the_catalog(rows):
    tax = load_taxonomy(TAXONOMY)
    known = set(tax.categories) | set(tax.structural) | set(tax.variation.novel)
    tools = load_catalog(CATALOG).tools
    for r in rows:
        assert r["categories"] and set(_names(r["categories"]) + r.get("also_ok", [])) <= known, r["query"]
        wanted = r["tool"] if isinstance(r["tool"], list) else [r["tool"]] if r["tool"] else []
        assert set(wanted) <= set(tools), r["query"]
        if wanted:  # a tool is a precision_tools task
            assert "precision_tools" in _names(r["categories"]), r["query"]
            assert r["operands"], r["query"]
        if r["operands"]:
            assert wanted, r["query"]


WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                    "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())}
WORDS |= {w: i for i, w in enumerate("null eins zwei drei vier fünf sechs sieben acht neun zehn".split())}
WORDS |= {"first": 1, "second": 2, "third": 3, "ein": 1, "eine": 1, "twice": 2, "week": 7, "woche": 7}
MONTHS = ["jan", "feb", "mar|mär", "apr", "may|mai", "jun", "jul", "aug", "sep", "oct|okt", "nov", "dec|dez"]


def query_numbers(query: str) -> set[float]:
    """Every number the query states: digits (with German or English separators read both ways), number words,
    month names (their number), "N hundred"."""
    q = query.lower()
    out: set[float] = set()
    for m in re.findall(r"\d+(?:[.,]\d+)*", q):
        out.add(float(re.sub(r"[.,]", "", m)))
        out.update(float(x) for x in re.findall(r"\d+", m))
        if m.count(".") + m.count(",") == 1:
            out.add(float(m.replace(",", ".")))
    for w in re.findall(r"[a-zäöü]+", q):
        if w in WORDS:
            out.add(float(WORDS[w]))
        for i, names in enumerate(MONTHS, 1):
            if any(w.startswith(n) for n in names.split("|")) and len(w) >= 3:
                out.add(float(i))
    for w in re.findall(r"([a-z]+) hundred", q):
        out.add(100.0 * WORDS.get(w, 1))
    return out


def operand_numbers(op) -> list[float]:
    if isinstance(op, (int, float)):
        return [abs(float(op))]
    text = str(op)
    if text.endswith("%"):
        return [float(text[:-1])]
    return [float(x) for x in re.findall(r"\d+", text)]


def test_every_operand_number_is_stated_by_the_query(rows):
    for r in rows:
        have = query_numbers(r["query"])
        for op in r["operands"] or []:
            alts = op if isinstance(op, list) else [op]
            assert any(set(operand_numbers(a)) <= have for a in alts), (r["query"], op, sorted(have))


def test_the_number_check_can_fail():
    assert query_numbers("Wie viel sind 19 % auf 1.249 Euro?") >= {19.0, 1249.0, 1.249}
    assert not set(operand_numbers("1989-11-09")) <= query_numbers("Welcher Wochentag war der 9. Oktober 1989?")
    assert set(operand_numbers("1989-11-09")) <= query_numbers("Welcher Wochentag war der 9. November 1989?")


def test_the_halves_are_balanced_per_source(rows):
    by = Counter((r["source"], r["split"]) for r in rows)
    for source in {r["source"] for r in rows}:
        assert abs(by[source, "tune"] - by[source, "report"]) <= 1, source
    assert {r["split"] for r in rows} == {"tune", "report"}


def test_the_readme_counts_are_the_files(rows):
    readme = (PATH.parent / "README.md").read_text(encoding="utf-8")
    assert f"`labels.jsonl`: {len(rows)} requests" in readme
    table = {line.split("|")[1].strip(" `"): [c.strip() for c in line.split("|")[2:5]]
             for line in readme.splitlines() if line.startswith("| `")}
    by = Counter((r["source"], r["split"]) for r in rows)
    for source in {r["source"] for r in rows}:
        assert table[source] == [str(by[source, "tune"]), str(by[source, "report"]),
                                 str(by[source, "tune"] + by[source, "report"])], source
    traps = sum(r["trap"] for r in rows)
    assert f"{traps} traps" in readme
    tooled = Counter(t for r in rows for t in ([r["tool"]] if isinstance(r["tool"], str) else r["tool"] or []))
    for tool, n in tooled.items():
        assert f"{tool} {n}" in readme, tool


def test_right_plans_are_counted_among_a_stores_accepted_records(tmp_path, rows):
    from mashbill.factory.records import Record, SpecRef, TeacherCall, Verdict
    from mashbill.factory.store import Store

    poem = "Write a short poem about autumn in Hamburg."
    hi = "Hi there!"
    vat = "Wie viel sind 19 % Mehrwertsteuer auf 1.249 Euro netto?"
    plans = {  # query -> (status, plan)
        poem: ("accepted", [{"task": "Poem about autumn in Hamburg.", "category": "creative_writing"}]),
        hi: ("accepted", [{"task": "Say hi.", "category": "creative_writer"}]),
        vat: ("rejected", [{"task": "19 % von 1249.", "category": "precision_tools", "mcp_tool": "calculate",
                            "mcp_args": {"expression": "1249 * 0.19"}}]),
        "not a yardstick request": ("accepted", [{"task": "x", "category": "general"}]),
    }
    ref = SpecRef("p", 1, "h" * 64)
    with Store.open(tmp_path / "store") as store:
        run = store.begin_run(spec_name="p", spec_version=1, spec_hash=ref.hash, kind="plan", backend="llama_cpp",
                              model="m", model_sha256="f" * 64, model_info={}, sampling={})
        recs = [Record(f"r{i}", "plan", {"query": q}, plan, None, ref, status, [], {})
                for i, (q, (status, plan)) in enumerate(plans.items())]
        store.write_batch(run, recs, {"r2": [Verdict("HR001", "reject", "x")]},
                          [TeacherCall(r.id, "p" + r.id, 1, "llama_cpp", "m", 0.1, 10, 8, 2, "stop") for r in recs])
        store.finish_run(run, "completed", {})
    res = right_in_store(tmp_path / "store")
    assert (res["accepted"], res["right"], res["precision"]) == (2, 1, 0.5)  # the rejected right plan is not counted
    assert res["verdicts"] == {"r0": [], "r1": ["missing category general", "unexpected category creative_writer"]}
    assert res["wrong_by"] == {"missing category": 1, "unexpected category": 1}


def test_yardstick_plan_is_an_eval_set_for_planners(rows):
    from mashbill.exporters.evaluation.eval_sets import EvalSetError, load_set
    from mashbill.exporters.evaluation.plan_yardstick import gold_facts

    s = load_set("yardstick:plan")
    report = [r for r in rows if r["split"] == "report"]
    assert s.kind == "planner" and s.meta["half"] == "report" and s.queries == [r["query"] for r in report]
    assert s.gold == [{"yardstick": gold_facts(r)} for r in report]
    assert len(load_set("yardstick:plan:all")) == len(rows) and load_set("yardstick:plan:tune").sha256 != s.sha256
    with pytest.raises(EvalSetError, match="half 'test'"):
        load_set("yardstick:plan:test")


def test_docs_yield_states_the_files_counts(rows):
    doc = " ".join((ROOT / "docs" / "yield.md").read_text(encoding="utf-8").split())
    dev = [r for r in rows if r["source"] != QUICKSTART]
    german = sum(r["lang"] == "de" for r in rows)
    assert f"{len(rows)} requests (the {len(rows) - len(dev)} quick-start seeds and {len(dev)} real queries from " \
           f"{len({r['source'] for r in dev})} `queries-dev` sources, {german} German)" in doc
    assert f"({sum(r['trap'] for r in rows)} are:" in doc
