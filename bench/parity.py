"""`export onnx`'s parity pass (every eval text at batch 1 on a one-thread session, fp32 and INT8) in one process
beside the same pass in worker processes, on an export you have (issue 29: at a million records it was most of the
export's 391 s).

    python bench/parity.py --export DIR --snapshot DIR [--limit N] [--workers K]

DIR: an `export onnx` folder (model.onnx, model.int8.onnx, tokenizer/) and the snapshot it was made from (a
rehearsal's: `bench/scale.py --keep`). Both passes run in this process one after the other (the workers' start
counted); the bench checks that the logits are the same bytes and exits 1 when they are not. Last line:
machine-readable.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np


def main() -> int:
    from mashbill.cpus import usable_cpus
    from mashbill.curation.snapshots.snapshot_find import read_manifest
    from mashbill.exporters.onnx.parity import MAX_WORKERS, candidate_logits, labelled_texts
    from mashbill.exporters.runs import Snapshot

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", type=Path, required=True)
    ap.add_argument("--snapshot", type=Path, required=True)
    ap.add_argument("--limit", type=int, help="the first N eval texts (default: all)")
    ap.add_argument("--workers", type=int, default=min(usable_cpus(), MAX_WORKERS))
    args = ap.parse_args()
    texts, _ = labelled_texts(Snapshot(args.snapshot, read_manifest(args.snapshot)))
    texts = texts[:args.limit] if args.limit else texts
    times: dict[str, float] = {}
    same = True
    for graph in ("model.onnx", "model.int8.onnx"):
        found = {}
        for workers in (1, args.workers):
            t0 = time.perf_counter()
            found[workers] = candidate_logits(args.export / graph, texts, workers=workers)
            times[f"{graph}:{workers}"] = time.perf_counter() - t0
        same &= bool(np.array_equal(found[1], found[args.workers]))
        print(f"{graph:16s} {len(texts)} texts: one process {times[f'{graph}:1']:.1f}s, {args.workers} workers "
              f"{times[f'{graph}:{args.workers}']:.1f}s, same logits: {np.array_equal(found[1], found[args.workers])} "
              f"| load1 {os.getloadavg()[0]:.2f}", flush=True)
    one = sum(v for k, v in times.items() if k.endswith(":1"))
    many = sum(v for k, v in times.items() if not k.endswith(":1"))
    print(f"texts={len(texts)} workers={args.workers} one_process_s={one:.1f} workers_s={many:.1f} "
          f"speedup={one / many:.2f} same={int(same)} load1={os.getloadavg()[0]:.2f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
