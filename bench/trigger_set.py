"""The labelled trigger set: which public queries need which precision tool, which need none, and a plan that
calls the right tool for each query that needs one.

    .venv/bin/python bench/trigger_set.py [--queries DIR] [--out bench/data/triggers-dev.jsonl]

Labels come from each source's own labels, never from our triggers (so the set can judge them):
- need a tool: DuckDuckGo goodies tool queries (`triggers: true`; unit_conversion -> unit_convert, calculator ->
  calculate, date_math -> date_add, days/weekdays/workdays_between -> date_diff, timezone_conversion ->
  timezone_convert), maths word problems (GSM8K, SVAMP, MGSM en/de: DOMAIN's policy sends the computation to
  `calculate`), BIG-Bench Hard multistep arithmetic (calculate) and date understanding (date_add), the
  home-assistant `qa_maths` utterances that state numbers (calculate or unit_convert: that label covers both,
  so these rows count for recall but get no correct plan);
- need none: the DDG `triggers: false` rows, NQ-open, XQuAD-de questions, NF-CATS questions, CoNaLa titles,
  MT-Bench / MT-Bench-DE / Vicuna-bench first turns outside the maths, reasoning and Fermi categories,
  Self-Instruct instructions, and the home-assistant utterances outside maths, conversion and currency;
- left out (neither): the ambiguous categories just named, currency (live rates), MATH-500, MMLU, Arena-Hard.
  Those still count for the PII rate, which is measured on every query text (`pii_corpus`).

`split` is "tune" for even rows of each source and "report" for odd rows: tune on one half, report both.
Licences: every source keeps its own (see each folder's SOURCE.txt; bench/data/TRIGGERS-LICENSES.md).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
from datetime import date, datetime
from pathlib import Path

DEFAULT_DIR = Path(os.environ.get("MASHBILL_QUERIES_DIR", "/work/shared/data/queries-dev"))
OUT = Path(__file__).with_name("data") / "triggers-dev.jsonl"

DDG_TOOL = {"unit_conversion": "unit_convert", "calculator": "calculate", "date_math": "date_add",
            "days_between": "date_diff", "weekdays_between": "date_diff", "workdays_between": "date_diff",
            "timezone_conversion": "timezone_convert"}
_NUMBER = re.compile(r"\d|(?i:\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|hundred)\b)")
_CALC = re.compile(r"<<([^=<>]+)=[^<>]*>>")


def states_quantity(query: str) -> bool:
    """Does a query state something to compute (a number in digits or words), rather than name a widget
    ("calculator", "unit converter", "kg")?"""
    return _NUMBER.search(query) is not None


def _jsonl(path: Path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _iso(text: str, fallback: str = "2014-01-01") -> str:
    for fmt in ("%d %b %Y", "%d %b %Y %H:%M:%S"):
        try:
            return datetime.strptime(text.strip()[:len("01 Jan 2014")], fmt).date().isoformat()
        except ValueError:
            continue
    return fallback


def _task(text, tool, args, i=0, dep=None):
    t = {"id": f"t{i + 1}", "task": text, "category": "precision_tools", "mcp_tool": tool, "mcp_args": args}
    if dep:
        t["depends_on"] = dep
    return t


def _ddg_plan(row: dict, tool: str) -> list[dict]:
    q, exp = row["query"], row.get("expected") or {}
    if tool == "unit_convert":
        f = exp.get("fields", {})
        try:
            value = float(f.get("raw_input"))
        except (TypeError, ValueError):
            value = 1.0
        return [_task(f"Convert: {q}", tool, {"value": value, "from_unit": f.get("from_unit") or "unit",
                                               "to_unit": f.get("to_unit") or "unit"})]
    args = exp.get("args") or []
    if tool == "calculate":
        return [_task(f"Compute {q}", tool, {"expression": str(args[0]) if args else q})]
    if tool == "date_diff":
        d1 = _iso(str(args[0])) if args else "2014-01-01"
        d2 = _iso(str(args[1])) if len(args) > 1 else d1
        return [_task(f"Count the days: {q}", tool, {"date1": d1, "date2": d2})]
    if tool == "date_add":
        return [_task(f"Shift the date: {q}", tool, {"base_date": _iso(str(args[0])) if args else "2014-01-01",
                                                      "days": 1})]
    return [_task(f"Convert the time: {q}", tool, {"local_datetime": "2014-01-12T08:10:00",
                                                    "from_timezone": "UTC", "to_timezone": "Europe/Berlin"})]


def _calc_plan(query: str, expressions: list[str]) -> list[dict]:
    exprs = [e.strip() for e in expressions if e.strip()][:4] or ["0"]
    return [_task(f"Compute step {i + 1} of the problem", "calculate", {"expression": e}, i,
                  [f"t{i}"] if i else None) for i, e in enumerate(exprs)]


def rows(base: Path = DEFAULT_DIR):
    """Yield labelled rows: {source, lang, query, need (tool name, "" for none), plan}."""
    def out(source, query, need, plan=None, lang="en"):
        return {"source": source, "lang": lang, "query": query, "need": need, "plan": plan}

    for r in _jsonl(base / "ddg_goodies_tool_queries" / "ddg_goodies_tool_queries.jsonl"):
        if r["triggers"]:
            tool = DDG_TOOL[r["tool"]]
            yield out(f"ddg:{r['tool']}", r["query"], tool, _ddg_plan(r, tool))
        else:
            yield out("ddg:neg", r["query"], "")
    for r in _jsonl(base / "gsm8k" / "test.jsonl"):
        yield out("gsm8k", r["question"], "calculate", _calc_plan(r["question"], _CALC.findall(r["answer"])))
    for r in json.loads((base / "svamp" / "SVAMP.json").read_text(encoding="utf-8")):
        q = f"{r['Body'].strip()} {r['Question'].strip()}"
        yield out("svamp", q, "calculate", _calc_plan(q, [r["Equation"]]))
    for lang in ("en", "de"):
        with open(base / "mgsm" / f"mgsm_{lang}.tsv", encoding="utf-8") as f:
            for line in f:
                q, _, answer = line.rstrip("\n").rpartition("\t")
                yield out(f"mgsm_{lang}", q, "calculate", _calc_plan(q, [answer]), lang)
    bbh = base / "bbh"
    for ex in json.loads((bbh / "multistep_arithmetic_two.json").read_text(encoding="utf-8"))["examples"]:
        q = ex["input"]
        yield out("bbh:arith", q, "calculate", _calc_plan(q, [q.rstrip("= ")]))
    for ex in json.loads((bbh / "date_understanding.json").read_text(encoding="utf-8"))["examples"]:
        q = ex["input"].split("\nOptions:")[0].strip()
        yield out("bbh:date", q, "date_add", [_task(f"Shift the date: {q}", "date_add",
                                                    {"base_date": "2021-09-07", "days": 1})])
    nlu = base / "nlu_evaluation_data" / "NLU-Data-Home-Domain-CV-testsets-merged.csv"
    seen = set()
    with open(nlu, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            q = r["answer_from_user"].strip()
            if not q or q == "null" or q.lower() in seen:
                continue
            seen.add(q.lower())
            if r["intent"] == "maths" and r["scenario"] == "qa":
                if _NUMBER.search(q):  # the "maths" label covers sums and unit conversions alike: no plan
                    yield out("nlu:maths", q, "calculate|unit_convert")
            elif r["intent"] not in ("convert", "currency"):
                yield out("nlu:other", q, "")
    for r in _jsonl(base / "nq_open" / "NQ-open.dev.jsonl"):
        yield out("nq_open", r["question"], "")
    xq = json.loads((base / "xquad_de" / "xquad.de.json").read_text(encoding="utf-8"))
    for art in xq["data"]:
        for p in art["paragraphs"]:
            for qa in p["qas"]:
                yield out("xquad_de", qa["question"], "", lang="de")
    with open(base / "nf_cats" / "test.csv", encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            yield out("nf_cats", r["question"], "")
    for r in json.loads((base / "conala" / "conala-test.json").read_text(encoding="utf-8")):
        yield out("conala", r["intent"], "")
    skip = {"math", "reasoning", "fermi"}
    for folder, lang in (("fastchat_mt_bench", "en"), ("mt_bench_x_de", "de"), ("fastchat_vicuna_bench", "en")):
        for r in _jsonl(base / folder / "question.jsonl"):
            if r["category"] not in skip:
                yield out(folder, r["turns"][0], "", lang=lang)
    for name in ("seed_tasks.jsonl", "user_oriented_instructions.jsonl"):
        for r in _jsonl(base / "self_instruct" / name):
            yield out("self_instruct", r["instruction"], "")


def labelled(base: Path = DEFAULT_DIR) -> list[dict]:
    """The rows with a running index per source and the tune/report split (even/odd within a source)."""
    counts: dict[str, int] = {}
    result = []
    for r in rows(base):
        i = counts.get(r["source"], 0)
        counts[r["source"]] = i + 1
        r["split"] = "tune" if i % 2 == 0 else "report"
        result.append(r)
    return result


def pii_corpus(base: Path = DEFAULT_DIR):
    """Every query text the sources hold (labelled or not), for the PII false-flag rate."""
    for r in rows(base):
        yield r["query"]
    for r in _jsonl(base / "math500" / "test.jsonl"):
        yield r["problem"]
    for v in ("v0.1", "v2.0"):
        for r in _jsonl(base / "arena_hard_auto" / v / "question.jsonl"):
            yield r["prompt"]
    for f in sorted((base / "routellm_evals" / "mmlu").glob("*.csv")):
        with open(f, encoding="utf-8", newline="") as fh:
            for r in csv.DictReader(fh):
                yield r["prompt"]
    for name in ("train.csv", "valid.csv"):
        with open(base / "nf_cats" / name, encoding="utf-8", newline="") as f:
            for r in csv.DictReader(f):
                yield r["question"]
    for folder in ("fastchat_mt_bench", "mt_bench_x_de", "fastchat_vicuna_bench"):
        for r in _jsonl(base / folder / "question.jsonl"):
            yield from r["turns"]
    xq = json.loads((base / "xquad_de" / "xquad.de.json").read_text(encoding="utf-8"))
    for art in xq["data"]:
        for p in art["paragraphs"]:
            yield p["context"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    data = labelled(args.queries)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for r in data:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    need = sum(1 for r in data if r["need"])
    print(f"rows={len(data)} need_tool={need} need_none={len(data) - need} written={args.out}")


if __name__ == "__main__":
    main()
