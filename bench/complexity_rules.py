"""What the complexity rules (moe-complexity@1, CPLX001-CPLX006) do on real queries nobody wrote for them.

    .venv/bin/python bench/complexity_rules.py [--queries DIR] [--rules FILE] [--show N]

Sources (DIR: $MASHBILL_QUERIES_DIR or /work/shared/data/queries-dev; each folder's SOURCE.txt names its origin):
- recall follow-ups: MT-Bench turn 2, English (fastchat_mt_bench) and German (mt_bench_x_de). They build on the
  first turn ("Now rewrite it ...") without always asking about it, so a low hit share is expected; the hits are
  printed with --show for a reader to judge.
- standalone queries (a recall cue on them is a false trigger): MT-Bench turn 1 (EN, DE), xquad_de questions (German,
  where the broad "wie war" is common), nq_open, nlu_evaluation_data, arena_hard (v0.1, v2.0), MATH-500, BBH.
- short factual lookups: nq_open questions and nlu_evaluation_data utterances (intent qa_*). The intended effect:
  the share on which a `complex` label is rejected (CPLX005).
- long or hard requests: arena_hard, MATH-500 level 4-5, BBH date_understanding. The share on which a `complex`
  label is rejected by any rule must be near 0.

Tune on the even rows of each source, report on the odd rows. One line per split and per source; the LAST line is
the report split: `recall_phrase_hits= broad_phrase_hits= recall_false_trigger= broad_false_trigger= short_factual_complex_reject=
complex_false_reject= trivial_false_reject= rows=`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
from collections import defaultdict
from pathlib import Path

DEFAULT_DIR = Path(os.environ.get("MASHBILL_QUERIES_DIR", "/work/shared/data/queries-dev"))
RULES = Path(__file__).resolve().parents[1] / "specs" / "library" / "shared" / "rules" / "moe-complexity@1.yaml"


def _jsonl(path: Path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def load(d: Path) -> list[dict]:
    """Rows {source, role, query}; role: followup | standalone | lookup | hard (a row may be in several roles)."""
    rows: list[dict] = []

    def add(source, roles, items):
        for i, q in enumerate(items):
            if q and q.strip():
                rows.append({"source": source, "roles": roles, "query": q.strip(),
                             "split": "tune" if i % 2 == 0 else "report"})

    for name, src in (("mt_bench_en", "fastchat_mt_bench"), ("mt_bench_de", "mt_bench_x_de")):
        qs = list(_jsonl(d / src / "question.jsonl"))
        add(f"{name}_turn1", ("standalone",), [q["turns"][0] for q in qs])
        add(f"{name}_turn2", ("followup",), [q["turns"][1] for q in qs if len(q["turns"]) > 1])
    squad = json.loads((d / "xquad_de" / "xquad.de.json").read_text(encoding="utf-8"))
    add("xquad_de", ("standalone",), [qa["question"] for art in squad["data"] for p in art["paragraphs"]
                                       for qa in p["qas"]])
    add("nq_open", ("standalone", "lookup"), [r["question"] for r in _jsonl(d / "nq_open" / "NQ-open.dev.jsonl")])
    seen, nlu = set(), []
    with open(d / "nlu_evaluation_data" / "NLU-Data-Home-Domain-CV-testsets-merged.csv", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["answerid"] not in seen and r["scenario"] == "qa":
                seen.add(r["answerid"])
                nlu.append(r["answer_from_anno"])
    add("nlu_qa", ("standalone", "lookup"), nlu)
    add("arena_hard", ("standalone", "hard"), [r["prompt"] for v in ("v0.1", "v2.0")
                                               for r in _jsonl(d / "arena_hard_auto" / v / "question.jsonl")])
    add("math500_l45", ("standalone", "hard"), [r["problem"] for r in _jsonl(d / "math500" / "test.jsonl")
                                                if int(r.get("level", 0)) >= 4])
    bbh = json.loads((d / "bbh" / "date_understanding.json").read_text(encoding="utf-8"))
    add("bbh_date", ("standalone", "hard"), [e["input"] for e in bbh["examples"]])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--rules", type=Path, default=RULES)
    ap.add_argument("--show", type=int, default=0, help="print up to N examples per finding")
    ap.add_argument("--split", default="tune", help="split whose examples --show prints (tune: do not read report)")
    args = ap.parse_args()

    from mashbill.validators.complexity.complexity import analyze, check_complexity
    from mashbill.validators.complexity.complexity_rules import load_complexity_rules

    rs = load_complexity_rules(args.rules)
    rows = load(args.queries)
    stats = defaultdict(lambda: [0, 0])  # (key, metric) -> [hits, total]
    shown = defaultdict(list)

    def count(r, metric, hit, why=""):
        for key in ("all", r["split"], r["source"]):
            s = stats[(key, metric)]
            s[0] += bool(hit)
            s[1] += 1
        if hit and r["split"] == args.split and len(shown[(r["source"], metric)]) < args.show:
            shown[(r["source"], metric)].append(f"{why} | {r['query'][:160]!r}")

    def rejected(query, label):
        return [v for v in check_complexity(rs, query, {"complexity": label}) if v.severity == "reject"]

    for r in rows:
        f = analyze(rs, r["query"])
        if "followup" in r["roles"]:
            count(r, "recall_phrase_hits", f.hit("recall"), f.hit("recall"))
            count(r, "broad_phrase_hits", f.hit("recall_broad"), f.hit("recall_broad"))
        if "standalone" in r["roles"]:
            count(r, "recall_false_trigger", f.hit("recall"), f.hit("recall"))
            count(r, "broad_false_trigger", f.hit("recall_broad"), f.hit("recall_broad"))
        if "lookup" in r["roles"]:
            v = rejected(r["query"], "complex")
            count(r, "short_factual_complex_reject", v, ",".join(x.code for x in v))
            v = rejected(r["query"], "trivial")
            count(r, "trivial_false_reject", v, ",".join(x.code for x in v))
        if "hard" in r["roles"]:
            v = rejected(r["query"], "complex")
            count(r, "complex_false_reject", v, "; ".join(x.detail for x in v))

    metrics = ["recall_phrase_hits", "broad_phrase_hits", "recall_false_trigger", "broad_false_trigger", "short_factual_complex_reject",
               "complex_false_reject", "trivial_false_reject"]

    def line(key: str) -> str:
        parts = []
        for m in metrics:
            h, n = stats[(key, m)]
            if n:
                parts.append(f"{m}={h / n:.4f}")
        return " ".join(parts) + f" rows={sum(1 for r in rows if key in ('all', r['split'], r['source']))}"

    for (src, metric), ex in sorted(shown.items()):
        print(f"-- {src} {metric} ({args.split} split)")
        for e in ex:
            print(f"   {e}")
    for key in sorted({r["source"] for r in rows}):
        detail = " ".join(f"{m}={stats[(key, m)][0]}/{stats[(key, m)][1]}" for m in metrics if stats[(key, m)][1])
        print(f"source={key:22s} {detail}")
    print(f"split=tune   {line('tune')}")
    print(f"split=report {line('report')}")
    print(line("report"))


if __name__ == "__main__":
    main()
