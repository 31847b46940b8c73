"""Factory overhead and prefix-reuse speed-up, measured side by side in one run.

    .venv/bin/python bench/generate.py [--spec plan-moe] [--records 16] [--threads 2]

1. overhead_ratio: the same teacher prompts through `mashbill.factory.generate.generate` (render, teacher, parse,
   schema check, DuckDB batches, Parquet export) and through a bare llama-cpp-python loop
   (create_chat_completion with the same constraint) over the same model. Target: <= 1.10.
2. prefix_reuse_speedup: the bare loop with the KV cache of the shared prompt prefix kept between
   records (llama-cpp-python's default) against resetting it before every record.
3. grammar engines: the bare loop constrained by llguidance vs llama.cpp's GBNF JSON-schema grammar.

The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mashbill.factory.generate.generate import generate, select_inputs
from mashbill.factory.store import Store
from mashbill.factory.teachers.llama_cpp import LlamaCppTeacher, _LLGuidanceProcessor
from mashbill.specs import find_spec, load_spec, render_prompt


def bare_loop(llm, prompts, sampling, constraint, reset_each: bool, tokens: list | None = None) -> float:
    """The naive loop: nothing but llama-cpp-python calls. Appends completion token counts to `tokens`."""
    import llama_cpp

    llm.reset()
    start = time.perf_counter()
    for messages in prompts:
        if reset_each:
            llm.reset()
        kwargs = dict(temperature=sampling["temperature"], top_p=sampling["top_p"], top_k=sampling["top_k"],
                      max_tokens=sampling["max_tokens"], seed=sampling["seed"],
                      repeat_penalty=sampling["repeat_penalty"])
        kwargs.update(constraint())
        out = llm.create_chat_completion(messages=list(messages), **kwargs)
        if tokens is not None:
            tokens.append(out["usage"]["completion_tokens"])
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default="plan-moe")
    ap.add_argument("--records", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="alternating repeats of bare and factory runs")
    args = ap.parse_args()

    rs = load_spec(find_spec(args.spec))
    selected = select_inputs(rs, limit=args.records)
    prompts = [render_prompt(rs, inp, rid).teacher_messages for rid, inp in selected]
    sampling = rs.spec.teacher.sampling.model_dump()
    print(f"spec {rs.ref}: {len(prompts)} records, max_tokens {sampling['max_tokens']}, threads {args.threads}")

    teacher = LlamaCppTeacher(rs.spec.teacher, threads=args.threads, grammar_engine="llguidance")
    teacher.check_schema(rs.output_schema)
    llm = teacher.llm  # the bare loop uses the very same model instance: only the factory's work differs
    grammar = teacher._llg_grammar(rs.output_schema)
    gbnf = teacher._gbnf(rs.output_schema)
    import llama_cpp

    def llg():
        return {"logits_processor": llama_cpp.LogitsProcessorList([_LLGuidanceProcessor(teacher._lltokenizer, grammar)])}

    def gbnf_c():
        return {"grammar": gbnf}

    system_tokens = len(llm.tokenize(prompts[0][0]["content"].encode(), add_bos=False))
    print(f"teacher system prompt: {system_tokens} tokens (shared by every record)")

    bare_loop(llm, prompts[:2], sampling, llg, reset_each=False)  # warm-up: page in weights, build caches
    bare_times, factory_times = [], []
    for rep in range(args.repeats):
        bare_times.append(bare_loop(llm, prompts, sampling, llg, reset_each=False))
        with tempfile.TemporaryDirectory() as tmp:
            with Store.open(Path(tmp) / "store") as store:
                llm.reset()
                t0 = time.perf_counter()
                summary = generate(rs, store, teacher, limit=args.records)
                factory_times.append(time.perf_counter() - t0)
        print(f"  repeat {rep + 1}: bare {bare_times[-1]:.2f}s  factory {factory_times[-1]:.2f}s  "
              f"(accepted {summary.accepted}, rejected {summary.rejected})")
    bare, factory = statistics.median(bare_times), statistics.median(factory_times)
    overhead = factory / bare

    no_reuse = bare_loop(llm, prompts, sampling, llg, reset_each=True)
    llg_tokens: list[int] = []
    reuse = bare_loop(llm, prompts, sampling, llg, reset_each=False, tokens=llg_tokens)
    speedup = no_reuse / reuse
    gbnf_tokens: list[int] = []
    gbnf_time = bare_loop(llm, prompts, sampling, gbnf_c, reset_each=False, tokens=gbnf_tokens)
    free_tokens: list[int] = []
    free_time = bare_loop(llm, prompts, sampling, lambda: {}, reset_each=False, tokens=free_tokens)

    print(f"factory vs bare loop: {factory:.2f}s vs {bare:.2f}s -> overhead ratio {overhead:.3f} (target <= 1.10)")
    print(f"prefix reuse: {reuse:.2f}s vs {no_reuse:.2f}s re-evaluating every prompt -> {speedup:.2f}x")
    # The engines constrain the same schema differently enough that the model writes different amounts,
    # so compare time per generated token too (prompt time included in both, so a conservative figure).
    for name, secs, toks in (("unconstrained", free_time, free_tokens), ("llguidance", reuse, llg_tokens),
                             ("gbnf", gbnf_time, gbnf_tokens)):
        print(f"grammar {name:13s}: {secs:7.2f}s for {sum(toks):6d} generated tokens -> "
              f"{1000 * secs / max(sum(toks), 1):6.2f} ms per token")
    teacher.close()
    print(f"overhead_ratio={overhead:.3f} prefix_reuse_speedup={speedup:.2f} records={len(prompts)}")


if __name__ == "__main__":
    sys.exit(main())
