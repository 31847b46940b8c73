"""Benchmark the CPU artifacts: ONNX INT8 vs fp32 vs PyTorch eager, and GGUF Q8_0 vs Q4_K_M vs F16.

By default it builds the same real inputs as tests/exporters (a frozen plan snapshot, a MiniLM classifier
trained a few steps, a SmolLM2 LoRA run); `--onnx-run`/`--gguf-run` with `--snapshot` take your own runs.
Latency is batch 1, one request after another, tokenization included, measured side by side in one process.

Last line (machine-readable):
  onnx_int8_p50_ms= onnx_int8_p99_ms= onnx_agreement= onnx_acc_drop= gguf_q8_tok_s= q4_vs_q8_flip_rate=
Targets (1 thread, <= 64 tokens): INT8 p50 <= 1.0 ms, p99 <= 2.5 ms, agreement >= 0.99, drop <= 0.5 points.
`--quick` checks that every part runs end to end; its figures are not results.
"""

from __future__ import annotations

import argparse
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


def build_inputs(work: Path):
    from mashbill.curation.snapshots.snapshot import freeze
    from mashbill.factory.store import Store
    from mashbill.specs import load_spec
    from tests.curation.conftest import SHARED, Lib, add_records
    from tests.exporters.conftest import SPLITS, build_classifier, build_lora_run, smollm2_base

    shutil.copytree(SHARED, work / "lib" / "shared")
    spec = Lib(work / "lib").write("plan-bench", curation={"splits": SPLITS})
    with Store.open(work / "store") as store:
        add_records(store, load_spec(spec))
    snap = freeze(spec, store_path=work / "store", name="bench", version="1", tokens=False)
    clf = build_classifier(work / "runs" / "router", snap, steps=60)
    lora = build_lora_run(work / "runs" / "planner", snap, smollm2_base())
    return snap.path, clf, lora


def torch_latency(model, tokenizer, texts, samples: int, max_length: int = 64) -> float:
    import torch

    torch.set_num_threads(1)
    times = []
    with torch.inference_mode():
        for i in range(samples + 10):
            t0 = time.perf_counter()
            enc = tokenizer(texts[i % len(texts)], truncation=True, max_length=max_length, return_tensors="pt")
            model(**{k: enc[k] for k in ("input_ids", "attention_mask")})
            if i >= 10:
                times.append(time.perf_counter() - t0)
    return float(np.percentile(np.asarray(times) * 1000, 50))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnx-run", type=Path)
    ap.add_argument("--gguf-run", type=Path)
    ap.add_argument("--snapshot", type=Path)
    ap.add_argument("--latency-samples", type=int, default=1000)
    ap.add_argument("--verify-limit", type=int, default=None, help="eval rows for the GGUF verification (default all)")
    ap.add_argument("--gguf-threads", type=int, default=1, help="llama.cpp threads for the GGUF verification")
    ap.add_argument("--skip-gguf", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run of every part (100 timed requests, 2 verified rows); figures are not results")
    args = ap.parse_args()
    if args.quick:
        args.latency_samples, args.verify_limit = min(args.latency_samples, 100), 2

    from mashbill.exporters.build import export_gguf, export_onnx
    from mashbill.exporters.onnx.onnx_export import load_classifier
    from mashbill.exporters.onnx.parity import labelled_texts
    from mashbill.exporters.runs import load_run, snapshot_for

    work = Path(tempfile.mkdtemp(prefix="mashbill-bench-export-"))
    try:
        if args.onnx_run and args.snapshot:
            snap_path, clf, lora = args.snapshot, args.onnx_run, args.gguf_run
        else:
            snap_path, clf, lora = build_inputs(work)
        t0 = time.perf_counter()
        onnx_dir, m = export_onnx(clf, out=work / "onnx", snapshot=snap_path, latency_samples=args.latency_samples)
        onnx_s = time.perf_counter() - t0
        rep = m["reports"]["parity"]
        model, tok = load_classifier(load_run(clf))
        texts, _ = labelled_texts(snapshot_for(load_run(clf), snap_path))
        eager = torch_latency(model, tok, texts, min(args.latency_samples, 300))
        lat = rep["latency"]
        print(f"ONNX export + parity + latency: {onnx_s:.1f} s; eval rows {rep['parity']['int8']['n']}")
        print(f"{'batch 1, tokenization included':<34} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
        for k, v in lat.items():
            print(f"{k:<34} {v['p50_ms']:>8.3f} {v['p95_ms']:>8.3f} {v['p99_ms']:>8.3f}")
        print(f"{'torch eager, 1 thread':<34} {eager:>8.3f}")
        i8 = lat["int8_threads1"]["p50_ms"]
        print(f"INT8 vs fp32 (1 thread, p50): {lat['fp32_threads1']['p50_ms'] / i8:.2f}x faster; "
              f"vs torch eager: {eager / i8:.2f}x faster")
        for name, p in rep["parity"].items():
            print(f"{name}: agreement {p['agreement']:.4f}, accuracy {p['accuracy']:.4f} (torch "
                  f"{p['accuracy_reference']:.4f}), drop {p['accuracy_drop_points']} points, max logit diff "
                  f"{p['max_abs_logit_diff']}")
        q8_tok_s, flip = float("nan"), float("nan")
        if not args.skip_gguf and lora is not None:
            t0 = time.perf_counter()
            _, g = export_gguf(lora, out=work / "gguf", snapshot=snap_path, verify_limit=args.verify_limit,
                               threads=args.gguf_threads)
            print(f"GGUF merge + convert + quantize + verify: {time.perf_counter() - t0:.1f} s")
            v = g["reports"]["verify"]
            for name, s in v["files"].items():
                print(f"{name:<7} schema-valid {s['schema_valid_rate']:.2f}  rule-pass {s['rule_pass_rate']:.2f}  "
                      f"exact {s['exact_match']:.2f}  {s['tokens_per_s']} tok/s  (n={s['n']})")
            for pair, f in v["flips"].items():
                print(f"{pair}: {f['answers_differ']}/{f['n']} differ, {f['right_to_wrong']} right->wrong, "
                      f"{f['wrong_to_right']} wrong->right")
            q8_tok_s = v["files"]["q8_0"]["tokens_per_s"]
            flip = v["flips"]["q8_0_vs_q4_k_m"]["flip_rate"]
        p8 = rep["parity"]["int8"]
        print(f"onnx_int8_p50_ms={i8} onnx_int8_p99_ms={lat['int8_threads1']['p99_ms']} "
              f"onnx_agreement={p8['agreement']} onnx_acc_drop={p8['accuracy_drop_points']} "
              f"gguf_q8_tok_s={q8_tok_s} q4_vs_q8_flip_rate={flip}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
