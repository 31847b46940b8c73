"""GPU check of the OpenAI-compatible teacher against `vllm serve`: throughput at a realistic concurrency,
prefix-cache hit rate, schema-valid rate, and which structured-output form the server took.

    python bench/gpu/vllm_serve.py [--model Qwen/Qwen2.5-0.5B-Instruct] [--spec PATH] [--records 256]

Needs one GPU and vLLM (`pip install 'mashbill[gpu]'`, its own environment). Starts `vllm serve`
with prefix caching and prompt-token details on 127.0.0.1, runs the preflight (models, structured
output), then `mashbill.factory.generate.generate` with the openai backend at --concurrency into a temporary
store, and stops the server. About 3-5 minutes with a 0.5B model, most of it the server start.

The last line is machine-readable:
    serve_rps=<records/s> tokens_out_per_s=<x> prefix_cache_hit_rate=<x> schema_valid_rate=<x> structured_output=<mode>
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DEFAULT_SPEC, figures, spec_with_teacher  # noqa: E402

from mashbill.factory.generate.generate import generate  # noqa: E402
from mashbill.factory.store import Store  # noqa: E402
from mashbill.factory.teachers.openai_compat import OpenAITeacher  # noqa: E402
from mashbill.specs import find_spec  # noqa: E402
from mashbill.specs.model import Sampling  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct")
    ap.add_argument("--spec", default=str(DEFAULT_SPEC))
    ap.add_argument("--records", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--vllm", default="vllm", help="the vllm executable")
    args = ap.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    log = open(Path(tempfile.gettempdir()) / f"vllm-serve-{port}.log", "w")
    server = subprocess.Popen([args.vllm, "serve", args.model, "--host", "127.0.0.1", "--port", str(port),
                               "--enable-prefix-caching", "--enable-prompt-tokens-details",
                               "--gpu-memory-utilization", "0.85", "--max-model-len", "4096"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        start = time.perf_counter()
        while True:
            if server.poll() is not None:
                sys.exit(f"vllm serve exited with {server.returncode}; see {log.name}")
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.perf_counter() - start > 480:
                sys.exit(f"vllm serve not ready after 480 s; see {log.name}")
            time.sleep(2)
        load_s = time.perf_counter() - start

        rs = spec_with_teacher(find_spec(args.spec), args.records, backend="openai", model=args.model,
                               sampling=Sampling(temperature=0.0, max_tokens=args.max_tokens, seed=0))
        runtime = rs.spec.runtime.model_copy(update={"concurrency": args.concurrency, "batch_size": 32})
        teacher = OpenAITeacher(rs.spec.teacher, runtime=runtime, base_url=url)
        teacher.check_schema(rs.output_schema)
        with tempfile.TemporaryDirectory() as tmp:
            store_path = Path(tmp) / "store"
            with Store.open(store_path) as store:
                t0 = time.perf_counter()
                summary = generate(rs, store, teacher, limit=args.records)
                wall = time.perf_counter() - t0
            info = teacher.info()
            teacher.close()
            f = figures(store_path, wall)
        print(json.dumps({"model": args.model, "spec": rs.ref, "concurrency": args.concurrency,
                          "server_start_s": round(load_s, 1), "server": info["server"], "accepted": summary.accepted,
                          "rejected": summary.rejected, "failed": summary.failed, "reject_codes": dict(summary.codes),
                          **f}))
        print(f"serve_rps={f['records_per_s']} tokens_out_per_s={f['tokens_out_per_s']} "
              f"prefix_cache_hit_rate={f['prefix_cache_hit_rate']} schema_valid_rate={f['schema_valid_rate']} "
              f"structured_output={info['structured_output']}")
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


if __name__ == "__main__":
    main()
