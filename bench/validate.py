"""Validation throughput and the token-span speed-up, measured side by side in one run.

    .venv/bin/python bench/validate.py [--records 260000] [--tokenizer qwen2] [--max-seq-len 4096] [--jobs 2]
                                       [--naive-sample N] [--profile] [--repeat K]

The corpus is synthetic and shaped like the reference's planner dataset (mashbill.validators.data.synthetic): five
framings of a ~2,500-token system prompt whose category block varies per record, queries of 5-200 tokens,
JSON plan targets of 13-300 tokens, 5% five-message correction samples. Records are generated in chunks (each
depends only on seed and index), so memory stays flat at any size.

1. validate_records_per_s_core: schema + routing rules + dedup (exact and MinHash/LSH near duplicates) over the
   corpus, in one process, divided by the CPU seconds it took.
2. span_speedup: CPU seconds per example of the naive method (render and tokenize every full example with the
   trainer's own apply_chat_template call) over CPU seconds per example of the fast method (cuts at proven-safe
   boundaries, cached piece counts). By default the naive method runs on the WHOLE corpus; --jobs spreads it over
   processes (CPU time is summed, so the ratio stays per core). --naive-sample N runs it on a random sample only:
   the speed-up is then per example and the agreement covers the sample (the run says so).
3. span_agreement: the share of compared examples on which both methods give the same total, the same trained
   token ranges and the same verdicts. Anything below 1.0 is a bug (and the exit status is 1).

Tokenizer: a vocab-only GGUF from MASHBILL_CACHE/vocab (default ~/.cache/mashbill/vocab), with the ChatML template
with generation markers (what the reference forced for assistant-only loss). The last line is machine-readable.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["HF_HUB_OFFLINE"] = "1"

CHUNK = 10_000


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


_ENGINE = None
_ARGS = None


def _naive_indices(indices):
    """Worker: the naive signatures of the given corpus indices (records regenerated from seed and index)."""
    from mashbill.validators.data.synthetic import make_record
    from mashbill.validators.spans.spans import TrainingExample

    out = []
    for i in indices:
        r = make_record(_ARGS.seed, i)
        out.append(_ENGINE.naive(TrainingExample(r.id, r.messages)).signature())
    return out


def _profile(checker) -> dict[str, float]:
    """Timers (CPU seconds) around each rule, the query triggers, the plan parse and the schema check."""
    from mashbill.validators.plans import routing

    timers: dict[str, float] = {}

    def timed(name, fn):
        def run(*a, **k):
            t = time.process_time()  # (os.times ticks in 10 ms steps: too coarse for one rule on one record)
            try:
                return fn(*a, **k)
            finally:
                timers[name] = timers.get(name, 0.0) + time.process_time() - t
        return run

    for rule_id, fn in list(routing.RULES.items()):
        routing.RULES[rule_id] = timed(rule_id, fn)
    checker.triggers.analyze = timed("query triggers", checker.triggers.analyze)
    routing.parse_plan = timed("plan parse", routing.parse_plan)
    checker._schema = timed("schema", checker._schema)
    return timers


def main() -> None:
    global _ENGINE, _ARGS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=260_000)
    ap.add_argument("--tokenizer", default="qwen2", help="ggml-vocab-<NAME>.gguf, or a path / embedded:NAME")
    ap.add_argument("--chat-template", default="chatml")
    ap.add_argument("--max-seq-len", type=int, default=4096)
    ap.add_argument("--loss", default="assistant-only")
    ap.add_argument("--jobs", type=int, default=1, help="processes for the naive pass")
    ap.add_argument("--naive-sample", type=int, default=0, help="naive method on a random sample only (see above)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true",
                    help="also print where the rules' time goes: CPU microseconds per record for each rule, the "
                         "query triggers, the plan parse and the schema (timers around each; the totals include "
                         "their overhead)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="schema+rules+dedup only: each query stands in this many records (k plans of one query, as "
                         "samples, corrections and preference pairs give); 1: every query distinct")
    ap.add_argument("--rules", type=Path, default=None,
                    help="routing rule set file (default: the latest); run twice to compare two versions")
    args = _ARGS = ap.parse_args()

    import json

    from mashbill.specs.loader import LIBRARY, find_spec, load_catalog, load_spec
    from mashbill.validators.checker import RecordChecker, spec_examples
    from mashbill.validators.data.dedup import dedup
    from mashbill.validators.data.synthetic import corpus, make_record
    from mashbill.validators.plans.ruleset import load_ruleset
    from mashbill.validators.spans.spans import SpanEngine, SpanResult, TrainingExample, judge
    from mashbill.validators.tokenizers.tokenizer import load_tokenizer, resolve_chat_template

    from mashbill.paths import vocab_dir

    vocab = vocab_dir()
    tok_ref = args.tokenizer
    if not (tok_ref.startswith("embedded:") or os.sep in tok_ref or tok_ref.endswith(".gguf")):
        tok_ref = str(vocab / f"ggml-vocab-{tok_ref}.gguf")
    n = args.records

    # ---- 1. schema + rules + dedup
    rules = load_ruleset(args.rules) if args.rules else load_ruleset()
    catalog = load_catalog(LIBRARY / "shared" / "tools" / "precision-tools@2.yaml")
    schema = json.loads((LIBRARY / "shared" / "schemas" / "plan@1.json").read_text(encoding="utf-8"))
    examples = spec_examples(load_spec(find_spec("plan-moe")))
    checker = RecordChecker(ruleset=rules, schema=schema, catalog=catalog, examples=examples, origin="bench")
    timers = _profile(checker) if args.profile else None
    codes: dict[str, int] = {}
    digest = hashlib.sha1()  # every verdict (record, code, severity, detail) in order: equal digests, equal verdicts
    ids, queries = [], []
    rules_cpu = gen_s = 0.0
    corrections = 0
    for c in range(0, n, CHUNK):
        t = time.perf_counter()
        recs = corpus(min(CHUNK, n - c), seed=args.seed, start=c)
        if args.repeat > 1:  # record i asks the query of record i - i % repeat (its plan stays its own)
            bases = [c + k - (c + k) % args.repeat for k in range(len(recs))]
            recs = [replace(r, query=recs[b - c].query if b >= c else make_record(args.seed, b).query)
                    for r, b in zip(recs, bases)]
        gen_s += time.perf_counter() - t
        c0 = _cpu()
        for r in recs:
            meta = {"taxonomy_shown": list(r.taxonomy_shown), "taxonomy_renamed": r.taxonomy_renamed}
            for v in checker.check(r.query, r.plan, meta):  # the one record checker: schema, then the rules
                codes[v.code] = codes.get(v.code, 0) + 1
                digest.update(f"{r.id}\t{v.code}\t{v.severity}\t{v.detail}\n".encode("utf-8"))
        rules_cpu += _cpu() - c0
        ids += [r.id for r in recs]
        queries += [r.query for r in recs]
        corrections += sum(len(r.messages) > 3 for r in recs)
    c1 = _cpu()
    dres = dedup(ids, queries, rules.checks.dedup)
    dedup_cpu = _cpu() - c1
    for key, vs in sorted(dres.verdicts.items()):
        for v in vs:
            codes[v.code] = codes.get(v.code, 0) + 1
            digest.update(f"{key}\t{v.code}\t{v.severity}\t{v.detail}\n".encode("utf-8"))
    per_core = n / (rules_cpu + dedup_cpu)
    print(f"corpus: {n} records ({corrections} correction samples), generated in {gen_s:.1f}s")
    print(f"schema+rules: {rules_cpu:.1f} cpu-s ({n / rules_cpu:,.0f}/s), dedup: {dedup_cpu:.1f} cpu-s "
          f"({n / dedup_cpu:,.0f}/s), together {per_core:,.0f} records/s/core")
    print(f"  verdicts: {dict(sorted(codes.items()))}; dedup {dres.summary()}", flush=True)
    if timers is not None:
        print(f"  where the rules' time goes (CPU us per record, {n} records):")
        for name, cpu in sorted(timers.items(), key=lambda kv: -kv[1]):
            print(f"    {name:28s} {cpu / n * 1e6:8.1f}  {100 * cpu / rules_cpu:5.1f}%")
        print(f"    {'(checker, verdicts, timers)':28s} {(rules_cpu - sum(timers.values())) / n * 1e6:8.1f}")

    # ---- 2./3. spans: fast over the whole corpus, naive over the whole corpus or a sample
    loaded = load_tokenizer(tok_ref)
    template = resolve_chat_template(loaded, args.chat_template)
    engine = _ENGINE = SpanEngine(loaded, template, loss=args.loss)
    print(f"spans: {loaded.name}, template {args.chat_template}, loss {args.loss}, policy {engine.policy.name}",
          flush=True)
    fast_sig: list[tuple] = []
    fast_flags: list[tuple] = []
    fast_cpu = 0.0
    for c in range(0, n, CHUNK):
        recs = corpus(min(CHUNK, n - c), seed=args.seed, start=c)
        examples = [TrainingExample(r.id, r.messages) for r in recs]
        c0 = _cpu()
        res = engine.fast(examples)
        fast_cpu += _cpu() - c0
        fast_sig += [x.signature() for x in res]
        fast_flags += [(x.n_assistant_spans, x.correction) for x in res]
    print(f"  fast : {fast_cpu:.1f} cpu-s, {n / fast_cpu:,.0f} examples/s/core "
          f"({engine.counter.encoded_pieces} new pieces tokenized)", flush=True)

    picked = list(range(n))
    if args.naive_sample and args.naive_sample < n:
        picked = sorted(random.Random(args.seed).sample(picked, args.naive_sample))
        print(f"  naive on a random sample of {len(picked)} of {n} examples", flush=True)
    c0, cc0, w0 = _cpu(), _children_cpu(), time.perf_counter()
    parts = [picked[i:i + 500] for i in range(0, len(picked), 500)]
    naive: list[tuple] = []
    if args.jobs > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.jobs) as pool:
            for k, part in enumerate(pool.imap(_naive_indices, parts)):
                naive += part
                if (k + 1) % max(1, len(parts) // 10) == 0:
                    print(f"  naive: {len(naive)}/{len(picked)}", flush=True)
    else:
        for k, part in enumerate(parts):
            naive += _naive_indices(part)
            if (k + 1) % max(1, len(parts) // 10) == 0:
                print(f"  naive: {len(naive)}/{len(picked)}", flush=True)
    naive_cpu = (_cpu() - c0) + (_children_cpu() - cc0)
    print(f"  naive: {naive_cpu:.1f} cpu-s, {len(picked) / naive_cpu:,.1f} examples/s/core "
          f"(wall {time.perf_counter() - w0:.1f}s)", flush=True)

    agree, first_bad, cut = 0, None, 0
    for i, nsig in zip(picked, naive):
        fsig = fast_sig[i]
        n_asst, corr = fast_flags[i]
        fres = SpanResult(ids[i], fsig[0], fsig[1], error=fsig[2], n_assistant_spans=n_asst, correction=corr)
        nres = SpanResult(ids[i], nsig[0], nsig[1], error=nsig[2], n_assistant_spans=n_asst, correction=corr)
        fv = [v.code for v in judge(fres, args.max_seq_len, "right", args.loss).verdicts]
        nv = [v.code for v in judge(nres, args.max_seq_len, "right", args.loss).verdicts]
        if fsig == nsig and fv == nv:
            agree += 1
        elif first_bad is None:
            first_bad = (ids[i], nsig, fsig)
        cut += any(code in ("SPAN001", "SPAN002") for code in fv)
    agreement = agree / len(picked)
    speedup = (naive_cpu / len(picked)) / (fast_cpu / n)
    scope = "the whole corpus" if len(picked) == n else f"a random sample of {len(picked)}"
    print(f"  agreement {agree}/{len(picked)} on {scope}; targets cut at {args.max_seq_len}: {cut}"
          + (f"; first mismatch {first_bad}" if first_bad else ""))
    print(f"span_speedup={speedup:.1f} span_agreement={agreement:.6f} validate_records_per_s_core={per_core:.0f} "
          f"records={n} verdicts_sha={digest.hexdigest()[:16]}")
    sys.exit(0 if agreement == 1.0 else 1)


if __name__ == "__main__":
    main()
