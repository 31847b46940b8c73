"""Does curation pay off on the student? One classifier recipe trained on all, gated and gated-minus-cleanlab labels.

    .venv/bin/python bench/curation_gain.py [--work DIR] [--threads 1] [--phase label|train|all] [--per-source-scale X]

1. label: draw real requests from queries-dev (DIR: $MASHBILL_QUERIES_DIR or /work/shared/data/queries-dev), per
   source by lowest sha256 of the text (not read first), leaving out every request of the complexity yardstick
   (tests/fixtures/complexity_labels/labels.jsonl), write them as the seeds of a draft complexity spec (the prompt,
   teacher, schema and rule set of complexity-moe@4, the embedded SmolLM2-135M teacher) and run `mashbill generate`
   on it into a store under --work (resumable: rerun the same command after a kill); the yardstick's requests are
   labelled the same way beside it (their own store, merged in).
2. train: three training sets from that store: (a) every parsed teacher label, (b) what the gate accepts (the
   spec's schema and complexity rules at generation, then `mashbill validate`: `Store.usable`), (c) (b) minus the records `mashbill cleanlab`
   flags (curation/label_issues.py: out-of-fold probabilities of MiniLM embeddings + logistic regression, pooled
   over the queries-dev and yardstick records). One recipe, the same three times: logistic regression (C=10) on
   normalised MiniLM embeddings, saved as an ONNX classifier (MiniLM's graph + one linear layer, with the
   mashbill.* metadata), evaluated with `mashbill eval MODEL --on yardstick:complexity` (the report half; the
   teacher's labels of those requests are in the store, so eval puts them beside the student).
   Flag precision: the flags on the yardstick's records (both halves, labelled by the same teacher in the same
   store, never trained on): a flag is right when the yardstick disagrees with the teacher's label.

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
    """The queries-dev draw and the yardstick itself (teacher_acc and the flags' precision are measured on it), each
    as its own draft spec, labelled side by side into two resumable stores (`store`, `store-yardstick`; the
    train phase merges the second into the first)."""
    seeds = draw(QDIR, scale)
    yard = [{"query": r["query"], "lang": r["lang"], "type": r["source"]} for r in yardstick_rows()]
    procs = []
    for name, rows, store in (("curation-gain-complexity", seeds, "store"),
                              ("curation-gain-yardstick", yard, "store-yardstick")):
        spec = write_spec(work, rows, name)
        print(f"{name}: seeds={len(rows)} spec={spec} store={work / store}", flush=True)
        procs.append(subprocess.Popen([*MASHBILL, "generate", str(spec), "--store", str(work / store), "--threads",
                                       str(threads), "--allow-unlocked", "--no-progress"]))
    if any(p.wait() for p in procs):
        sys.exit("a labelling run failed; rerun the same command to resume it")


CLASSES = ["trivial", "moderate", "complex", "memory_recall"]
C = 10.0  # the one recipe: logistic regression (C=10) on normalised MiniLM embeddings, the same for (a), (b), (c)


def linear_student(out: Path, encoder, texts: list[str], labels: list[str], vectors: dict | None = None) -> Path:
    """Fit the recipe and save it as an ONNX classifier `mashbill eval` and `mashbill predict` run: MiniLM's graph
    (factory.encoders.onnx_bert: mean pooling, L2 norm) + MatMul + Add -> logits, the mashbill.* metadata, tokenizer/."""
    import shutil

    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from sklearn.linear_model import LogisticRegression

    from mashbill.curation.label_issues import embed

    x = np.stack([vectors[t] for t in texts]) if vectors is not None else embed(texts, encoder)
    y = np.array([CLASSES.index(lab) for lab in labels])
    model = LogisticRegression(C=C, max_iter=5000).fit(x, y)
    w = np.zeros((x.shape[1], len(CLASSES)), np.float32)
    b = np.full(len(CLASSES), -1e4, np.float32)  # a class absent from the training rows is never predicted
    for j, k in enumerate(model.classes_):
        w[:, k] = model.coef_[j] if len(model.classes_) > 2 else (model.coef_[0] if j else -model.coef_[0])
        b[k] = model.intercept_[j] if len(model.classes_) > 2 else (model.intercept_[0] if j else -model.intercept_[0])
    g = onnx.load(str(encoder.onnx_path))
    emb = g.graph.output[0].name
    g.graph.initializer.extend([numpy_helper.from_array(w, "student_w"), numpy_helper.from_array(b, "student_b")])
    g.graph.node.extend([helper.make_node("MatMul", [emb, "student_w"], ["student_mm"]),
                         helper.make_node("Add", ["student_mm", "student_b"], ["logits"])])
    del g.graph.output[:]
    g.graph.output.extend([helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", len(CLASSES)])])
    meta = {"mashbill.id2label": json.dumps({i: c for i, c in enumerate(CLASSES)}),
            "mashbill.max_length": str(encoder.max_len), "mashbill.problem_type": "single_label_classification",
            "mashbill.lineage": json.dumps({"recipe": f"MiniLM mean-pooled + LogisticRegression(C={C})",
                                            "train_rows": len(texts), "encoder": encoder.revision})}
    for k, v in meta.items():
        g.metadata_props.add(key=k, value=v)
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(g, str(out / "model.onnx"))
    (out / "tokenizer").mkdir(exist_ok=True)
    shutil.copy(encoder.folder / "tokenizer.json", out / "tokenizer" / "tokenizer.json")
    return out / "model.onnx"


def evaluate(model: Path, store: Path) -> dict:
    """`mashbill eval MODEL --on yardstick:complexity --store STORE --json` (the report half)."""
    proc = subprocess.run([*MASHBILL, "eval", str(model), "--on", "yardstick:complexity", "--store", str(store),
                           "--json"], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"mashbill eval failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)["sets"]["yardstick:complexity"]


def train_and_eval(work: Path, folds: int) -> None:
    from mashbill.curation.label_issues import flag_store, labelled_records
    from mashbill.factory.encoders.embeddings import Encoder
    from mashbill.factory.store import Store
    from mashbill.specs.loader import load_spec

    store_path = work / "store"
    bench = load_spec(work / "curation-gain-complexity@4.yaml")
    yard = load_spec(work / "curation-gain-yardstick@4.yaml")
    gold = {r["query"]: r["label"] for r in yardstick_rows()}
    if (work / "store-yardstick").is_dir():  # merging again is a no-op
        subprocess.run([*MASHBILL, "merge", str(store_path), str(work / "store-yardstick")], check=True,
                       stdout=subprocess.DEVNULL)
    # the gate: generation's schema and complexity rules, then `mashbill validate` (spans, duplicates, PII, ...)
    # (--audit-sample 0: no llama.cpp cross-check of the span audit, which only costs time here)
    subprocess.run([*MASHBILL, "validate", str(bench.path), "--store", str(store_path), "-q", "--audit-sample", "0"],
                   check=True, stdout=subprocess.DEVNULL)
    with Store.open(store_path) as store:
        recs, labels, _ = labelled_records(store, bench)
        usable = {st.record.id for st in store.usable(bench.hash) if st.usability.usable}
        requested = len(store.records(bench.hash))
        flags = flag_store(store, [bench, yard], folds=folds)
        yrecs, ylabels, _ = labelled_records(store, yard)
    flagged = set(flags["flagged_ids"])
    sets = {"all": [(r.input["query"], lab) for r, lab in zip(recs, labels)],
            "gated": [(r.input["query"], lab) for r, lab in zip(recs, labels) if r.id in usable],
            "gated_cleanlab": [(r.input["query"], lab) for r, lab in zip(recs, labels)
                               if r.id in usable and r.id not in flagged]}
    print(f"store={store_path} requested={requested} parsed={len(recs)} gated={len(sets['gated'])} "
          f"cleanlab_flags={flags['flagged']} of {flags['records']} pooled ({flags['folds']}-fold), "
          f"gated_flagged={len(sets['gated']) - len(sets['gated_cleanlab'])}", flush=True)
    from collections import Counter

    for name, rows in sets.items():
        print(f"  train {name}: {len(rows)} rows {dict(Counter(lab for _, lab in rows))}", flush=True)
    # flag precision on the yardstick (both halves): a flag is right when the yardstick disagrees with the teacher
    ywrong = [r.input["query"] for r, lab in zip(yrecs, ylabels) if gold.get(r.input["query"]) != lab]
    yflag = [(r.input["query"], lab) for r, lab in zip(yrecs, ylabels) if r.id in flagged]
    right = sum(gold.get(q) != lab for q, lab in yflag)
    precision = right / len(yflag) if yflag else float("nan")
    print(f"yardstick: {len(yrecs)} teacher labels, {len(ywrong)} wrong ({len(ywrong) / max(1, len(yrecs)):.3f}); "
          f"cleanlab flagged {len(yflag)}, {right} of them wrong labels: precision {precision:.3f}, recall "
          f"{right / max(1, len(ywrong)):.3f}", flush=True)
    encoder = Encoder.load(threads=1)
    from mashbill.curation.label_issues import embed

    texts = sorted({q for q, _ in sets["all"]})
    vectors = dict(zip(texts, embed(texts, encoder)))  # one embedding pass for the three students
    acc = {}
    for name, rows in sets.items():
        model = linear_student(work / "students" / name, encoder, [q for q, _ in rows], [lab for _, lab in rows],
                               vectors)
        res = evaluate(model, store_path)
        acc[name] = res["student"]["accuracy"]
        print(f"  {name}: accuracy {res['student']['accuracy']} macro_f1 {res['student']['macro_f1']} "
              f"ece {res['student']['ece']} (eval.json in {model.parent})", flush=True)
    base = res["baselines"]
    teacher = res["teacher"]
    print(f"baselines on the report half ({res['rows']} rows): heuristic {base['heuristic']['accuracy']}, "
          f"majority ({base['majority']['label']}, of the set) {base['majority']['accuracy']}; teacher "
          f"{teacher.get('accuracy')} on {teacher['rows']} rows", flush=True)
    print(f"all_acc={acc['all']:.3f} gated_acc={acc['gated']:.3f} gated_cleanlab_acc={acc['gated_cleanlab']:.3f} "
          f"baseline_acc={base['heuristic']['accuracy']:.3f} teacher_acc={teacher.get('accuracy', float('nan')):.3f} "
          f"train_rows_all={len(sets['all'])} train_rows_gated={len(sets['gated'])} flag_precision={precision:.3f}")


def main() -> None:
    from mashbill.paths import cache_dir

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=cache_dir("bench", "curation-gain"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--phase", default="all", choices=("label", "train", "all"))
    ap.add_argument("--per-source-scale", type=float, default=1.1)
    ap.add_argument("--folds", type=int, default=5)
    args = ap.parse_args()
    if args.phase in ("label", "all"):
        label(args.work, args.threads, args.per_source_scale)
    if args.phase in ("train", "all"):
        train_and_eval(args.work, args.folds)


if __name__ == "__main__":
    main()
