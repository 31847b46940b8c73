"""Category fit for creative writing (FIT001), translation (FIT002), recall questions (FIT003) and search-query text
(PLAN009) on real public queries.

    .venv/bin/python bench/fit.py [--queries DIR] [--show N]

Labels come from the sources, never from our triggers:
- creative (FIT001 should fire): Arena-Hard v2.0 `creative_writing` prompts (in many languages, and with role-play,
  dialogues and scripts that no narrow trigger names: recall is also printed for the Latin-script prompts);
- loose (printed apart, in neither rate): MT-Bench and MT-Bench-DE `writing` first turns and the Self-Instruct
  instructions whose app `self_instruct_app_to_expert.csv` proposes as creative_writing: read by eye, they are
  e-mails, headlines, blog posts, captions and edits, not poems or stories;
- not creative (FIT001 must not fire): Arena-Hard v2.0 coding and maths, MT-Bench / MT-Bench-DE first turns outside
  writing and roleplay, NQ-open, GSM8K, CoNaLa titles, XQuAD-de questions, the other Self-Instruct instructions.
A creative query fires when the query's triggers find a creative-writing request; a non-creative one when they do.

PLAN009 is measured on plans built from real text: every NQ-open question, CoNaLa title, XQuAD-de question and GSM8K
question used as a research task's search_query (a user's own words: none may be rejected), and the same texts'
content words joined as snake_case and camelCase (each must be rejected).

FIT002 (translation request) and FIT003 (a question about an earlier turn), labels again from the sources:
- translation requests: the Self-Instruct seed tasks whose task name says translation, and the Duolingo instance
  that asks "How do you say ... in French" (queries-dev holds no more: recall rests on 3 rows, printed as such);
- recall: MT-Bench and MT-Bench-DE second turns. They build on the first turn but most do not ask what was said
  ("Now rewrite it as a limerick"), so their hit rate is a floor, not a recall: printed as `fit003_followup_hits`;
- false triggers of both: every negative row above (the creative ones excluded), all first turns.

One line per source and per split (tune = even rows of each source, report = odd rows), then the last line over all
rows: `fit001_recall=R fit001_false_trigger=F plan009_false_reject=X plan009_identifier_recall=Y
fit002_recall=R2 fit002_false_trigger=F2 fit003_followup_hits=H fit003_false_trigger=F3 fit004_medical_hits=M
fit004_medical_false_trigger=FM fit004_code_hits=C fit004_code_false_trigger=FC rows=N`.

FIT004 (a request that plainly needs a shown category; moe-routing@5 lists medical_consult and code_reviewer): rows
labelled as needing it are the Arena-Hard v0.1 prompts of the clusters its cluster-to-expert table maps to that
category (plus MMLU clinical knowledge for medical, Arena-Hard v2.0 coding and CoNaLa for code; their hit rate is a
floor, the triggers are narrow on purpose); false triggers are counted on the sources that plainly need another
category (the other clusters, MT-Bench first turns, GSM8K, XQuAD-de ...); NQ-open hits are printed apart, to read.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trigger_set import DEFAULT_DIR, _jsonl  # noqa: E402


def _creative_apps(base: Path) -> set[str]:
    with open(base / "self_instruct_app_to_expert.csv", encoding="utf-8") as f:
        return {r["motivation_app"] for r in csv.DictReader(f) if r["proposed_expert"] == "creative_writing"}


def creative_rows(base: Path = DEFAULT_DIR) -> list[dict]:
    """{source, query, creative, split} for every labelled row."""
    out: list[dict] = []

    def add(source: str, texts, creative: bool) -> None:
        for i, t in enumerate(texts):
            if isinstance(t, str) and t.strip():
                out.append({"source": source, "query": t, "creative": creative,
                            "split": "tune" if i % 2 == 0 else "report"})

    arena = list(_jsonl(base / "arena_hard_auto" / "v2.0" / "question.jsonl"))
    add("arena_v2_creative", [r["prompt"] for r in arena if r.get("subcategory") == "creative_writing"], True)
    add("arena_v2_coding_math", [r["prompt"] for r in arena if r.get("subcategory") in ("coding", "math")], False)
    for name, folder in (("mt_bench", "fastchat_mt_bench"), ("mt_bench_de", "mt_bench_x_de")):
        rows = list(_jsonl(base / folder / "question.jsonl"))
        add(f"{name}_writing", [r["turns"][0] for r in rows if r["category"] == "writing"], None)
        add(f"{name}_other", [r["turns"][0] for r in rows if r["category"] not in ("writing", "roleplay")], False)
    apps = _creative_apps(base)
    si = list(_jsonl(base / "self_instruct" / "user_oriented_instructions.jsonl"))
    add("self_instruct_creative_app", [r["instruction"] for r in si if r["motivation_app"] in apps], None)
    add("self_instruct_other", [r["instruction"] for r in si if r["motivation_app"] not in apps], False)
    for name, texts in _plain_questions(base).items():
        add(name, texts, False)
    return out


def _plain_questions(base: Path) -> dict[str, list[str]]:
    conala = json.loads((base / "conala" / "conala-test.json").read_text(encoding="utf-8"))
    xquad = json.loads((base / "xquad_de" / "xquad.de.json").read_text(encoding="utf-8"))
    return {
        "nq_open": [r["question"] for r in _jsonl(base / "nq_open" / "NQ-open.dev.jsonl")],
        "gsm8k": [r["question"] for r in _jsonl(base / "gsm8k" / "test.jsonl")],
        "conala": [r["intent"] for r in conala],
        "xquad_de": [q["question"] for a in xquad["data"] for p in a["paragraphs"] for q in p["qas"]],
    }


def translation_rows(base: Path = DEFAULT_DIR) -> list[str]:
    """Real translation requests, labelled by their source (a task name, an app's instance), never by our triggers."""
    seeds = [r["instruction"] for r in _jsonl(base / "self_instruct" / "seed_tasks.jsonl") if "translation" in r["name"]]
    duo = [i["input"] for r in _jsonl(base / "self_instruct" / "user_oriented_instructions.jsonl")
           if r["motivation_app"] == "Doulingo" for i in r["instances"] if str(i["input"]).lower().startswith("how do you say")]
    return seeds + duo


def followup_rows(base: Path = DEFAULT_DIR) -> list[str]:
    """MT-Bench (EN, DE) second turns: they build on the first turn (some ask what was said)."""
    return [r["turns"][1] for folder in ("fastchat_mt_bench", "mt_bench_x_de")
            for r in _jsonl(base / folder / "question.jsonl") if len(r["turns"]) > 1]


def category_rows(base: Path = DEFAULT_DIR) -> dict[str, dict[str, list[str]]]:
    """FIT004 (category-fit): per category, rows its source labels as needing it (`pos`) and rows from sources that
    plainly do not (`neg`); labels from the sources (a topic cluster, a benchmark category), never our triggers."""
    clusters = {}
    with open(base / "arena_hard_v0.1_cluster_to_expert.csv", encoding="utf-8") as f:
        clusters = {r["cluster"]: r["proposed_expert"] for r in csv.DictReader(f)}
    v01 = list(_jsonl(base / "arena_hard_auto" / "v0.1" / "question.jsonl"))
    v2 = list(_jsonl(base / "arena_hard_auto" / "v2.0" / "question.jsonl"))
    mt = [(r["category"], r["turns"][0]) for folder in ("fastchat_mt_bench", "mt_bench_x_de")
          for r in _jsonl(base / folder / "question.jsonl")]
    plain = _plain_questions(base)
    with open(base / "routellm_evals" / "mmlu" / "mmlu_clinical_knowledge.csv", encoding="utf-8") as f:
        clinical = [r["prompt"] for r in csv.DictReader(f)]
    return {
        "medical_consult": {
            "pos": [r["prompt"] for r in v01 if clusters.get(r["cluster"]) == "medical"] + clinical,
            "neg": [r["prompt"] for r in v01 if clusters.get(r["cluster"]) not in ("medical", None)]
                   + [r["prompt"] for r in v2] + [t for _, t in mt] + plain["gsm8k"] + plain["conala"]
                   + plain["xquad_de"],
            "nq_open": plain["nq_open"]},
        "code_reviewer": {
            "pos": [r["prompt"] for r in v01 if clusters.get(r["cluster"]) == "code"]
                   + [r["prompt"] for r in v2 if r.get("subcategory") == "coding"] + plain["conala"],
            "neg": [r["prompt"] for r in v01 if clusters.get(r["cluster"]) not in ("code", "data_analysis",
                                                                                    "technical_support", None)]
                   + [r["prompt"] for r in v2 if r.get("subcategory") != "coding"]
                   + [t for c, t in mt if c != "coding"] + plain["gsm8k"] + plain["xquad_de"],
            "nq_open": plain["nq_open"]},
    }


_NAMES_FORM = re.compile(r"(?i)\b(?:poem|poet|song|lyrics|story|stories|novel|gedicht|lied|geschichte|roman|märchen)")
_WORD = re.compile(r"[^\W_]+")


def identifiers(text: str) -> tuple[str, str]:
    """The text's words as snake_case and camelCase (what the quick start's teacher wrote: capital_of_canada)."""
    words = [w.lower() for w in _WORD.findall(text)][:6]
    return "_".join(words), words[0] + "".join(w.capitalize() for w in words[1:]) if words else ""


def _latin(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(c < "\u0250" for c in letters) / len(letters) > 0.95


def _rate(a: int, b: int) -> float:
    return a / b if b else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--show", type=int, default=0, help="print up to N misses, false triggers and false rejects")
    args = ap.parse_args()

    from mashbill.validators.plans.ruleset import load_ruleset
    from mashbill.validators.plans.triggers import triggers_for

    trig = triggers_for(load_ruleset())
    data = creative_rows(args.queries)
    t0 = time.perf_counter()
    stats = defaultdict(lambda: [0, 0])
    shown: dict[str, list[str]] = defaultdict(list)
    for r in data:
        term = trig.analyze(r["query"]).creative
        metric = {True: "recall", False: "false", None: "loose"}[r["creative"]]
        for k in ("all", r["split"], r["source"]):
            stats[k, metric][0] += bool(term)
            stats[k, metric][1] += 1
        if r["creative"] is None:
            if term:
                shown["loose"].append(f"{r['source']}: {r['query'][:140]!r} -> {term!r}")
        elif r["creative"] and not term:
            shown["miss"].append(f"{r['source']}: {r['query'][:140]!r}")
        elif term and not r["creative"]:
            shown["false"].append(f"{r['source']}: {r['query'][:140]!r} -> {term!r}")
        elif term:
            shown["hit"].append(f"{r['source']}: {term!r}")
    fit_s = time.perf_counter() - t0
    # the negatives that name a poem, song, story or lyrics (questions about them, "die Geschichte Roms"): the hard ones
    hard = [r for r in data if r["creative"] is False and _NAMES_FORM.search(r["query"])]
    hard_fired = sum(bool(trig.analyze(r["query"]).creative) for r in hard)

    # PLAN009: real texts as search queries (none rejected), their identifier forms (all rejected)
    q = defaultdict(lambda: [0, 0])
    for source, texts in _plain_questions(args.queries).items():
        for i, t in enumerate(texts):
            t = " ".join(t.split())
            split = "tune" if i % 2 == 0 else "report"
            bad = trig.run_together(t, "")
            for k in ("all", split, source):
                q[k, "false"][0] += bad
                q[k, "false"][1] += 1
            if bad:
                shown["plan009_false"].append(f"{source}: {t[:140]!r}")
            for ident in identifiers(t):
                if "_" not in ident and not re.search(r"[a-z][A-Z].*[A-Z]", ident):
                    continue  # one word: no identifier to find
                hit = trig.run_together(ident, t)
                for k in ("all", split):
                    q[k, "ident"][0] += hit
                    q[k, "ident"][1] += 1
                if not hit:
                    shown["plan009_miss"].append(f"{source}: {ident!r}")

    for kind in ("miss", "false", "hit", "loose", "plan009_false", "plan009_miss"):
        for line in shown[kind][:args.show]:
            print(f"[{kind}] {line}")

    def line(k: str) -> str:
        rec, fal = stats[k, "recall"], stats[k, "false"]
        parts = []
        if rec[1]:
            parts.append(f"fit_recall={_rate(*rec):.4f} ({rec[0]}/{rec[1]})")
        if stats[k, "loose"][1]:
            parts.append(f"loose_label_fired={stats[k, 'loose'][0]}/{stats[k, 'loose'][1]}")
        if fal[1]:
            parts.append(f"fit_false_trigger={_rate(*fal):.4f} ({fal[0]}/{fal[1]})")
        if q[k, "false"][1]:
            parts.append(f"plan009_false_reject={_rate(*q[k, 'false']):.4f} ({q[k, 'false'][0]}/{q[k, 'false'][1]})")
        if q[k, "ident"][1]:
            parts.append(f"plan009_identifier_recall={_rate(*q[k, 'ident']):.4f} ({q[k, 'ident'][0]}/{q[k, 'ident'][1]})")
        return " ".join(parts)

    for src in sorted({r["source"] for r in data}):
        print(f"{src:28s} {line(src)}")
    for split in ("tune", "report"):
        print(f"split={split:22s} {line(split)}")
    latin = [r for r in data if r["creative"] and _latin(r["query"])]
    hits = sum(bool(trig.analyze(r["query"]).creative) for r in latin)
    print(f"creative recall on Latin-script prompts: {_rate(hits, len(latin)):.4f} ({hits}/{len(latin)}); "
          f"triggers {fit_s * 1000 / max(len(data), 1):.3f} ms/query")
    print(f"hard negatives (name a poem, song, story, Geschichte ... without asking for one): "
          f"fired {hard_fired}/{len(hard)}")
    # FIT002 / FIT003: real translation requests and follow-up turns; false triggers on every non-creative row
    negatives = [r["query"] for r in data if r["creative"] is False]
    tr = translation_rows(args.queries)
    tr_hits = [trig.analyze(t).translation for t in tr]
    fu = followup_rows(args.queries)
    fu_hits = sum(trig.analyze(t).recall is not None for t in fu)
    tr_false, rc_false = [], []
    for t in negatives:
        a = trig.analyze(t)
        if a.translation:
            tr_false.append(f"{t[:140]!r} -> {a.translation[:60]!r}")
        if a.recall:
            rc_false.append(f"{t[:140]!r} -> {a.recall!r}")
    for kind, lines in (("fit002_miss", [t[:140] for t, h in zip(tr, tr_hits) if not h]),
                        ("fit002_false", tr_false), ("fit003_false", rc_false)):
        for ln in lines[:args.show]:
            print(f"[{kind}] {ln}")
    print(f"translation requests: fired {sum(map(bool, tr_hits))}/{len(tr)}; MT-Bench second turns with a recall "
          f"phrase: {fu_hits}/{len(fu)}; negatives: translation fired {len(tr_false)}/{len(negatives)}, "
          f"recall fired {len(rc_false)}/{len(negatives)}")
    # FIT004: per category of category_request, the trigger's hit rate on rows labelled as needing it (a floor: the
    # triggers are narrow on purpose) and its false rate on rows from sources that plainly do not; NQ-open apart (its
    # questions are of every kind: the hits are printed to be read)
    fit004, fit004_rows = {}, 0
    for cat, rows in category_rows(args.queries).items():
        if cat not in trig.categories:
            continue
        fired = {k: [t for t in v if cat in trig.analyze(t).categories] for k, v in rows.items()}
        fit004_rows += sum(map(len, rows.values()))
        fit004[cat] = (_rate(len(fired["pos"]), len(rows["pos"])), _rate(len(fired["neg"]), len(rows["neg"])))
        print(f"FIT004 {cat}: labelled rows fired {len(fired['pos'])}/{len(rows['pos'])}; plainly other rows fired "
              f"{len(fired['neg'])}/{len(rows['neg'])}; NQ-open fired {len(fired['nq_open'])}/{len(rows['nq_open'])}")
        for kind in ("neg", "nq_open"):
            for t in fired[kind][:args.show]:
                print(f"[fit004_{cat}_{kind}] {' '.join(t.split())[:140]!r} -> {trig.analyze(t).categories[cat]!r}")
    a = stats["all", "recall"], stats["all", "false"], q["all", "false"], q["all", "ident"]
    print(f"fit001_recall={_rate(*a[0]):.4f} fit001_false_trigger={_rate(*a[1]):.4f} "
          f"plan009_false_reject={_rate(*a[2]):.4f} plan009_identifier_recall={_rate(*a[3]):.4f} "
          f"fit002_recall={_rate(sum(map(bool, tr_hits)), len(tr)):.4f} "
          f"fit002_false_trigger={_rate(len(tr_false), len(negatives)):.4f} "
          f"fit003_followup_hits={_rate(fu_hits, len(fu)):.4f} "
          f"fit003_false_trigger={_rate(len(rc_false), len(negatives)):.4f} "
          + "".join(f"fit004_{c.split('_')[0]}_hits={h:.4f} fit004_{c.split('_')[0]}_false_trigger={f:.4f} "
                    for c, (h, f) in fit004.items())
          + f"rows={len(data) + a[2][1] + len(tr) + len(fu) + fit004_rows}")


if __name__ == "__main__":
    main()
