"""Smaller ONNX INT8 students for the latency target: all-MiniLM-L6-v2 with k of its 6 layers vs all 6.

Every student is trained the same way (same rows, seed, batch and learning rate; the same steps unless a
student names its own, as the default `3:spread:600` does: a 3-layer step costs about half) on real
text nobody here wrote: the scenario labels (18 routing-like classes: alarm, calendar, qa, weather, ...) of
the NLU Evaluation Data (`/work/shared/data/queries-dev/nlu_evaluation_data`, CC-BY-4.0), deduplicated by
lower-cased text and split 80/20 by a hash of the text. The k-layer students are cut with the trainer's own
`student_layers` code (`trainers.methods.classify.keep_layers`), exported with the exporter's own code
(`exporters.onnx.onnx_export.export_classifier`: ONNX opset 18 -> onnxruntime dynamic INT8, per channel) and
checked with its parity code against their own PyTorch model. Latency is batch 1, one request after another,
the Rust tokenizer included (`OnnxPredictor.logits_one`), all students measured interleaved in rounds in one
process so that a busy machine slows them alike. `int8_pt` rows: the same graph quantized per tensor.

NLU queries are short (10-12 tokens); the target says "<= 64 tokens". So latency is also measured by token
length on real queries from other sources in `queries-dev` (nq_open, self_instruct, arena_hard, gsm8k,
mt_bench, German mt_bench and xquad; first user turn), bucketed by the student's own token count (1-16, 17-32,
33-64; longer inputs are cut at 64, as `OnnxPredictor` does, and fall in 33-64) plus `mix`: the same number of
queries from each source. `mix_agreement` is INT8 vs PyTorch labels on those queries (no gold labels there).
`--variants` adds static INT8 (QDQ, MatMul only, per channel, calibrated on training texts: s8s8 and u8s8) and
ONNX Runtime's BERT optimizer before dynamic INT8, measured in the same rounds.

`--narrow 3:256,3:192,...` adds narrow students (`student_layers` K, `student_width` HIDDEN, `student_ffn` FFN:
trainers/methods/narrow.py) distilled from `--teacher` (default the chosen student) as `distill_from` does
(trainers/methods/distill.py: alpha * CE + (1 - alpha) * T^2 * KL, the teacher's logits on the train rows computed once),
the same rows, batch, learning rate and steps as the teacher; each is exported and measured beside the others,
and its accuracy is compared with its teacher's (`*_drop_vs_teacher`, points). `--keep DIR` keeps the trained
runs and exports (a later run with the same DIR reuses them); `--reuse DIR` re-measures them and trains nothing.

Last line (machine-readable; onnx_* are the chosen student's, by default 3 layers x 600 steps; l6_* the 6-layer's
when it is among --students; per narrow student N: N_acc= N_drop_vs_teacher= N_agreement= N_int8_drop=
N_mix_agreement= N_p50_ms_1_16= N_p99_ms_1_16= ... N_p50_ms_mix= N_p99_ms_mix=):
  student_layers= onnx_int8_p50_ms= onnx_int8_p95_ms= onnx_int8_p99_ms= onnx_agreement= onnx_acc_drop=
  l6_p50_ms= l6_p95_ms= l6_p99_ms= l6_agreement= l6_acc_drop= acc_l6= acc_lK= ...
  int8_p50_ms_1_16= int8_p99_ms_1_16= ... _17_32= ... _33_64= ... _mix= l6_p50_ms_33_64= l6_p99_ms_33_64= mix_agreement=
Targets (1 thread, <= 64 tokens): INT8 p50 <= 1.0 ms, p99 <= 2.5 ms, agreement >= 0.99, drop <= 0.5 points.
Heavy: run it under `nice -n 10`; `--quick` only checks that every part runs (its figures are not results).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
QUERIES = Path("/work/shared/data/queries-dev")
NLU = QUERIES / "nlu_evaluation_data" / "NLU-Data-Home-Domain-CV-testsets-merged.csv"
BUCKETS = ((1, 16), (17, 32), (33, 64))
VARIANTS = ("static_s8s8", "static_u8s8", "fused_int8")


def _jsonl(path: Path, field, first_turn: bool = False) -> list[str]:
    import json

    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [r[field][0] if first_turn else r[field] for r in rows]


def query_sources(root: Path = QUERIES) -> dict[str, list[str]]:
    """Real user queries of several kinds and two languages (the first turn of multi-turn ones)."""
    import json

    xquad = json.loads((root / "xquad_de" / "xquad.de.json").read_text(encoding="utf-8"))
    return {"nq_open": _jsonl(root / "nq_open" / "NQ-open.dev.jsonl", "question"),
            "self_instruct": _jsonl(root / "self_instruct" / "user_oriented_instructions.jsonl", "instruction"),
            "arena_hard": _jsonl(root / "arena_hard_auto" / "v0.1" / "question.jsonl", "prompt"),
            "gsm8k": _jsonl(root / "gsm8k" / "test.jsonl", "question"),
            "mt_bench": _jsonl(root / "fastchat_mt_bench" / "question.jsonl", "turns", first_turn=True),
            "mt_bench_de": _jsonl(root / "mt_bench_x_de" / "question.jsonl", "turns", first_turn=True),
            "xquad_de": [q["question"] for a in xquad["data"] for p in a["paragraphs"] for q in p["qas"]]}


def length_sets(tokenizer, per_set: int = 200, seed: int = 0) -> dict[str, list[str]]:
    """{"1_16", "17_32", "33_64", "mix"} -> queries; buckets by the student's token count (cut at 64)."""
    import random

    rng = random.Random(seed)
    srcs = query_sources()
    sets = {f"{lo}_{hi}": [] for lo, hi in BUCKETS}
    pool = [t for texts in srcs.values() for t in texts]
    rng.shuffle(pool)
    for text in pool:
        n = min(len(tokenizer.encode(text).ids), 64)
        key = next(f"{lo}_{hi}" for lo, hi in BUCKETS if n <= hi)
        if len(sets[key]) < per_set:
            sets[key].append(text)
    each = per_set // len(srcs) + 1
    sets["mix"] = [t for texts in srcs.values() for t in rng.sample(texts, min(each, len(texts)))]
    rng.shuffle(sets["mix"])
    return sets


def nlu_scenarios(path: Path) -> tuple[list, list, list[str]]:
    """(train, eval, label names): (text, label id) pairs, one per distinct lower-cased text."""
    seen, rows = set(), []
    with path.open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            text = r["answer_from_user"].strip()
            key = " ".join(text.lower().split())
            if text and key not in seen:
                seen.add(key)
                rows.append((text, r["scenario"]))
    names = sorted({s for _, s in rows})
    ids = {n: i for i, n in enumerate(names)}
    split = {"train": [], "eval": []}
    for text, s in rows:
        h = int(hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()[:8], 16)
        split["eval" if h % 5 == 0 else "train"].append((text, ids[s]))
    return split["train"], split["eval"], names


def train_student(out: Path, train, names, *, layers: int | None, pick: str, steps: int, batch: int,
                  lr: float, seed: int = 0, width: int | None = None, ffn: int | None = None, teacher=None,
                  alpha: float = 0.5, temperature: float = 2.0, init: Path | None = None) -> dict:
    """A MiniLM sequence classifier (k layers cut as `student_layers` does, narrowed as `student_width` /
    `student_ffn` do), trained `steps` AdamW steps; with `teacher` (logits per train row) distilled as
    `distill_from` does (trainers/methods/distill.py)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from mashbill.trainers.base_model import minilm_folder
    from mashbill.trainers.methods.classify import keep_layers
    from mashbill.trainers.methods.distill import distill_loss
    from mashbill.trainers.methods.narrow import shrink_width

    base = minilm_folder()
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(  # init: a trained run's model (base_model: RUN/model)
        str(init or base), num_labels=len(names), id2label=dict(enumerate(names)),
        label2id={n: i for i, n in enumerate(names)})
    have = model.config.num_hidden_layers
    kept = keep_layers(model, layers, pick) if layers and layers != have else list(range(have))
    if width is not None or ffn is not None:
        model, _ = shrink_width(model, width, ffn)
    tok = AutoTokenizer.from_pretrained(str(base))
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 - s / steps)
    rng = np.random.default_rng(seed)  # the same batches for every student
    order = np.concatenate([rng.permutation(len(train)) for _ in range(steps * batch // len(train) + 1)])
    model.train()
    t0 = time.perf_counter()
    loss = torch.tensor(float("nan"))  # steps 0: an untrained model, for its shapes' latency only
    for step in range(steps):
        idx = order[step * batch:(step + 1) * batch]
        enc = tok([train[i][0] for i in idx], padding=True, truncation=True, max_length=64, return_tensors="pt")
        labels = torch.tensor([train[i][1] for i in idx])
        if teacher is None:
            loss = model(**enc, labels=labels).loss
        else:
            loss = distill_loss(model(**enc).logits, torch.from_numpy(teacher[idx]), labels, alpha=alpha,
                                temperature=temperature)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    secs = time.perf_counter() - t0
    model.eval()
    model.save_pretrained(str(out / "model"))
    tok.save_pretrained(str(out / "model"))
    return {"kept": kept, "train_s": secs, "loss_last": float(loss.detach())}


def export_student(run: Path, out: Path) -> dict:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from mashbill.exporters.onnx.onnx_export import export_classifier
    from mashbill.exporters.runs import Run

    out.mkdir(parents=True)
    paths = export_classifier(Run(run, {}), out, {"bench": "bench/student.py"}, max_length=64)
    pt = out / "model.int8_pt.onnx"  # per-tensor weights, for comparison (the export is per channel)
    quantize_dynamic(str(paths["fp32"]), str(pt), weight_type=QuantType.QInt8, per_channel=False)
    return {"int8": paths["int8"], "int8_pt": pt, "fp32": paths["fp32"]}


def quant_variants(paths: dict, calib: list[str], config) -> dict:
    """Other INT8 recipes from the exporter's fp32 graph, beside it (same tokenizer, same metadata)."""
    import onnx
    import onnxruntime.quantization as q
    from onnxruntime.transformers import optimizer
    from tokenizers import Tokenizer

    from mashbill.exporters.onnx.onnx_export import _save_with_meta, read_metadata

    fp32, out = paths["fp32"], paths["fp32"].parent
    tok = Tokenizer.from_file(str(out / "tokenizer" / "tokenizer.json"))
    tok.enable_truncation(64)
    meta, made = read_metadata(fp32), {}

    class Reader(q.CalibrationDataReader):  # batch 1, unpadded, as served
        def __init__(self):
            self.it = iter(calib)

        def get_next(self):
            text = next(self.it, None)
            if text is None:
                return None
            ids = np.asarray([tok.encode(text).ids], dtype=np.int64)
            return {"input_ids": ids, "attention_mask": np.ones_like(ids)}

    float_default = {"DefaultTensorType": onnx.TensorProto.FLOAT}
    for name, act in (("static_s8s8", q.QuantType.QInt8), ("static_u8s8", q.QuantType.QUInt8)):
        raw = out / f".{name}.onnx"
        q.quantize_static(str(fp32), str(raw), Reader(), quant_format=q.QuantFormat.QDQ, activation_type=act,
                          weight_type=q.QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"],
                          extra_options={**float_default, "ActivationSymmetric": act == q.QuantType.QInt8})
        made[name] = out / f"model.{name}.onnx"
    fused = optimizer.optimize_model(str(fp32), model_type="bert", num_heads=config.num_attention_heads,
                                     hidden_size=config.hidden_size)
    print(f"BERT optimizer on the exported graph: "
          f"{ {k: v for k, v in fused.get_fused_operator_statistics().items() if v} }")
    fused.save_model_to_file(str(out / ".fused.onnx"))
    q.quantize_dynamic(str(out / ".fused.onnx"), str(out / ".fused_dyn.onnx"), weight_type=q.QuantType.QInt8,
                       per_channel=True, extra_options=float_default)
    (out / ".fused.onnx").unlink()
    made["fused_int8"] = out / "model.fused_int8.onnx"
    for name, dst in made.items():
        raw = out / (".fused_dyn.onnx" if name == "fused_int8" else f".{name}.onnx")
        _save_with_meta(onnx, raw, dst, meta)
        raw.unlink()
    return made


def interleaved_latency(predictors: dict, texts: list[str], samples: int, rounds: int = 10) -> dict:
    """p50/p95/p99 ms per predictor, measured in `rounds` alternating blocks so that load hits all alike."""
    times = {k: [] for k in predictors}
    per = max(1, samples // rounds)
    for p in predictors.values():
        for t in texts[:20]:
            p.logits_one(t)
    for r in range(rounds):
        for name, p in predictors.items():
            for i in range(per):
                text = texts[(r * per + i) % len(texts)]
                t0 = time.perf_counter()
                p.logits_one(text)
                times[name].append(time.perf_counter() - t0)
    out = {}
    for name, ts in times.items():
        p50, p95, p99 = np.percentile(np.asarray(ts) * 1000, [50, 95, 99])
        out[name] = {"p50_ms": round(float(p50), 3), "p95_ms": round(float(p95), 3), "p99_ms": round(float(p99), 3)}
    return out


def student_name(spec: str, default_steps: int) -> tuple[int, str, int]:
    """K[:pick[:steps]] -> (k, pick, steps)."""
    parts = spec.split(":")
    return int(parts[0]), (parts[1] if len(parts) > 1 and parts[1] else "spread"), \
        (int(parts[2]) if len(parts) > 2 else default_steps)


def student_key(spec: str, default_steps: int) -> str:
    k, pick, steps = student_name(spec, default_steps)
    base = "l6" if k == 6 else f"l{k}_{pick}"
    return base if steps == default_steps else f"{base}_{steps}"


def narrow_spec(spec: str, default_steps: int) -> tuple[int, int, int | None, int, str]:
    """K:HIDDEN[:FFN[:STEPS]] -> (k, hidden, ffn or None, steps, key); FFN 0 or empty scales with HIDDEN."""
    parts = spec.split(":")
    k, hidden = int(parts[0]), int(parts[1])
    ffn = int(parts[2]) if len(parts) > 2 and parts[2] not in ("", "0") else None
    steps = int(parts[3]) if len(parts) > 3 else default_steps
    key = f"l{k}_w{hidden}" + (f"f{ffn}" if ffn else "") + ("" if steps == default_steps else f"_{steps}")
    return k, hidden, ffn, steps, key


def _measure(name, run, paths, texts, gold, names, sets, args, out):
    """Parity of each INT8 graph vs the run's own PyTorch model; registers the predictors for the latency rounds."""
    import torch

    from mashbill.exporters.onnx.onnx_export import load_classifier
    from mashbill.exporters.onnx.parity import parity, torch_logits
    from mashbill.exporters.predict import OnnxPredictor
    from mashbill.exporters.runs import Run

    torch.set_num_threads(1)
    model, tok = load_classifier(Run(run, {}))
    ref = torch_logits(model, tok, texts, 64)
    res = {"layers": model.config.num_hidden_layers, "hidden": model.config.hidden_size,
           "ffn": model.config.intermediate_size, "parity": {}}
    if args.variants:
        kept = {k: paths["fp32"].parent / f"model.{k}.onnx" for k in VARIANTS}
        paths.update(kept if all(p.is_file() for p in kept.values())
                     else quant_variants(paths, [t for t, _ in args.train_rows[:300]], model.config))
    quants = ["int8", "int8_pt"] + [k for k in VARIANTS if k in paths]
    if not sets:
        sets.update(length_sets(tok.backend_tokenizer, per_set=200 if not args.quick else 40))
    mix_ref = torch_logits(model, tok, sets["mix"], 64).argmax(-1)
    for q in quants:
        pred = OnnxPredictor(paths[q], threads=1)
        cand = np.concatenate([pred.logits_one(t) for t in texts])
        res["parity"][q] = parity(ref, cand, gold, dict(enumerate(names)), False)
        out["predictors"][f"{name}/{q}"] = pred
        if q != "int8_pt":
            out["by_length"][f"{name}/{q}"] = pred
            out["mix_agree"][f"{name}/{q}"] = round(float(np.mean(
                np.concatenate([pred.logits_one(t) for t in sets["mix"]]).argmax(-1) == mix_ref)), 4)
    out["predictors"][f"{name}/fp32"] = OnnxPredictor(paths["fp32"], threads=1)
    return res, quants


def _exported(run: Path, dest: Path) -> dict:
    if dest.exists():
        return {"int8": dest / "model.int8.onnx", "int8_pt": dest / "model.int8_pt.onnx", "fp32": dest / "model.onnx"}
    return export_student(run, dest)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=NLU)
    ap.add_argument("--students", default="6,3:spread,3:first,3:spread:600",
                    help="comma-separated K[:spread|first[:STEPS]]; 6 is the full model; STEPS overrides --steps "
                         "(a 3-layer step costs about half a 6-layer one) (default %(default)s)")
    ap.add_argument("--choose", default="3:spread:600", help="the student the onnx_* keys report")
    ap.add_argument("--narrow", default="",
                    help="comma-separated K:HIDDEN[:FFN[:STEPS]] narrow students (student_layers K, student_width "
                         "HIDDEN, student_ffn FFN; STEPS defaults to the teacher's; STEPS 0: untrained, for latency "
                         "only), each distilled from --teacher (e.g. 3:256,3:192,3:128)")
    ap.add_argument("--teacher", help="the student (a --students entry) the narrow ones distil from "
                                      "(default: --choose)")
    ap.add_argument("--narrow-init", choices=("base", "teacher"), default="base",
                    help="narrow students start from the base MiniLM cut to K layers (as student_layers + "
                         "student_width do), or from the trained teacher's weights (base_model: TEACHER_RUN/model; "
                         "K must be the teacher's layer count; keys end in _ti) (default %(default)s)")
    ap.add_argument("--alpha", type=float, default=0.5, help="distill_alpha (default %(default)s)")
    ap.add_argument("--temperature", type=float, default=2.0, help="distill_temperature (default %(default)s)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--train-threads", type=int, default=1)  # 2 threads on a loaded 2-core box: 5x slower
    ap.add_argument("--latency-samples", type=int, default=2000)
    ap.add_argument("--length-samples", type=int, default=600, help="timed requests per model per length set")
    ap.add_argument("--variants", action="store_true", help="also static INT8 (s8s8, u8s8) and BERT-fused INT8")
    ap.add_argument("--keep", type=Path, help="keep the trained runs and exports here (a later run reuses them)")
    ap.add_argument("--reuse", type=Path, help="measure the runs kept in this folder by --keep again; train nothing "
                                               "(a missing run is an error)")
    ap.add_argument("--quick", action="store_true", help="smoke run (20 steps, 200 eval rows, 200 timed requests)")
    args = ap.parse_args()
    import torch

    from mashbill.exporters.onnx.onnx_export import load_classifier
    from mashbill.exporters.onnx.parity import torch_logits
    from mashbill.exporters.runs import Run

    train, ev, names = nlu_scenarios(args.data)
    args.train_rows = train
    if args.quick:
        args.steps, args.latency_samples, args.length_samples, ev = 20, 200, 80, ev[:200]
        args.students = ",".join(dict.fromkeys(":".join(x.split(":")[:2]) for x in args.students.split(",")))
        args.choose = ":".join(args.choose.split(":")[:2])
        args.teacher = args.teacher and ":".join(args.teacher.split(":")[:2])
        args.narrow = ",".join(":".join(x.split(":")[:3]) for x in args.narrow.split(",") if x)
    texts, gold_ids = [t for t, _ in ev], [y for _, y in ev]
    gold = [names[y] for y in gold_ids]
    print(f"data: {args.data.name}, {len(names)} scenario labels, train {len(train)}, eval {len(ev)}; "
          f"{args.steps} steps x batch {args.batch}, lr {args.lr}")
    if args.reuse and not args.reuse.is_dir():
        sys.exit(f"--reuse {args.reuse}: no such folder (make one with --keep)")
    work = args.reuse or args.keep or Path(tempfile.mkdtemp(prefix="mashbill-bench-student-"))
    results, sets, out = {}, {}, {"predictors": {}, "by_length": {}, "mix_agree": {}}
    teacher_spec = args.teacher or args.choose
    teacher_key = student_key(teacher_spec, args.steps)
    narrow = [narrow_spec(x, student_name(teacher_spec, args.steps)[2]) for x in args.narrow.split(",") if x]
    if args.narrow_init == "teacher":
        narrow = [(*n[:4], n[4] + "_ti") for n in narrow]

    def ensure(run: Path, **kw) -> dict:
        if (run / "model" / "config.json").is_file():
            return {"kept": None, "train_s": float("nan"), "loss_last": float("nan")}
        if args.reuse:
            sys.exit(f"--reuse {args.reuse}: no trained run {run.name} (train it with --keep)")
        torch.set_num_threads(args.train_threads)
        return train_student(run, train, names, batch=args.batch, lr=args.lr, **kw)

    try:
        for spec in args.students.split(","):
            k, pick, steps = student_name(spec, args.steps)
            name = student_key(spec, args.steps)
            run = work / name
            info = ensure(run, layers=None if k == 6 else k, pick=pick, steps=steps)
            res, quants = _measure(name, run, _exported(run, work / f"{name}-onnx"), texts, gold, names, sets, args,
                                   out)
            res.update(spec=spec, **info)
            results[name] = res
            p = res["parity"]["int8"]
            print(f"{name}: layers {res['layers']} (base layers kept {info['kept']}), train {info['train_s']:.0f} s, "
                  f"torch accuracy {p['accuracy_reference']:.4f}, int8 accuracy {p['accuracy']:.4f}, agreement "
                  f"{p['agreement']:.4f}, drop {p['accuracy_drop_points']} points, max logit diff "
                  f"{p['max_abs_logit_diff']}; per-tensor int8: agreement {res['parity']['int8_pt']['agreement']:.4f}"
                  f", drop {res['parity']['int8_pt']['accuracy_drop_points']}", flush=True)
            for q in quants[2:]:
                v = res["parity"][q]
                print(f"{name}/{q}: agreement {v['agreement']:.4f}, drop {v['accuracy_drop_points']} points, max "
                      f"logit diff {v['max_abs_logit_diff']}", flush=True)
        if narrow:
            if teacher_key not in results:
                sys.exit(f"--teacher {teacher_spec}: not among --students {args.students}")
            t_model, t_tok = load_classifier(Run(work / teacher_key, {}))
            t_logits = None
            for k, hidden, ffn, steps, name in narrow:
                run = work / name
                if not (run / "model" / "config.json").is_file() and t_logits is None:
                    t_logits = torch_logits(t_model, t_tok, [t for t, _ in train], 64).astype(np.float32)
                info = ensure(run, layers=k, pick="spread", steps=steps, width=hidden, ffn=ffn, teacher=t_logits,
                              alpha=args.alpha, temperature=args.temperature,
                              init=work / teacher_key / "model" if args.narrow_init == "teacher" else None)
                res, _ = _measure(name, run, _exported(run, work / f"{name}-onnx"), texts, gold, names, sets, args,
                                  out)
                res.update(spec=f"{k}:{hidden}:{ffn or ''}:{steps}", **info)
                results[name] = res
                p, t = res["parity"]["int8"], results[teacher_key]["parity"]["int8"]
                res["drop_vs_teacher"] = round(100 * (t["accuracy_reference"] - p["accuracy_reference"]), 2)
                print(f"{name}: {k} layers x hidden {res['hidden']} x ffn {res['ffn']}, distilled from {teacher_key} "
                      f"(alpha {args.alpha}, T {args.temperature}), train {info['train_s']:.0f} s, torch accuracy "
                      f"{p['accuracy_reference']:.4f} vs teacher {t['accuracy_reference']:.4f} "
                      f"({res['drop_vs_teacher']} points lower), int8 accuracy {p['accuracy']:.4f}, agreement "
                      f"{p['agreement']:.4f}, int8 drop {p['accuracy_drop_points']} points", flush=True)
        report(args, results, out, sets, texts, teacher_key, [n for *_, n in narrow])
    finally:
        if not args.keep and not args.reuse:
            shutil.rmtree(work, ignore_errors=True)


def report(args, results, out, sets, texts, teacher_key, narrow_keys) -> None:
    from mashbill.trainers.methods.narrow import encoder_macs

    lat = interleaved_latency(out["predictors"], texts, args.latency_samples)
    print(f"{'1 thread, batch 1, tokenization incl.':<40} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for k, v in lat.items():
        print(f"{k:<40} {v['p50_ms']:>8.3f} {v['p95_ms']:>8.3f} {v['p99_ms']:>8.3f}")
    lens = {b: interleaved_latency(out["by_length"], texts_b, args.length_samples) for b, texts_b in sets.items()}
    mix_agree = out["mix_agree"]
    print(f"by token length (real queries: {len(sets['mix'])} in the mix), p50 / p99 ms, and INT8 vs PyTorch "
          f"label agreement on the mix:")
    print(f"{'':<28}" + "".join(f"{b:>16}" for b in lens) + f"{'mix agree':>11}")
    for k in out["by_length"]:
        print(f"{k:<28}" + "".join(f"{lens[b][k]['p50_ms']:>7.3f} /{lens[b][k]['p99_ms']:>7.3f}" for b in lens)
              + f"{mix_agree[k]:>11.4f}")
    k = student_name(args.choose, args.steps)[0]
    chosen = student_key(args.choose, args.steps)
    c, pc = lat[f"{chosen}/int8"], results[chosen]["parity"]["int8"]
    accs = " ".join(f"acc_{n}={r['parity']['int8']['accuracy_reference']}" for n, r in results.items())
    line = (f"student_layers={k} onnx_int8_p50_ms={c['p50_ms']} onnx_int8_p95_ms={c['p95_ms']} "
            f"onnx_int8_p99_ms={c['p99_ms']} onnx_agreement={pc['agreement']} "
            f"onnx_acc_drop={pc['accuracy_drop_points']} ")
    if "l6" in results:
        full, p6 = lat["l6/int8"], results["l6"]["parity"]["int8"]
        print(f"{chosen} vs l6 (int8, p50): {full['p50_ms'] / c['p50_ms']:.2f}x faster; accuracy "
              f"{pc['accuracy_reference']:.4f} vs {p6['accuracy_reference']:.4f}")
        line += (f"l6_p50_ms={full['p50_ms']} l6_p95_ms={full['p95_ms']} l6_p99_ms={full['p99_ms']} "
                 f"l6_agreement={p6['agreement']} l6_acc_drop={p6['accuracy_drop_points']} ")
    line += (f"acc_lK={pc['accuracy_reference']} {accs} eval_rows={len(texts)} "
             + " ".join(f"int8_p{p}_ms_{b}={lens[b][f'{chosen}/int8'][f'p{p}_ms']}" for b in lens for p in (50, 99))
             + f" mix_agreement={mix_agree[f'{chosen}/int8']}")
    if "l6" in results:
        line += (f" l6_p50_ms_33_64={lens['33_64']['l6/int8']['p50_ms']} l6_p99_ms_33_64="
                 f"{lens['33_64']['l6/int8']['p99_ms']} l6_mix_agreement={mix_agree['l6/int8']}")
    if narrow_keys:
        t = results[teacher_key]
        print(f"narrow students vs their teacher {teacher_key} (encoder multiply-adds at 64 tokens, INT8 p50 at "
              f"33-64 tokens):")
        print(f"  {teacher_key}: {encoder_macs(t['hidden'], t['ffn'], t['layers'], 64) / 1e6:.0f} M MACs, "
              f"{lens['33_64'][f'{teacher_key}/int8']['p50_ms']:.3f} ms")
    for n in narrow_keys:
        r, p = results[n], results[n]["parity"]["int8"]
        macs = encoder_macs(r["hidden"], r["ffn"], r["layers"], 64)
        print(f"  {n}: {macs / 1e6:.0f} M MACs, {lens['33_64'][f'{n}/int8']['p50_ms']:.3f} ms, accuracy "
              f"{p['accuracy_reference']:.4f} ({r['drop_vs_teacher']} points below the teacher), int8 agreement "
              f"{p['agreement']:.4f}, int8 drop {p['accuracy_drop_points']}")
        line += (f" {n}_acc={p['accuracy_reference']} {n}_drop_vs_teacher={r['drop_vs_teacher']} "
                 f"{n}_agreement={p['agreement']} {n}_int8_drop={p['accuracy_drop_points']} "
                 f"{n}_mix_agreement={mix_agree[f'{n}/int8']} "
                 + " ".join(f"{n}_p{q}_ms_{b}={lens[b][f'{n}/int8'][f'p{q}_ms']}" for b in lens for q in (50, 99)))
    print(line)


if __name__ == "__main__":
    main()
