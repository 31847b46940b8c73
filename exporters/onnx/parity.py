"""ONNX parity against the PyTorch model on the snapshot's eval split, and latency with tokenization included.

Parity: label agreement, accuracy of each against the snapshot's labels, the accuracy drop in points and the
largest logit difference. Latency: batch 1, one request after another, at 1 and 2 threads, timed around the
whole `OnnxPredictor.logits_one` call (Rust tokenizer + session), so the number is what a caller sees.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from mashbill.curation.snapshots.pull import rows_for
from mashbill.exporters.runs import ExportError, Snapshot


def labelled_texts(snapshot: Snapshot, split: str = "eval") -> tuple[list[str], list]:
    """(texts, gold labels) of a split as the classification pull gives them (a list for multi-label kinds)."""
    rows = rows_for("classification", snapshot.rows(split), snapshot.manifest["kind"])
    texts = [r["text"] for r in rows]
    gold = [sorted(r["labels"]) if "labels" in r else r["label"] for r in rows]
    if not texts:
        raise ExportError(f"snapshot {snapshot.manifest['ref']}: the {split} split holds no labelled rows")
    return texts, gold


def torch_logits(model, tokenizer, texts: list[str], max_length: int) -> np.ndarray:
    import torch

    out = []
    with torch.inference_mode():
        for start in range(0, len(texts), 32):
            enc = tokenizer(texts[start:start + 32], padding=True, truncation=True, max_length=max_length,
                            return_tensors="pt")
            out.append(model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits.numpy())
    return np.concatenate(out)


def _labels(logits: np.ndarray, id2label: dict, multi: bool) -> list:
    if multi:
        return [sorted(id2label[j] for j in np.nonzero(row > 0)[0]) for row in logits]
    return [id2label[int(j)] for j in logits.argmax(-1)]


def _accuracy(pred: list, gold: list) -> float:
    return sum(p == g for p, g in zip(pred, gold)) / len(gold)


def parity(reference: np.ndarray, candidate: np.ndarray, gold: list, id2label: dict, multi: bool) -> dict:
    ref_l, cand_l = _labels(reference, id2label, multi), _labels(candidate, id2label, multi)
    acc_ref, acc_cand = _accuracy(ref_l, gold), _accuracy(cand_l, gold)
    return {"n": len(gold), "agreement": round(_accuracy(cand_l, ref_l), 4),
            "accuracy_reference": round(acc_ref, 4), "accuracy": round(acc_cand, 4),
            "accuracy_drop_points": round(100 * (acc_ref - acc_cand), 2),
            "max_abs_logit_diff": round(float(np.abs(reference - candidate).max()), 5),
            "disagreements": [i for i, (a, b) in enumerate(zip(ref_l, cand_l)) if a != b][:20]}


PARALLEL_FROM = 2_000  # texts: below it one process (a worker's start, ~2 s of imports, would outweigh its share)
MAX_WORKERS = 4  # each holds a session and a tokenizer (~250 MB): a 16 GB laptop keeps room


def _block_logits(path: str, texts: list[str]) -> np.ndarray:
    """One block's logits at batch 1 on a one-thread session (in a worker process, or in this one)."""
    from mashbill.exporters.predict import OnnxPredictor

    pred = OnnxPredictor(Path(path), threads=1)
    return np.concatenate([pred.logits_one(t) for t in texts])


def _worker(block: str, out: str) -> None:
    """A worker process's whole job: the block (a JSON file of [graph path, texts]) to its logits (an .npy file);
    an ExportError becomes its message on stderr and exit status 2."""
    import json
    import sys

    from mashbill.exporters.runs import ExportError

    path, texts = json.loads(Path(block).read_text(encoding="utf-8"))
    try:
        np.save(out, _block_logits(path, texts))
    except ExportError as exc:
        print(exc, file=sys.stderr)
        sys.exit(2)


def candidate_logits(path: Path, texts: list[str], workers: int | None = None) -> np.ndarray:
    """Every text's logits at batch 1 on a one-thread session, as deployed, in the texts' order; contiguous blocks
    of them in `workers` processes (default: the CPUs this process may use, at most MAX_WORKERS, and one below
    PARALLEL_FROM texts). A row is what one process gives it (the same graph, session options and input), so the
    report does not depend on the number of workers (issue 29: the 44,772 eval texts of a million-record rehearsal
    took 223 s in one process, most of `export onnx`). The workers are fresh interpreters that import only this
    module: not forked (this process has run torch and the HF tokenizer's threads), and not multiprocessing's
    spawn, which runs the caller's main script again in each worker unless it is guarded."""
    import json
    import subprocess
    import sys
    import tempfile

    from mashbill.cpus import worker_count
    from mashbill.exporters.runs import ExportError

    if workers is None:
        workers = worker_count(len(texts), PARALLEL_FROM, MAX_WORKERS)
    workers = max(1, min(workers, len(texts)))
    if workers == 1:
        return _block_logits(str(path), texts)
    size = -(-len(texts) // workers)
    blocks = [texts[at:at + size] for at in range(0, len(texts), size)]
    with tempfile.TemporaryDirectory(prefix="mashbill-parity-") as tmp:
        procs = []
        for k, block in enumerate(blocks):
            (Path(tmp) / f"{k}.json").write_text(json.dumps([str(path), block]), encoding="utf-8")
            code = (f"from mashbill.exporters.onnx.parity import _worker; "
                    f"_worker({str(Path(tmp) / f'{k}.json')!r}, {str(Path(tmp) / f'{k}.npy')!r})")
            procs.append(subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
        failed = None
        try:
            for proc in procs:  # each worker's stderr read to its end: a full pipe cannot stall it
                err = proc.communicate()[1]
                if proc.returncode:  # the call fails: the other blocks are not waited for
                    failed = (proc.returncode, err.strip().splitlines()[-1] if err.strip() else "")
                    break
        finally:  # interrupted, or a worker failed: none is left running
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if failed:
            code, why = failed
            if code == 2 and why:  # the worker's own ExportError
                raise ExportError(why)
            raise ExportError(f"{path}: a parity worker process ended with status {code} without a result "
                              f"(killed, or out of memory?){': ' + why if why else ''}; nothing was written")
        return np.concatenate([np.load(Path(tmp) / f"{k}.npy") for k in range(len(blocks))])


def latency(predictor, texts: list[str], *, samples: int = 300, warmup: int = 20) -> dict:
    """Per-request wall time in ms (p50/p95/p99, mean), cycling through `texts`."""
    for i in range(warmup):
        predictor.logits_one(texts[i % len(texts)])
    times = np.empty(samples)
    for i in range(samples):
        t0 = time.perf_counter()
        predictor.logits_one(texts[i % len(texts)])
        times[i] = time.perf_counter() - t0
    ms = times * 1000
    p50, p95, p99 = np.percentile(ms, [50, 95, 99])
    return {"samples": samples, "p50_ms": round(float(p50), 3), "p95_ms": round(float(p95), 3),
            "p99_ms": round(float(p99), 3), "mean_ms": round(float(ms.mean()), 3)}


def onnx_report(model, tokenizer, paths: dict, snapshot: Snapshot, *, max_length: int = 64,
                latency_samples: int = 300, threads: tuple[int, ...] = (1, 2)) -> dict:
    """Parity of the fp32 and INT8 graphs against the PyTorch model, and their latency per thread count."""
    from mashbill.exporters.predict import OnnxPredictor

    texts, gold = labelled_texts(snapshot)
    id2label = {int(k): v for k, v in model.config.id2label.items()}
    multi = model.config.problem_type == "multi_label_classification"
    reference = torch_logits(model, tokenizer, texts, max_length)
    from mashbill.exporters.onnx.onnx_export import encoder_layers

    report = {"split": "eval", "max_length": max_length, "tokenizer": "tokenizers (Rust), batch 1, included",
              "encoder": encoder_layers(model.config),
              "parity": {}, "latency": {}}
    for name in ("fp32", "int8"):
        # batch 1, as deployed: dynamic INT8 scales depend on what shares a batch
        candidate = candidate_logits(paths[name], texts)
        report["parity"][name] = parity(reference, candidate, gold, id2label, multi)
    for name in ("fp32", "int8"):
        for t in threads:
            pred = OnnxPredictor(paths[name], threads=t)
            report["latency"][f"{name}_threads{t}"] = latency(pred, texts, samples=latency_samples)
    return report
