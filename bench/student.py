"""Smaller ONNX INT8 students for the latency target: all-MiniLM-L6-v2 with k of its 6 layers vs all 6.

Every student is trained the same way (same rows, seed, batch and learning rate; the same steps unless a
student names its own, as the default `3:spread:600` does: a 3-layer step costs about half) on real
text nobody here wrote: the scenario labels (18 routing-like classes: alarm, calendar, qa, weather, ...) of
the NLU Evaluation Data (`/work/shared/data/queries-dev/nlu_evaluation_data`, CC-BY-4.0), deduplicated by
lower-cased text and split 80/20 by a hash of the text. The k-layer students are cut with the trainer's own
`student_layers` code (`trainers.classify.keep_layers`), exported with the exporter's own code
(`exporters.onnx_export.export_classifier`: ONNX opset 18 -> onnxruntime dynamic INT8, per channel) and
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

Last line (machine-readable; onnx_* are the chosen student's, by default 3 layers x 600 steps; l6_* the 6-layer's):
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
                  lr: float, seed: int = 0) -> dict:
    """A MiniLM sequence classifier (k layers cut as `student_layers` does), trained `steps` AdamW steps."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from mashbill.trainers.base_model import minilm_folder
    from mashbill.trainers.classify import keep_layers

    base = minilm_folder()
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(base), num_labels=len(names), id2label=dict(enumerate(names)),
        label2id={n: i for i, n in enumerate(names)})
    kept = keep_layers(model, layers, pick) if layers else list(range(model.config.num_hidden_layers))
    tok = AutoTokenizer.from_pretrained(str(base))
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 - s / steps)
    rng = np.random.default_rng(seed)  # the same batches for every student
    order = np.concatenate([rng.permutation(len(train)) for _ in range(steps * batch // len(train) + 1)])
    model.train()
    t0 = time.perf_counter()
    for step in range(steps):
        idx = order[step * batch:(step + 1) * batch]
        enc = tok([train[i][0] for i in idx], padding=True, truncation=True, max_length=64, return_tensors="pt")
        loss = model(**enc, labels=torch.tensor([train[i][1] for i in idx])).loss
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

    from mashbill.exporters.onnx_export import export_classifier
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

    from mashbill.exporters.onnx_export import _save_with_meta, read_metadata

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=NLU)
    ap.add_argument("--students", default="6,3:spread,3:first,3:spread:600",
                    help="comma-separated K[:spread|first[:STEPS]]; 6 is the full model; STEPS overrides --steps "
                         "(a 3-layer step costs about half a 6-layer one) (default %(default)s)")
    ap.add_argument("--choose", default="3:spread:600", help="the student the onnx_* keys report")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--train-threads", type=int, default=1)  # 2 threads on a loaded 2-core box: 5x slower
    ap.add_argument("--latency-samples", type=int, default=2000)
    ap.add_argument("--length-samples", type=int, default=600, help="timed requests per model per length set")
    ap.add_argument("--variants", action="store_true", help="also static INT8 (s8s8, u8s8) and BERT-fused INT8")
    ap.add_argument("--keep", type=Path, help="keep the trained runs and exports here")
    ap.add_argument("--quick", action="store_true", help="smoke run (20 steps, 200 eval rows, 200 timed requests)")
    args = ap.parse_args()
    import torch

    from mashbill.exporters.onnx_export import load_classifier
    from mashbill.exporters.parity import parity, torch_logits
    from mashbill.exporters.predict import OnnxPredictor
    from mashbill.exporters.runs import Run

    train, ev, names = nlu_scenarios(args.data)
    if args.quick:
        args.steps, args.latency_samples, args.length_samples, ev = 20, 200, 80, ev[:200]
        args.students = ",".join(dict.fromkeys(":".join(x.split(":")[:2]) for x in args.students.split(",")))
        args.choose = ":".join(args.choose.split(":")[:2])
    texts, gold_ids = [t for t, _ in ev], [y for _, y in ev]
    gold = [names[y] for y in gold_ids]
    print(f"data: {args.data.name}, {len(names)} scenario labels, train {len(train)}, eval {len(ev)}; "
          f"{args.steps} steps x batch {args.batch}, lr {args.lr}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="mashbill-bench-student-"))
    results, predictors, by_length, mix_agree = {}, {}, {}, {}
    sets = None
    try:
        for spec in args.students.split(","):
            k, pick, steps = student_name(spec, args.steps)
            name = student_key(spec, args.steps)
            torch.set_num_threads(args.train_threads)
            run = work / name
            if not (run / "model" / "config.json").is_file():
                info = train_student(run, train, names, layers=None if k == 6 else k, pick=pick,
                                     steps=steps, batch=args.batch, lr=args.lr)
            else:
                info = {"kept": None, "train_s": float("nan"), "loss_last": float("nan")}
            paths = export_student(run, work / f"{name}-onnx") if not (work / f"{name}-onnx").exists() else {
                "int8": work / f"{name}-onnx" / "model.int8.onnx",
                "int8_pt": work / f"{name}-onnx" / "model.int8_pt.onnx", "fp32": work / f"{name}-onnx" / "model.onnx"}
            torch.set_num_threads(1)
            model, tok = load_classifier(Run(run, {}))
            ref = torch_logits(model, tok, texts, 64)
            res = {"spec": spec, "layers": model.config.num_hidden_layers, **info, "parity": {}}
            if args.variants:
                kept = {k: paths["fp32"].parent / f"model.{k}.onnx" for k in VARIANTS}
                paths.update(kept if all(p.is_file() for p in kept.values())
                             else quant_variants(paths, [t for t, _ in train[:300]], model.config))
            quants = ["int8", "int8_pt"] + [k for k in VARIANTS if k in paths]
            if sets is None:
                sets = length_sets(tok.backend_tokenizer, per_set=200 if not args.quick else 40)
            mix_ref = torch_logits(model, tok, sets["mix"], 64).argmax(-1)
            for q in quants:
                pred = OnnxPredictor(paths[q], threads=1)
                cand = np.concatenate([pred.logits_one(t) for t in texts])
                res["parity"][q] = parity(ref, cand, gold, dict(enumerate(names)), False)
                predictors[f"{name}/{q}"] = pred
                if q != "int8_pt":
                    by_length[f"{name}/{q}"] = pred
                    mix_agree[f"{name}/{q}"] = round(float(np.mean(
                        np.concatenate([pred.logits_one(t) for t in sets["mix"]]).argmax(-1) == mix_ref)), 4)
            predictors[f"{name}/fp32"] = OnnxPredictor(paths["fp32"], threads=1)
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
        lat = interleaved_latency(predictors, texts, args.latency_samples)
        print(f"{'1 thread, batch 1, tokenization incl.':<40} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
        for k, v in lat.items():
            print(f"{k:<40} {v['p50_ms']:>8.3f} {v['p95_ms']:>8.3f} {v['p99_ms']:>8.3f}")
        lens = {b: interleaved_latency(by_length, texts_b, args.length_samples) for b, texts_b in sets.items()}
        print(f"by token length (real queries: {len(sets['mix'])} in the mix), p50 / p99 ms, and INT8 vs PyTorch "
              f"label agreement on the mix:")
        print(f"{'':<28}" + "".join(f"{b:>16}" for b in lens) + f"{'mix agree':>11}")
        for k in by_length:
            print(f"{k:<28}" + "".join(f"{lens[b][k]['p50_ms']:>7.3f} /{lens[b][k]['p99_ms']:>7.3f}" for b in lens)
                  + f"{mix_agree[k]:>11.4f}")
        k = student_name(args.choose, args.steps)[0]
        chosen = student_key(args.choose, args.steps)
        c, full = lat[f"{chosen}/int8"], lat["l6/int8"]
        print(f"{chosen} vs l6 (int8, p50): {full['p50_ms'] / c['p50_ms']:.2f}x faster; accuracy "
              f"{results[chosen]['parity']['int8']['accuracy_reference']:.4f} vs "
              f"{results['l6']['parity']['int8']['accuracy_reference']:.4f}")
        pc, p6 = results[chosen]["parity"]["int8"], results["l6"]["parity"]["int8"]
        accs = " ".join(f"acc_{n}={r['parity']['int8']['accuracy_reference']}" for n, r in results.items())
        print(f"student_layers={k} onnx_int8_p50_ms={c['p50_ms']} onnx_int8_p95_ms={c['p95_ms']} "
              f"onnx_int8_p99_ms={c['p99_ms']} onnx_agreement={pc['agreement']} "
              f"onnx_acc_drop={pc['accuracy_drop_points']} l6_p50_ms={full['p50_ms']} l6_p95_ms={full['p95_ms']} "
              f"l6_p99_ms={full['p99_ms']} l6_agreement={p6['agreement']} l6_acc_drop={p6['accuracy_drop_points']} "
              f"acc_lK={pc['accuracy_reference']} {accs} eval_rows={len(texts)} "
              + " ".join(f"int8_p{p}_ms_{b}={lens[b][f'{chosen}/int8'][f'p{p}_ms']}" for b in lens for p in (50, 99))
              + f" l6_p50_ms_33_64={lens['33_64']['l6/int8']['p50_ms']} l6_p99_ms_33_64="
              f"{lens['33_64']['l6/int8']['p99_ms']} mix_agreement={mix_agree[f'{chosen}/int8']} "
              f"l6_mix_agreement={mix_agree['l6/int8']}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
