"""Right records per 100 requests: single shot vs repair with the verdict vs a vote or best-of-n, on a yardstick.

    .venv/bin/python bench/yield.py [--yardstick complexity|plan] [--split report|tune|all] [--limit N]
                                    [--methods single repair restart vote best_of_n retrieved repair+retrieved]
                                    [--attempts 2] [--samples 3] [--k 6] [--threads 1]
                                    [--teacher embedded|server] [--dd] [--dd-python PATH]

Each method runs the one generate loop (`factory.generate.generate`, with `factory.generate.chains`) with the embedded SmolLM2-135M
teacher on the requests of `tests/fixtures/complexity_labels/labels.jsonl` (labelled by eye; report half by
default), with the prompt, teacher and rule set of quickstart-complexity@5, into a store of its own:
- `single`: one answer per request (today's quick start);
- `repair`: `repair: {max_attempts: --attempts, codes: every reject code of the rule set}` (the conversation goes on);
- `restart`: the same with `mode: restart` (the request asked afresh with the verdicts, the rejected answer not shown);
- `vote`: `samples: {n: --samples, pick: vote, vote_on: complexity}`;
- `retrieved`: retrieved examples (`examples: {bank, k: --k}`, factory.generate.examples) in place of the fixed
  examples block: the bank is the yardstick's *tune* half, labelled by eye (`accepted_by: review`), so a report
  request is shown the --k tune requests MiniLM ranks nearest, with their gold labels; `repair+retrieved` both.
For each: accepted share, precision of what is accepted (right / accepted, against the gold label), right records
per 100 requests, teacher seconds and tokens (in + out) per right record, and the repair success rate per code.

`--yardstick plan` runs the plan side instead (`plan_method_spec`, `run_plan_method`): the requests of
`tests/fixtures/plan_labels/labels.jsonl` with the prompt, taxonomy, tools, teacher and rule set of quickstart-plan@7;
methods `single`, `repair` (its repair section, `max_attempts: --attempts`), `restart`, `best_of_n`
(`samples: {n: --samples, pick: first-accepted}`), and `retrieved` / `repair+retrieved` with quickstart-plan@8's
retrieved examples, the rows round-robin over the sources (`--limit N` spans them);
an accepted plan is right when
`exporters.evaluation.plan_yardstick.score_records` (eval_metrics.plan_verdict) finds nothing wrong with it.

`--teacher server` asks the same GGUF behind llama.cpp's OpenAI-compatible server on 127.0.0.1
(bench/yield_server.py) through the OpenAI-compatible teacher instead of the in-process one: the repair path is not
tied to the embedded teacher. `--dd` runs NeMo Data Designer (`data-designer`, in its own environment:
--dd-python, default ~/.cache/mashbill-dd-venv/bin/python) against that server on the same requests, rendered
prompts and schema, with `max_correction_steps` = --attempts, and scores its outputs with the same yardstick and rule
set (bench/yield_dd.py), in two setups (--dd-setups): `prompted` (DD's own: the schema in the prompt, DD parses and
corrects) and `constrained` (the schema also enforced by the server, through DD's extra_body); the LAST line's dd_
fields are the better setup's (`dd_setup=`). Where DD cannot run, it says where it stopped and its fields are `n/a`.

`--teacher server` and `--dd` run on the complexity side; the plan side asks the embedded teacher.
The LAST line is machine-readable; it ends with `teacher=embedded|server`, `dd_setup=` (`n/a` without --dd) and
`yardstick=`.
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
SPEC = ROOT / "specs" / "library" / "archive" / "quickstart" / "quickstart-complexity@5.yaml"  # superseded by @6
PLAN_SPEC = ROOT / "specs" / "library" / "archive" / "quickstart" / "quickstart-plan@7.yaml"  # superseded by @11
PLAN_RETRIEVED_SPEC = ROOT / "specs" / "library" / "archive" / "quickstart" / "quickstart-plan@8.yaml"  # superseded by @9


def load_rows(split: str) -> list[dict]:
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split == "all" or r["split"] == split]


def seeded_spec(spec: Path, name: str, rows: list[dict], file_sections: tuple[str, ...], args) -> dict:
    """A library spec's data as a spec of its own: the yardstick's requests as inline seeds, every referenced
    file by absolute path (the copy lives in a temporary folder) and --repeat-penalty applied."""
    from mashbill.specs.loader import spec_home

    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    base = spec_home(spec)
    data["name"], data["version"] = name, 1
    data["seeds"] = [{"inline": [{"query": r["query"], "lang": r["lang"]} for r in rows]}]
    for key in file_sections:
        data[key]["file"] = str((base / data[key]["file"]).resolve())
    for key in ("output_schema", "rules"):
        data[key] = str((base / data[key]).resolve())
    data["trainer_profile"]["chat_template"] = str((base / data["trainer_profile"]["chat_template"]).resolve())
    if "examples" in data:
        data["examples"]["bank"] = str((base / data["examples"]["bank"]).resolve())
    if "holdout" in data:
        data["holdout"] = [str((base / h).resolve()) for h in data["holdout"]]
    if getattr(args, "repeat_penalty", None) is not None:
        data["teacher"]["sampling"]["repeat_penalty"] = args.repeat_penalty
    return data


def parts(method: str) -> set[str]:
    """The methods a combined method is made of (`vote+retrieved`: a vote, each sample shown retrieved examples)."""
    return set(method.split("+"))


def repair_for(method: str, repair: dict, args) -> dict | None:
    """The repair section of a repairing method (the spec's, with --attempts; `restart` asks afresh), else None."""
    if not parts(method) & {"repair", "restart"}:
        return None
    section = {**repair, "max_attempts": args.attempts}
    return {**section, "mode": "restart"} if "restart" in parts(method) else section


def method_spec(folder: Path, method: str, rows: list[dict], args) -> Path:
    """quickstart-complexity@5 with the yardstick's requests as seeds and the method's sections."""
    data = seeded_spec(SPEC, f"yield-{method}", rows, ("prompt",), args)
    repair = data.pop("repair")
    if getattr(args, "teacher", "embedded") == "server":  # --teacher server: the same GGUF behind llama.cpp's server
        from yield_server import SERVER_RUNTIME, server_teacher

        data["teacher"] = server_teacher(data["teacher"])
        data["runtime"] = {**data.get("runtime", {}), **SERVER_RUNTIME}
    if (section := repair_for(method, repair, args)) is not None:
        data["repair"] = section
    elif "vote" in parts(method):
        data["samples"] = {"n": args.samples, "pick": "vote", "vote_on": "complexity"}
    elif "best_of_n" in parts(method):
        data["samples"] = {"n": args.samples, "pick": "first-accepted"}
    if "retrieved" in parts(method):
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
        summary = generate(rs, store, teacher, checks=[RecordChecker.for_spec(rs).factory_check()],
                           work=bench_work(rs, method, rows, args))
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
    """quickstart-plan@7 (quickstart-plan@8 for the retrieved methods) with the plan yardstick's requests as seeds
    and the method's sections."""
    spec = PLAN_RETRIEVED_SPEC if "retrieved" in parts(method) else PLAN_SPEC
    name = f"yield-plan-{method.replace('+', '-')}"
    data = seeded_spec(spec, name, rows, ("prompt", "taxonomy", "tools"), args)
    repair = data.pop("repair")
    if (section := repair_for(method, repair, args)) is not None:
        data["repair"] = section
    elif "best_of_n" in parts(method):
        data["samples"] = {"n": args.samples, "pick": "first-accepted"}
    elif parts(method) - {"single", "retrieved"}:
        raise SystemExit(f"bench/yield.py: method {method!r} has no plan side "
                         "(single, repair, restart, best_of_n, retrieved, repair+retrieved)")
    path = folder / f"{name}@1.yaml"
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


def bench_work(rs, method: str, rows: list[dict], args):
    """None (the spec's own work) with the embedded teacher; with the server, the same work asking the prompts
    the embedded teacher gets for this method (bench/yield_server.py: same_prompts_work)."""
    if getattr(args, "teacher", "embedded") != "server":
        return None
    import argparse

    from yield_server import same_prompts_work

    from mashbill.specs import load_spec

    embedded = argparse.Namespace(**{**vars(args), "teacher": "embedded"})
    with tempfile.TemporaryDirectory(prefix="mashbill-yield-key-") as tmp:
        key_hash = load_spec(method_spec(Path(tmp), method, rows, embedded)).hash
    return same_prompts_work(rs, key_hash)


def start_server(args):
    """--teacher server or --dd: llama.cpp's server on the embedded teacher's GGUF (bench/yield_server.py)."""
    from yield_server import LlamaServer, embedded_gguf

    from mashbill.specs import load_spec

    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a killed bench stops its server too (finally)
    teacher = load_spec(SPEC).spec.teacher
    server = LlamaServer(embedded_gguf(teacher.model), threads=args.threads, n_ctx=teacher.n_ctx,
                         seed=teacher.sampling.seed).start()
    args.server_url = server.url
    print(f"server: llama.cpp's server on {server.url} serving {server.model.name} as smollm2 "
          f"({args.threads} thread(s))")
    return server


def make_bench_teacher(args, rows):
    """The teacher every method shares: embedded (in-process) or the server's, checked before any bulk work."""
    from mashbill.factory.teachers import make_teacher
    from mashbill.specs import load_spec

    if args.teacher == "embedded":
        return make_teacher(load_spec(PLAN_SPEC if getattr(args, "yardstick", "complexity") == "plan" else SPEC).spec.teacher,
                            threads=args.threads)
    with tempfile.TemporaryDirectory(prefix="mashbill-yield-probe-") as tmp:
        rs = load_spec(method_spec(Path(tmp), "single", rows, args))
    teacher = make_teacher(rs.spec.teacher, runtime=rs.spec.runtime, base_url=args.server_url)
    teacher.check_schema(rs.output_schema)  # the preflight: reachable, serves smollm2, enforces the schema
    return teacher


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--yardstick", default="complexity", choices=("complexity", "plan"),
                    help="complexity: labels, quickstart-complexity@5; plan: plans, quickstart-plan@7")
    ap.add_argument("--split", default="report", choices=("report", "tune", "all"))
    ap.add_argument("--limit", type=int, default=None, help="only the first N requests of the split")
    ap.add_argument("--methods", nargs="+", default=None,
                    choices=("single", "repair", "restart", "vote", "best_of_n", "retrieved", "repair+retrieved",
                             "vote+retrieved"),
                    help="default: single repair vote (complexity), single repair best_of_n (plan); vote and "
                         "vote+retrieved: complexity only")
    ap.add_argument("--attempts", type=int, default=2, help="repair: max_attempts")
    ap.add_argument("--samples", type=int, default=3, help="vote / best_of_n: samples per request")
    ap.add_argument("--k", type=int, default=6, help="retrieved: bank rows shown per request")
    ap.add_argument("--repeat-penalty", type=float, default=None,
                    help="the teacher's repeat_penalty for every method (default: the spec's, 1.0)")
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads (1: spinning threads stall on a busy machine)")
    ap.add_argument("--teacher", default="embedded", choices=("embedded", "server"),
                    help="embedded: llama.cpp in-process; server: the same GGUF behind llama.cpp's server")
    ap.add_argument("--dd", action="store_true", help="also run NeMo Data Designer against the server")
    ap.add_argument("--dd-python", default=None, help="the Data Designer environment's python")
    ap.add_argument("--dd-setups", nargs="+", default=["prompted", "constrained"],
                    choices=("prompted", "constrained"), help="prompted: DD's schema in the prompt (its default); "
                    "constrained: also enforced by the server through DD's extra_body")
    ap.add_argument("--dd-as-sent", action="store_true", help="forward DD's requests unchanged (llama-cpp-python's "
                    "server then refuses its content-part lists: shows where DD stops without the proxy's join)")
    ap.add_argument("--dd-keep", default=None, help="copy Data Designer's requests, rows and calls into this folder")
    args = ap.parse_args()

    plan = args.yardstick == "plan"
    args.methods = args.methods or (["single", "repair", "best_of_n"] if plan else ["single", "repair", "vote"])
    if plan and any("vote" in parts(m) for m in args.methods):
        ap.error("--yardstick plan runs single, repair, restart, best_of_n, retrieved and repair+retrieved (no vote)")
    if plan and (args.teacher == "server" or args.dd):
        ap.error("--yardstick plan asks the embedded teacher; --teacher server and --dd run on the complexity side")
    rows = (load_plan_rows if plan else load_rows)(args.split)[: args.limit]
    server = start_server(args) if args.teacher == "server" or args.dd else None
    dd, teacher = None, None
    results = []
    try:
        teacher = make_bench_teacher(args, rows)
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
            if args.dd:
                from yield_dd import run_dd

                from mashbill.specs import load_spec

                spec = method_spec(Path(tmp), "single", rows, args)  # DD gets the prompts single shot sends
                work = bench_work(load_spec(spec), "single", rows, args)
                ran = [run_dd(args, rows, spec, Path(tmp) / f"dd-{s}", s, work) for s in args.dd_setups]
                ran = [r for r in ran if "stopped" not in r]
                dd = max(ran, key=lambda r: (r["right_per_100"], r["precision"])) if ran else None
    finally:
        if teacher is not None:
            teacher.close()
        if server is not None:
            server.stop()
    by = {r["method"]: r for r in results}
    best = max(results, key=lambda r: (r["right_per_100"], r["precision"]))
    single = by.get("single")

    def fix_rate(*methods):
        res = next((by[m] for m in methods if m in by), {})
        tried = sum(v["tried"] for v in res.get("repair", {}).values())
        return sum(v["fixed"] for v in res.get("repair", {}).values()) / tried if tried else None

    def f(x, fmt="{:.3f}"):
        return "n/a" if x is None else fmt.format(x)

    dd = dd or {}
    print(f"load {open('/proc/loadavg').read().strip()}")
    print(f"single_right_per_100={f(single and single['right_per_100'], '{:.1f}')} "
          f"best_right_per_100={best['right_per_100']:.1f} dd_right_per_100={f(dd.get('right_per_100'), '{:.1f}')} "
          f"single_precision={f(single and single['precision'])} best_precision={best['precision']:.3f} "
          f"dd_precision={f(dd.get('precision'))} best_teacher_s_per_right={f(best['teacher_s_per_right'], '{:.2f}')} "
          f"dd_teacher_s_per_right={f(dd.get('teacher_s_per_right'), '{:.2f}')} "
          f"repair_success_rate={f(fix_rate('repair', 'repair+retrieved'))} "
          f"restart_success_rate={f(fix_rate('restart'))} "
          f"best_method={best['method']} rows={len(rows)} split={args.split} teacher={args.teacher} "
          f"dd_setup={dd['method'][3:] if dd else 'n/a'} yardstick={args.yardstick} "
          f"repeat_penalty={args.repeat_penalty or 'spec'}")


if __name__ == "__main__":
    main()
