"""Query synthesis and the judge with the embedded teacher (2 threads, the 52 quick-start seeds).

Runs quickstart-queries@3 with a smaller target (--target, default 24) into a fresh store, then plans
--plans of the grown queries with quickstart-plan-grown@3 and judges those plans with its judge, all
through the one generate loop. Prints the pool figures and, side by side, generation and judging time
per record; then the screen against the labelled yardstick (bench/synth_quality.py, report half). Last line:

    queries_per_s= accepted_share= dup_share= holdout_hits= distinct2= judge_overhead= genuine_before=
    genuine_precision= screen_recall= real_false_drop= threads= load1=

queries_per_s: kept queries per second of synthesis wall time; accepted_share: kept / offered by the
teacher; dup_share: offered queries dropped as duplicates of a seed, the pool or near ones; holdout_hits:
pooled queries that leak the holdout set (must be 0); distinct2: unique word bigrams / all bigrams of the
pool; judge_overhead: judge seconds per record / plan-generation seconds per record; genuine_before and
genuine_precision: the genuine share of the yardstick's report half before the screen and of what the screen
keeps, screen_recall: the share of its non-genuine queries the screen drops, real_false_drop: the share of real
queries-dev queries the quality checks drop (bench/synth_quality.py); threads: llama.cpp
threads; load1: the machine's 1-minute load average at the end (on a shared 2-core machine 2 threads ran
3-20x slower than 1 under a load of 5-7: pass --threads 1 there).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "specs" / "library"
PATH_KEYS = ("path", "file", "output_schema", "rules", "chat_template", "score_schema", "pair_schema")


def _absolute(node, base: Path):
    """Relative file references of a spec, made absolute (the copy lives elsewhere)."""
    if isinstance(node, dict):
        return {k: (str((base / v).resolve()) if k in PATH_KEYS and isinstance(v, str) and v.startswith("..")
                    else _absolute(v, base)) for k, v in node.items()}
    if isinstance(node, list):
        return [_absolute(v, base) for v in node]
    return node


def copy_spec(name: str, dest: Path, **override) -> Path:
    src = LIB / "quickstart" / f"{name}.yaml"
    data = _absolute(yaml.safe_load(src.read_text(encoding="utf-8")), src.parent)
    data["holdout"] = [str((src.parent / h).resolve()) for h in data.get("holdout", [])]
    for key, value in override.items():
        data[key] = {**data.get(key, {}), **value}
    out = dest / "quickstart" / src.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", type=int, default=24, help="queries to grow (the library spec says 500)")
    ap.add_argument("--plans", type=int, default=6, help="grown queries to plan and judge")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data/queries-dev"), help="real queries")
    args = ap.parse_args()

    from mashbill.curation.reports.report_synth import DUP_CODES, SCREEN_CODES, distinct_n
    from mashbill.factory.generate.generate import generate
    from mashbill.factory.generate.judge import run_judge
    from mashbill.factory.generate.synth import pool_items
    from mashbill.factory.store import Store
    from mashbill.factory.teachers import make_teacher
    from mashbill.specs import load_spec
    from mashbill.validators.queries.queries import holdout_hits, holdout_items, synth_work

    with tempfile.TemporaryDirectory(prefix="mashbill-bench-synth-") as tmp:
        lib = Path(tmp) / "lib"
        qs = load_spec(copy_spec("quickstart-queries@3", lib, synthesis={"target": args.target}))
        plan = load_spec(copy_spec("quickstart-plan-grown@3", lib))
        with Store.open(Path(tmp) / "store") as store:
            teacher = make_teacher(qs.spec.teacher, threads=args.threads)
            try:
                t0 = time.perf_counter()
                s = generate(qs, store, teacher, work=synth_work(qs, store))
                synth_s = time.perf_counter() - t0
            finally:
                teacher.close()
            items = pool_items(store, qs)
            texts = [i["query"] for i in items]
            codes = store.verdict_counts(qs.hash)
            dropped = sum(codes.get(c, 0) for c in SCREEN_CODES)
            offered = len(texts) + dropped
            hits = holdout_hits(texts, holdout_items(qs))
            print(f"synthesis: {s.requested - s.not_needed} calls, {offered} queries offered, {len(texts)} kept "
                  f"(target {args.target}) in {synth_s:.1f}s; drops {dict(sorted(codes.items()))}")

            teacher = make_teacher(plan.spec.teacher, threads=args.threads)
            try:
                t0 = time.perf_counter()
                p = generate(plan, store, teacher, limit=args.plans)
                plan_s = time.perf_counter() - t0
            finally:
                teacher.close()
            judge = make_teacher(plan.spec.judge.teacher, threads=args.threads)
            try:
                t0 = time.perf_counter()
                j = run_judge(plan, store, judge, limit=args.plans)
                judge_s = time.perf_counter() - t0
            finally:
                judge.close()
    per_plan = plan_s / max(1, p.requested)
    per_judge = judge_s / max(1, j.requested)
    print(f"{'':22s}{'records':>8s}{'s/record':>10s}")
    print(f"{'plan generation':22s}{p.requested:8d}{per_plan:10.2f}")
    print(f"{'judge (score)':22s}{j.requested:8d}{per_judge:10.2f}   ({j.accepted} scored, {j.failed} unparseable)")
    from synth_quality import measure  # bench/ is the script's folder

    q = measure("report", args.data)
    print(f"queries_per_s={len(texts) / synth_s:.4f} accepted_share={len(texts) / max(1, offered):.4f} "
          f"dup_share={sum(codes.get(c, 0) for c in DUP_CODES) / max(1, offered):.4f} holdout_hits={hits} "
          f"distinct2={distinct_n(texts, 2):.4f} judge_overhead={per_judge / per_plan if per_plan else 0:.4f} "
          f"genuine_before={q['genuine_before']} genuine_precision={q['genuine_precision']} "
          f"screen_recall={q['screen_recall']} real_false_drop={q['real_false_drop']} "
          f"threads={args.threads} load1={os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
