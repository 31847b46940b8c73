"""GPU check of the vLLM offline teacher: throughput, prefix-cache hit rate, schema-valid rate.

    python bench/gpu/vllm_offline.py [--model Qwen/Qwen2.5-0.5B-Instruct] [--spec PATH] [--records 256]

Needs one GPU and `pip install 'mashbill[gpu]'` (its own environment). Runs the spec's inputs (the
tiny test plan spec by default; a library spec such as plan-moe has a long shared system prompt
and shows prefix caching better) through `mashbill.factory.generate.generate` with the vllm backend into a
temporary store, in chunks of --chunk, then reads the figures back from the store. A 0.5B model
takes about 2-4 minutes including the model load on one recent GPU.

The last line is machine-readable:
    vllm_rps=<records/s> tokens_out_per_s=<x> prefix_cache_hit_rate=<x> schema_valid_rate=<x>
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DEFAULT_SPEC, figures, spec_with_teacher  # noqa: E402

from mashbill.factory.generate.generate import generate  # noqa: E402
from mashbill.factory.store import Store  # noqa: E402
from mashbill.factory.teachers.vllm_offline import VLLMTeacher  # noqa: E402
from mashbill.specs import find_spec  # noqa: E402
from mashbill.specs.model import Sampling  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="hub id or local folder")
    ap.add_argument("--spec", default=str(DEFAULT_SPEC), help="spec name or path")
    ap.add_argument("--records", type=int, default=256)
    ap.add_argument("--chunk", type=int, default=64, help="records per LLM.chat call = per committed batch")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    args = ap.parse_args()

    rs = spec_with_teacher(find_spec(args.spec), args.records, backend="vllm", model=args.model,
                           sampling=Sampling(temperature=0.0, max_tokens=args.max_tokens, seed=0))
    runtime = rs.spec.runtime.model_copy(update={"batch_size": args.chunk,
                                                 "gpu_memory_utilization": args.gpu_memory_utilization})
    load_start = time.perf_counter()
    teacher = VLLMTeacher(rs.spec.teacher, runtime=runtime)
    teacher.check_schema(rs.output_schema)
    load_s = time.perf_counter() - load_start
    with tempfile.TemporaryDirectory() as tmp:
        store_path = Path(tmp) / "store"
        with Store.open(store_path) as store:
            start = time.perf_counter()
            summary = generate(rs, store, teacher, limit=args.records, batch_size=args.chunk)
            wall = time.perf_counter() - start
        teacher.close()
        f = figures(store_path, wall)
    print(json.dumps({"model": args.model, "spec": rs.ref, "chunk": args.chunk, "load_s": round(load_s, 1),
                      "accepted": summary.accepted, "rejected": summary.rejected, "failed": summary.failed,
                      "reject_codes": dict(summary.codes), **f}))
    print(f"vllm_rps={f['records_per_s']} tokens_out_per_s={f['tokens_out_per_s']} "
          f"prefix_cache_hit_rate={f['prefix_cache_hit_rate']} schema_valid_rate={f['schema_valid_rate']}")


if __name__ == "__main__":
    main()
