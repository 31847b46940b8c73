"""Right records per 100 requests: single shot vs repair with the verdict vs a vote or best-of-n, on a yardstick.

    .venv/bin/python bench/yield.py [--yardstick complexity|plan] [--split report|tune|all] [--limit N]
                                    [--methods single repair vote best_of_n] [--attempts 2] [--samples 3] [--threads 1]

Each method runs the one generate loop (`factory.generate.generate`, with `factory.generate.chains`) with the embedded SmolLM2-135M
teacher on the requests of `tests/fixtures/complexity_labels/labels.jsonl` (labelled by eye; report half by
default), with the prompt, teacher and rule set of quickstart-complexity@5, into a store of its own:
- `single`: one answer per request (today's quick start);
- `repair`: `repair: {max_attempts: --attempts, codes: every reject code of the rule set}`;
- `vote`: `samples: {n: --samples, pick: vote, vote_on: complexity}`;
- `retrieved`: retrieved examples (`examples: {bank, k: --k}`, factory.generate.examples) in place of the fixed
  examples block: the bank is the yardstick's *tune* half, labelled by eye (`accepted_by: review`), so a report
  request is shown the --k tune requests MiniLM ranks nearest, with their gold labels; `repair+retrieved` both.
For each: accepted share, precision of what is accepted (right / accepted, against the gold label), right records
per 100 requests, teacher seconds and tokens (in + out) per right record, and the repair success rate per code.

`--yardstick plan` runs the plan side instead (`plan_method_spec`, `run_plan_method`): the requests of
`tests/fixtures/plan_labels/labels.jsonl` with the prompt, taxonomy, tools, teacher and rule set of quickstart-plan@7;
methods `single`, `repair` (its repair section, `max_attempts: --attempts`) and `best_of_n`
(`samples: {n: --samples, pick: first-accepted}`), the rows round-robin over the sources (`--limit N` spans them);
an accepted plan is right when
`exporters.evaluation.plan_yardstick.score_records` (eval_metrics.plan_verdict) finds nothing wrong with it.

The NeMo Data Designer comparison of issue 27 is not built here: its
fields on the LAST line are `n/a`. The LAST line is machine-readable.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "complexity_labels" / "labels.jsonl"
SPEC = ROOT / "specs" / "library" / "quickstart" / "quickstart-complexity@5.yaml"
PLAN_SPEC = ROOT / "specs" / "library" / "quickstart" / "quickstart-plan@7.yaml"


def load_rows(split: str) -> list[dict]:
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split == "all" or r["split"] == split]


def method_spec(folder: Path, method: str, rows: list[dict], args) -> Path:
    """quickstart-complexity@5 with the yardstick's requests as seeds and the method's sections."""
    data = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    base = SPEC.parent
    data["name"], data["version"] = f"yield-{method}", 1
    data["seeds"] = [{"inline": [{"query": r["query"], "lang": r["lang"]} for r in rows]}]
    data["prompt"]["file"] = str((base / data["prompt"]["file"]).resolve())
    for key in ("output_schema", "rules"):
        data[key] = str((base / data[key]).resolve())
    data["trainer_profile"]["chat_template"] = str((base / data["trainer_profile"]["chat_template"]).resolve())
    repair = data.pop("repair")
    if method in ("repair", "repair+retrieved"):
        data["repair"] = {**repair, "max_attempts": args.attempts}
    elif method == "vote":
        data["samples"] = {"n": args.samples, "pick": "vote", "vote_on": "complexity"}
    elif method == "best_of_n":
        data["samples"] = {"n": args.samples, "pick": "first-accepted"}
    if method in ("retrieved", "repair+retrieved"):
        retrieved_sections(data, folder, args)
    data["name"] = f"yield-{method.replace('+', '-')}"
    path = folder / f"{data['name']}@1.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def retrieved_sections(data: dict, folder: Path, args) -> None:
    """The `retrieved` method's change to the spec: a bank of the tune half's gold labels in place of the fixed
    examples block (the report half is what is measured, so no request is ever in its own bank)."""
    bank = folder / "yardstick-tune@1.jsonl"
    if not bank.exists():
        from mashbill.hashing import sha256_text

        rows = [{"id": f"tune-{i:04d}", "query": r["query"], "lang": r["lang"], "output": {"complexity": r["label"]},
                 "record_id": "label:" + sha256_text(r["query"])[:24], "spec": "complexity_labels",
                 "accepted_by": "review", "split": "train"} for i, r in enumerate(load_rows("tune"), 1)]
        bank.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    data["examples"] = {"bank": str(bank), "k": args.k}
    teacher = data["prompt"]["teacher"]
    teacher["system"] = teacher["system"].replace("{{ examples }}", "EXAMPLES\n{{ retrieved_examples }}")


def run_method(method: str, rows: list[dict], teacher, folder: Path, args) -> dict:
    from mashbill.factory.generate.generate import generate
    from mashbill.factory.store import Store
    from mashbill.specs import load_spec
    from mashbill.validators.checker import RecordChecker

    rs = load_spec(method_spec(folder, method, rows, args))
    gold = {r["query"]: r["label"] for r in rows}
    with Store.open(folder / method) as store:
        summary = generate(rs, store, teacher, checks=[RecordChecker.for_spec(rs).factory_check()])
        records = store.records(spec_hash=rs.hash, status=None)
    accepted = [r for r in records if r.status == "accepted"]
    right = sum(1 for r in accepted if r.output.get("complexity") == gold[r.input["query"]])
    snap = summary.accounting.snapshot(summary.wall_s)
    n = len(rows)
    return {"method": method, "requests": n, "accepted": len(accepted), "right": right,
            "accepted_share": len(accepted) / n, "precision": right / len(accepted) if accepted else 0.0,
            "right_per_100": 100 * right / n, "teacher_s": snap["teacher_s"],
            "tokens": snap["tokens_in"] + snap["tokens_out"], "calls": snap["calls"],
            "teacher_s_per_right": snap["teacher_s"] / right if right else None,
            "tokens_per_right": (snap["tokens_in"] + snap["tokens_out"]) / right if right else None,
            "repair": snap.get("repair", {}).get("by_code", {})}


# ---------------------------------------------------------------- the plan yardstick (--yardstick plan)


def plan_method_spec(folder: Path, method: str, rows: list[dict], args) -> Path:
    """quickstart-plan@7 with the plan yardstick's requests as seeds and the method's sections."""
    data = yaml.safe_load(PLAN_SPEC.read_text(encoding="utf-8"))
    base = PLAN_SPEC.parent
    data["name"], data["version"] = f"yield-plan-{method}", 1
    data["seeds"] = [{"inline": [{"query": r["query"], "lang": r["lang"]} for r in rows]}]
    for key in ("prompt", "taxonomy", "tools"):
        data[key]["file"] = str((base / data[key]["file"]).resolve())
    for key in ("output_schema", "rules"):
        data[key] = str((base / data[key]).resolve())
    data["trainer_profile"]["chat_template"] = str((base / data["trainer_profile"]["chat_template"]).resolve())
    repair = data.pop("repair")
    if method == "repair":
        data["repair"] = {**repair, "max_attempts": args.attempts}
    elif method == "best_of_n":
        data["samples"] = {"n": args.samples, "pick": "first-accepted"}
    elif method != "single":
        raise SystemExit(f"bench/yield.py: method {method!r} has no plan side (single, repair, best_of_n)")
    path = folder / f"yield-plan-{method}@1.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def run_plan_method(method: str, rows: list[dict], teacher, folder: Path, args) -> dict:
    """One method on the plan yardstick; the same fields as `run_method`, right = the yardstick scorer's verdict."""
    from mashbill.exporters.evaluation.plan_yardstick import score_records
    from mashbill.factory.generate.generate import generate
    from mashbill.factory.store import Store
    from mashbill.specs import load_spec
    from mashbill.validators.checker import RecordChecker

    rs = load_spec(plan_method_spec(folder, method, rows, args))
    with Store.open(folder / f"plan-{method}") as store:
        summary = generate(rs, store, teacher, checks=[RecordChecker.for_spec(rs).factory_check()])
        records = store.records(spec_hash=rs.hash, status=None)
    scored = score_records(records, rows)
    accepted, right = scored["accepted"], scored["right"]
    snap = summary.accounting.snapshot(summary.wall_s)
    n = len(rows)
    return {"method": method, "requests": n, "accepted": accepted, "right": right,
            "accepted_share": accepted / n, "precision": right / accepted if accepted else 0.0,
            "right_per_100": 100 * right / n, "teacher_s": snap["teacher_s"],
            "tokens": snap["tokens_in"] + snap["tokens_out"], "calls": snap["calls"],
            "teacher_s_per_right": snap["teacher_s"] / right if right else None,
            "tokens_per_right": (snap["tokens_in"] + snap["tokens_out"]) / right if right else None,
            "repair": snap.get("repair", {}).get("by_code", {}), "wrong_by": scored["wrong_by"]}


def load_plan_rows(split: str) -> list[dict]:
    """The plan yardstick's rows of `split`, round-robin over the sources (each in file order), so that the first
    N (`--limit N`) span the sources rather than the 26 quick-start seeds the file starts with."""
    from itertools import chain, zip_longest

    from mashbill.exporters.evaluation.plan_yardstick import load_rows

    by: dict[str, list[dict]] = {}
    for r in load_rows(split):
        by.setdefault(r["source"], []).append(r)
    return [r for r in chain.from_iterable(zip_longest(*by.values())) if r is not None]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--yardstick", default="complexity", choices=("complexity", "plan"),
                    help="complexity: labels, quickstart-complexity@5; plan: plans, quickstart-plan@7")
    ap.add_argument("--split", default="report", choices=("report", "tune", "all"))
    ap.add_argument("--limit", type=int, default=None, help="only the first N requests of the split")
    ap.add_argument("--methods", nargs="+", default=None,
                    choices=("single", "repair", "vote", "best_of_n", "retrieved", "repair+retrieved"),
                    help="default: single repair vote (complexity), single repair best_of_n (plan); retrieved and "
                         "repair+retrieved: complexity only")
    ap.add_argument("--attempts", type=int, default=2, help="repair: max_attempts")
    ap.add_argument("--samples", type=int, default=3, help="vote / best_of_n: samples per request")
    ap.add_argument("--k", type=int, default=6, help="retrieved: bank rows shown per request")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads (1: spinning threads stall on a busy machine)")
    args = ap.parse_args()

    from mashbill.factory.teachers import make_teacher
    from mashbill.specs import load_spec

    plan = args.yardstick == "plan"
    args.methods = args.methods or (["single", "repair", "best_of_n"] if plan else ["single", "repair", "vote"])
    if plan and {"vote", "retrieved", "repair+retrieved"} & set(args.methods):
        ap.error("--yardstick plan runs single, repair and best_of_n (quickstart-plan@8 is the retrieved plan spec)")
    rows = (load_plan_rows if plan else load_rows)(args.split)[: args.limit]
    teacher = make_teacher(load_spec(PLAN_SPEC if plan else SPEC).spec.teacher, threads=args.threads)
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="mashbill-yield-") as tmp:
            for method in args.methods:
                res = (run_plan_method if plan else run_method)(method, rows, teacher, Path(tmp), args)
                results.append(res)
                per_s = f"{res['teacher_s_per_right']:.2f}" if res["teacher_s_per_right"] else "n/a"
                print(f"{method:7s} accepted {res['accepted']}/{res['requests']} ({res['accepted_share']:.3f}) "
                      f"precision {res['precision']:.3f} right/100 {res['right_per_100']:.1f} calls {res['calls']} "
                      f"teacher_s {res['teacher_s']:.1f} teacher_s/right {per_s} tokens/right "
                      f"{res['tokens_per_right'] and round(res['tokens_per_right'])}")
                if res["repair"]:
                    print("        repair success per code: " + ", ".join(
                        f"{c} {v['fixed']}/{v['tried']}" for c, v in res["repair"].items()))
                if res.get("wrong_by"):
                    print("        accepted but wrong: " + ", ".join(f"{k} {v}" for k, v in res["wrong_by"].items()))
                sys.stdout.flush()
    finally:
        teacher.close()
    by = {r["method"]: r for r in results}
    best = max(results, key=lambda r: (r["right_per_100"], r["precision"]))
    single = by.get("single")
    tried = sum(v["tried"] for v in by.get("repair", {}).get("repair", {}).values())
    fixed = sum(v["fixed"] for v in by.get("repair", {}).get("repair", {}).values())

    def f(x, fmt="{:.3f}"):
        return "n/a" if x is None else fmt.format(x)

    print(f"single_right_per_100={f(single and single['right_per_100'], '{:.1f}')} "
          f"best_right_per_100={best['right_per_100']:.1f} dd_right_per_100=n/a "
          f"single_precision={f(single and single['precision'])} best_precision={best['precision']:.3f} "
          f"dd_precision=n/a best_teacher_s_per_right={f(best['teacher_s_per_right'], '{:.2f}')} "
          f"dd_teacher_s_per_right=n/a repair_success_rate={f(fixed / tried if tried else None)} "
          f"best_method={best['method']} rows={len(rows)} split={args.split} yardstick={args.yardstick}")


if __name__ == "__main__":
    main()
