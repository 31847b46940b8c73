"""Does curation pay off on the student? One classifier recipe trained on all, gated and gated-minus-cleanlab labels.

    .venv/bin/python bench/curation_gain.py [--work DIR] [--threads 1] [--phase label|train|all] [--per-source-scale X]

1. label: draw real requests from queries-dev (DIR: $MASHBILL_QUERIES_DIR or /work/shared/data/queries-dev), per
   source by lowest sha256 of the text (not read first), leaving out every request of the complexity yardstick
   (tests/fixtures/complexity_labels/labels.jsonl), write them as the seeds of a draft complexity spec (the prompt,
   teacher, schema and rule set of complexity-moe@4, the embedded SmolLM2-135M teacher) and run `mashbill generate`
   on it into a store under --work (resumable: rerun the same command after a kill).
2. train: `mashbill validate`, then three snapshot-like training sets from the same store: (a) every parsed teacher
   label, (b) what the gate accepts (`Store.usable`, no reject verdict), (c) (b) minus the records cleanlab flags
   (curation.label_issues: out-of-fold probabilities of MiniLM embeddings + logistic regression). The same recipe
   (MiniLM mean-pooled embeddings + logistic regression, `mashbill.curation.label_issues.EmbeddingLogReg`) is fitted
   on each, saved as a run folder, and evaluated with `mashbill eval RUN --on yardstick:complexity` (the report half).
   Flag precision: on the requests of (b) that are also... none are (the yardstick is excluded), so it is measured by
   running the same cleanlab pass over the yardstick itself labelled by the teacher (report + tune halves): a flag is
   right when the yardstick disagrees with the teacher's label.

The LAST line: `all_acc= gated_acc= gated_cleanlab_acc= baseline_acc= teacher_acc= train_rows_all=
train_rows_gated= flag_precision=`.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QDIR = Path(os.environ.get("MASHBILL_QUERIES_DIR", "/work/shared/data/queries-dev"))
YARDSTICK = ROOT / "tests" / "fixtures" / "complexity_labels" / "labels.jsonl"
LIB = ROOT / "specs" / "library"
MASHBILL = [sys.executable, "-m", "mashbill"]

# requests per source: about 6.5 times the yardstick's mix (its README), more short lookups
PER_SOURCE = {"nq_open": 150, "nlu_evaluation_data": 130, "ddg_goodies": 90, "gsm8k": 55, "mgsm_de": 35,
              "math500": 65, "arena_hard": 140, "self_instruct": 90, "conala": 65, "mt_bench_en": 50,
              "mt_bench_de": 50, "vicuna_bench": 40, "xquad_de": 55, "bbh_date": 30, "nf_cats": 40}
MAX_CHARS = 4000   # the teacher's n_ctx is 4096 tokens, its system prompt about 900 of them


def _jsonl(path: Path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def sources(d: Path) -> dict[str, list[tuple[str, str]]]:
    """source -> [(query, lang)] from the queries-dev folders."""
    out: dict[str, list[tuple[str, str]]] = {}
    out["nq_open"] = [(r["question"], "en") for r in _jsonl(d / "nq_open" / "NQ-open.dev.jsonl")]
    seen, nlu = set(), []
    with open(d / "nlu_evaluation_data" / "NLU-Data-Home-Domain-CV-testsets-merged.csv", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r["answerid"] not in seen:
                seen.add(r["answerid"])
                nlu.append((r["answer_from_anno"], "en"))
    out["nlu_evaluation_data"] = nlu
    out["ddg_goodies"] = [(r["query"], "en") for r in _jsonl(d / "ddg_goodies_tool_queries" /
                                                             "ddg_goodies_tool_queries.jsonl")]
    out["gsm8k"] = [(r["question"], "en") for r in _jsonl(d / "gsm8k" / "test.jsonl")]
    with open(d / "mgsm" / "mgsm_de.tsv", encoding="utf-8") as f:
        out["mgsm_de"] = [(line.split("\t")[0], "de") for line in f if line.strip()]
    out["math500"] = [(r["problem"], "en") for r in _jsonl(d / "math500" / "test.jsonl")]
    out["arena_hard"] = [(r["prompt"], "en") for v in ("v0.1", "v2.0")
                         for r in _jsonl(d / "arena_hard_auto" / v / "question.jsonl")]
    si = []
    for name in ("seed_tasks.jsonl", "user_oriented_instructions.jsonl"):
        for r in _jsonl(d / "self_instruct" / name):
            inst = r["instances"][0]["input"] if r.get("instances") else ""
            si.append((r["instruction"] + (f"\n\n{inst}" if inst else ""), "en"))
    out["self_instruct"] = si
    out["conala"] = [(r["intent"], "en") for r in json.loads((d / "conala" / "conala-test.json").read_text("utf-8"))]
    out["mt_bench_en"] = [(q["turns"][0], "en") for q in _jsonl(d / "fastchat_mt_bench" / "question.jsonl")]
    out["mt_bench_de"] = [(q["turns"][0], "de") for q in _jsonl(d / "mt_bench_x_de" / "question.jsonl")]
    out["vicuna_bench"] = [(q["turns"][0], "en") for q in _jsonl(d / "fastchat_vicuna_bench" / "question.jsonl")]
    squad = json.loads((d / "xquad_de" / "xquad.de.json").read_text(encoding="utf-8"))
    out["xquad_de"] = [(qa["question"], "de") for art in squad["data"] for p in art["paragraphs"] for qa in p["qas"]]
    bbh = json.loads((d / "bbh" / "date_understanding.json").read_text(encoding="utf-8"))
    out["bbh_date"] = [(e["input"], "en") for e in bbh["examples"]]
    with open(d / "nf_cats" / "test.csv", encoding="utf-8") as f:
        out["nf_cats"] = [(r["question"], "en") for r in csv.DictReader(f)]
    return out


def draw(d: Path, scale: float = 1.0) -> list[dict]:
    """Seeds: per source the requests with the lowest sha256, none of the yardstick's, deduplicated."""
    yard = {json.loads(line)["query"].strip() for line in YARDSTICK.read_text("utf-8").splitlines() if line.strip()}
    seen: set[str] = set(yard)
    rows = []
    for src, items in sources(d).items():
        cands = sorted({(hashlib.sha256(q.strip().encode()).hexdigest(), q.strip(), lang) for q, lang in items
                        if q and q.strip() and len(q.strip()) <= MAX_CHARS})
        n = 0
        for _, q, lang in cands:
            if n >= round(PER_SOURCE[src] * scale):
                break
            if q in seen:
                continue
            seen.add(q)
            rows.append({"query": q, "lang": lang, "type": src})
            n += 1
    return rows


def write_spec(work: Path, seeds: list[dict], name: str = "curation-gain-complexity") -> Path:
    """A draft complexity spec `name` over `seeds`, with complexity-moe@4's prompt, teacher, schema and rules (the
    accept-rate guard off: the gate rejects most of this teacher's labels, which is what the bench measures)."""
    work.mkdir(parents=True, exist_ok=True)
    seeds_path = work / f"{name}.seeds.jsonl"
    seeds_path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in seeds), "utf-8")
    base = (LIB / "complexity" / "complexity-moe@4.yaml").read_text("utf-8")
    spec = base.replace("name: complexity-moe", f"name: {name}", 1)
    spec = spec.replace("path: ../seeds/moe-seeds.jsonl", f"path: {seeds_path}")
    spec += "guards:\n  accept_rate: {min_rate: 0.0}\n"
    for rel in ("../shared/prompts/", "../shared/schemas/", "../shared/rules/", "../shared/templates/"):
        spec = spec.replace(rel, str(LIB / "shared" / rel[len("../shared/"):]) + "/")
    path = work / f"{name}@4.yaml"
    path.write_text(spec, "utf-8")
    return path


def yardstick_rows() -> list[dict]:
    return [json.loads(line) for line in YARDSTICK.read_text("utf-8").splitlines() if line.strip()]


def label(work: Path, threads: int, scale: float) -> None:
    """The queries-dev draw, then the yardstick itself (teacher_acc and the flags' precision are measured on it),
    each as its own draft spec in one resumable store."""
    seeds = draw(QDIR, scale)
    yard = [{"query": r["query"], "lang": r["lang"], "type": r["source"]} for r in yardstick_rows()]
    for name, rows in (("curation-gain-complexity", seeds), ("curation-gain-yardstick", yard)):
        spec = write_spec(work, rows, name)
        print(f"{name}: seeds={len(rows)} spec={spec}", flush=True)
        subprocess.run([*MASHBILL, "generate", str(spec), "--store", str(work / "store"), "--threads",
                        str(threads), "--allow-unlocked", "--no-progress"], check=True)


def main() -> None:
    from mashbill.paths import cache_dir

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=cache_dir("bench", "curation-gain"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--phase", default="all", choices=("label", "train", "all"))
    ap.add_argument("--per-source-scale", type=float, default=1.1)
    args = ap.parse_args()
    if args.phase in ("label", "all"):
        label(args.work, args.threads, args.per_source_scale)
    if args.phase in ("train", "all"):
        from curation_gain_train import train_and_eval  # noqa: F401  (filled in below)


if __name__ == "__main__":
    main()
