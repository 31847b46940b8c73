"""The OpenAI-compatible backend against a plain client loop, and the effect of concurrency, in one run.

    .venv/bin/python bench/teachers.py [--records 16] [--rounds 2] [--port 0]

Starts llama-cpp-python's OpenAI-compatible server with the embedded SmolLM2 model on 127.0.0.1
(its extra deps: pip install -e '.[server]'), then sends the same schema-constrained chat requests
(a complexity label per seed query, temperature 0):

1. openai_overhead_ratio: the time of `OpenAITeacher.generate` at concurrency 1 (async client on
   its own event loop, retry bookkeeping, attempt records) over the time of a bare synchronous
   httpx loop posting the identical payloads. The two alternate request by request, so load from
   other processes falls on both alike; the second of a pair hits the server's prompt cache, so who
   goes first alternates too (use an even --rounds). The median over requests of the per-request
   time ratio (robust to stalls from other processes); the total-time ratio is printed too.
   Target: <= 1.10.
2. rps_c1, rps_c4, rps_c16: records per second through OpenAITeacher at concurrency 1, 4 and 16,
   best of two passes each.
   llama-cpp-python's server answers one request at a time, so here concurrency can only hide the
   client's own gaps; against vLLM (continuous batching) it is what buys throughput.

The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

from mashbill.factory.generate.generate import select_inputs
from mashbill.factory.teachers.base import TeacherRequest
from mashbill.factory.teachers.embedded import resolve_model_path
from mashbill.factory.teachers.openai_compat import OpenAITeacher
from mashbill.specs import load_spec, render_prompt

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT / "tests" / "fixtures" / "specs" / "shared"
TOPICS = ["Summarise this email thread", "What is 17% of 2840?", "Remember what I said about the server?",
          "Plan a migration from MySQL to Postgres with zero downtime", "Translate 'good morning' to German",
          "Write a haiku about rain", "Compare three CI systems for a monorepo", "Wie spät ist es in Tokio?"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, threads: int) -> subprocess.Popen:
    model = resolve_model_path("embedded:smollm2-135m-instruct")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", "smollm2",
                             "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads), "--n_ctx", "2048"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("llama_cpp.server exited; install its deps: pip install -e '.[server]'")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    sys.exit("llama_cpp.server did not start within 120 s")


def make_spec(folder: Path, n: int) -> Path:
    seeds = [{"query": f"{TOPICS[i % len(TOPICS)]} (case {i})", "lang": "en"} for i in range(n)]
    spec = {"name": "bench-teachers", "version": 1, "kind": "complexity", "seeds": [{"inline": seeds}],
            "prompt": {"file": str(SHARED / "tiny-prompt@1.yaml"),
                       "teacher": {"system": "Label how complex a request is: trivial, moderate, complex or "
                                             "memory_recall.", "user": "Request: {{ query }}"},
                       "training": {"system": "Label how complex a request is.", "user": "{{ query }}"}},
            "teacher": {"backend": "openai", "model": "smollm2", "sampling": {"temperature": 0.0, "max_tokens": 16}},
            "output_schema": str(SHARED / "tiny-label@1.json")}
    path = folder / "bench-teachers@1.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def backend(teacher: OpenAITeacher, requests: list[TeacherRequest]) -> tuple[float, int]:
    start = time.perf_counter()
    results = list(teacher.generate(requests))
    elapsed = time.perf_counter() - start
    assert len(results) == len(requests)
    return elapsed, sum(r.text is None for r in results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2, help="passes over the records (even: balanced order)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    server = start_server(port, args.threads)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rs = load_spec(make_spec(Path(tmp), args.records))
        sampling = rs.spec.teacher.sampling.model_dump()
        requests = [TeacherRequest(rid, render_prompt(rs, inp, rid).teacher_messages, rs.output_schema, sampling)
                    for rid, inp in select_inputs(rs)]
        teachers = {c: OpenAITeacher(rs.spec.teacher, runtime=rs.spec.runtime, base_url=url, concurrency=c)
                    for c in (1, 4, 16)}
        for t in teachers.values():
            t.check_schema(rs.output_schema)  # preflight; resolves how this server takes a schema
        mode = teachers[1].mode
        payloads = [teachers[1].payload(list(r.messages), r.schema, r.sampling, mode) for r in requests]
        backend(teachers[1], requests[:2])  # warm-up: model pages, prefix cache

        plain = [0.0] * len(requests)
        ours = [0.0] * len(requests)
        with httpx.Client(timeout=120) as client:
            for rnd in range(args.rounds):
                for k, (req, payload) in enumerate(zip(requests, payloads)):
                    # the second request of a pair hits the server's prompt cache: alternate who goes first, so
                    # over an even number of rounds each arm sends each request once in each position
                    for arm in (("plain", "ours") if (k + rnd) % 2 == 0 else ("ours", "plain")):
                        start = time.perf_counter()
                        if arm == "plain":
                            r = client.post(url + "/chat/completions", json=payload)
                            r.raise_for_status()
                            r.json()["choices"][0]["message"]["content"]
                            plain[k] += time.perf_counter() - start
                        else:
                            [result] = teachers[1].generate([req])
                            assert result.text is not None, result.error
                            ours[k] += time.perf_counter() - start
        # per request: both arms in both positions; the median over requests shrugs off stalls that
        # other processes on the machine cause (the totals are printed too)
        ratio = statistics.median(o / p for o, p in zip(ours, plain))
        best: dict[int, float] = {}
        failed = 0
        for c in (1, 4, 16, 16, 4, 1):  # each concurrency twice, best of two
            elapsed, f = backend(teachers[c], requests)
            best[c] = min(best.get(c, elapsed), elapsed)
            failed += f
        rps = {c: len(requests) / t for c, t in best.items()}
        for t in teachers.values():
            t.close()
        print(json.dumps({"records": len(requests), "rounds": args.rounds, "structured_output": mode,
                          "plain_loop_s": round(sum(plain), 3), "openai_backend_c1_s": round(sum(ours), 3),
                          "total_ratio": round(sum(ours) / sum(plain), 3),
                          "per_request_ratios": sorted(round(o / p, 3) for o, p in zip(ours, plain)), "failed": failed,
                          "server": "llama-cpp-python (one request at a time)", "threads": args.threads}))
        print(f"openai_overhead_ratio={ratio:.3f} rps_c1={rps[1]:.3f} rps_c4={rps[4]:.3f} rps_c16={rps[16]:.3f}")
    finally:
        server.terminate()
        server.wait(timeout=15)


if __name__ == "__main__":
    main()
