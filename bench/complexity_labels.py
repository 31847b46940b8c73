"""How right are complexity labels? The teacher, the rules and the reference heuristic on a yardstick labelled by eye.

    .venv/bin/python bench/complexity_labels.py [--spec SPEC.yaml] [--rules FILE ...] [--split report|tune|all]
                                                [--mode sample|score|calibrated ...] [--limit N] [--show N]

The yardstick is `tests/fixtures/complexity_labels/labels.jsonl` (213 requests: 161 real queries from queries-dev and
the 52 quick-start requests, labelled by eye with the class definitions in that folder's README; tune/report halves by
a stable hash). For each teacher mode, on the chosen split:
- teacher accuracy and per-class confusion (gold -> label counts);
- for each rule file: the accepted share (no reject verdict) and the precision of what is accepted (accepted and
  right / accepted), next to the teacher's accuracy on everything;
- the reference heuristic's accuracy (DOMAIN §6.1 without DeBERTa, from the last rule file's cues).

Teacher modes: `sample` is the spec's own sampled JSON (what `generate` stores); `score` scores each class's JSON answer
by the teacher's log-probability and takes the best; `calibrated` subtracts the same scores for a content-free request
("N/A", Zhao et al. 2021) first. The LAST line is machine-readable: one `key=value` per mode and rule file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "complexity_labels" / "labels.jsonl"
RULES_DIR = ROOT / "specs" / "library" / "shared" / "rules"
SPEC = ROOT / "specs" / "library" / "quickstart" / "quickstart-complexity@4.yaml"  # the prompt and teacher of @1-@4
CLASSES = ("trivial", "moderate", "complex", "memory_recall")


def load_rows(split: str) -> list[dict]:
    rows = [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split == "all" or r["split"] == split]


def accepted_precision(rs, rows: list[dict], labels: list[str | None], flags_reject: bool = False,
                       per_class: Counter | None = None) -> tuple[int, int]:
    """(accepted, accepted and right) under rule set `rs` (`flags_reject`: a flag, CPLX006, rejects too);
    `per_class` collects (label, right) counts of what is accepted."""
    from mashbill.validators.complexity.complexity import check_complexity

    acc = right = 0
    for r, label in zip(rows, labels):
        if label is None:
            continue
        if any(v.severity == "reject" or flags_reject for v in check_complexity(rs, r["query"], {"complexity": label})):
            continue
        acc += 1
        right += label == r["label"]
        if per_class is not None:
            per_class[(label, label == r["label"])] += 1
    return acc, right


def _rate(a: int, b: int) -> str:
    """a/b to three places, or n/a for an empty denominator (no label accepted is no precision of 0)."""
    return f"{a / b:.3f}" if b else "n/a"


def sampled_labels(rs_spec, teacher, rows: list[dict]) -> list[str | None]:
    from mashbill.factory.teachers.base import TeacherRequest
    from mashbill.specs.prompting import render_prompt

    sampling = rs_spec.spec.teacher.sampling.model_dump()
    reqs = []
    for i, r in enumerate(rows):
        p = render_prompt(rs_spec, {"query": r["query"], "lang": r["lang"], "type": ""}, f"y{i}")
        reqs.append(TeacherRequest(f"y{i}", p.teacher_messages, rs_spec.output_schema, sampling))
    out: dict[str, str | None] = {}
    for res in teacher.generate(reqs):
        try:
            label = json.loads(res.text or "").get("complexity")
        except (ValueError, AttributeError):
            label = None
        out[res.request.record_id] = label if label in CLASSES else None
    return [out[f"y{i}"] for i in range(len(rows))]


def scored_labels(rs_spec, teacher, rows: list[dict], calibrated: bool) -> list[str]:
    """The best class by log-probability (`calibrated`: minus a content-free request's, per prompt variant)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "lab"))
    from label_scores import calibrated_scores, content_free, enum_answers
    from mashbill.specs.prompting import render_prompt

    answers = enum_answers(rs_spec.output_schema, "complexity")
    priors: dict[str, dict] = {}
    out = []
    for i, r in enumerate(rows):
        msgs = list(render_prompt(rs_spec, {"query": r["query"], "lang": r["lang"], "type": ""}, f"y{i}")
                    .teacher_messages)
        prior = None
        if calibrated:
            free = content_free(msgs, "N/A")
            key = json.dumps(free, sort_keys=True)
            prior = priors.get(key) or priors.setdefault(key, calibrated_scores(teacher.llm, free, answers, None))
        s = calibrated_scores(teacher.llm, msgs, answers, prior)
        out.append(max(s, key=s.get))
    return out


def confusion(rows: list[dict], labels: list[str | None]) -> str:
    c = Counter((r["label"], lab) for r, lab in zip(rows, labels))
    parts = []
    for g in CLASSES:
        row = " ".join(f"{(p or 'none')[:4]}:{c[(g, p)]}" for p in (*CLASSES, None) if c[(g, p)])
        if row:
            parts.append(f"  gold {g:13s} -> {row}")
    return "\n".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", type=Path, default=SPEC)
    ap.add_argument("--rules", type=Path, nargs="+",
                    default=[RULES_DIR / f"moe-complexity@{v}.yaml" for v in (1, 2, 3)])
    ap.add_argument("--split", default="report", choices=("report", "tune", "all"))
    ap.add_argument("--mode", nargs="+", default=["sample", "score", "calibrated"],
                    choices=("sample", "score", "calibrated"))
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads (1: spinning threads stall on a busy machine)")
    ap.add_argument("--show", type=int, default=0, help="print up to N wrong accepted labels per mode (tune split!)")
    ap.add_argument("--save-labels", type=Path, default=None,
                    help="write the teacher's labels per mode to this JSON file (query -> label), to rerun rules on them")
    ap.add_argument("--labels", type=Path, default=None,
                    help="read the teacher's labels per mode from a --save-labels file instead of running the teacher")
    args = ap.parse_args()

    from mashbill.factory.teachers import make_teacher
    from mashbill.specs.loader import load_spec
    from mashbill.validators.complexity.complexity import analyze, heuristic
    from mashbill.validators.complexity.complexity_rules import load_complexity_rules

    rows = load_rows(args.split)[: args.limit]
    rulesets = [(p.stem, load_complexity_rules(p)) for p in args.rules]
    rs_spec = load_spec(args.spec)
    saved = json.loads(args.labels.read_text(encoding="utf-8")) if args.labels else None
    teacher = None if saved else make_teacher(rs_spec.spec.teacher, threads=args.threads)
    keep: dict[str, dict[str, str | None]] = {}
    last: list[str] = []
    heur = [heuristic(rulesets[-1][1], analyze(rulesets[-1][1], r["query"]))[0] for r in rows]
    h_acc = _rate(sum(h == r["label"] for h, r in zip(heur, rows)), len(rows))
    print(f"split={args.split} rows={len(rows)} gold={dict(Counter(r['label'] for r in rows))}")
    print(f"heuristic accuracy={h_acc}")
    last.append(f"heuristic_acc={h_acc}")
    try:
        for mode in args.mode:
            if saved is not None:
                if mode not in saved or any(r["query"] not in saved[mode] for r in rows):
                    # a --save-labels file of a run with fewer modes (the default asks for all three)
                    print(f"mode={mode}: not in {args.labels} (it holds {sorted(saved)}), skipped")
                    last.append(f"{mode}_acc=n/a")
                    continue
                labels = [saved[mode][r["query"]] for r in rows]
            else:
                labels = (sampled_labels(rs_spec, teacher, rows) if mode == "sample"
                          else scored_labels(rs_spec, teacher, rows, calibrated=mode == "calibrated"))
            keep[mode] = {r["query"]: lab for r, lab in zip(rows, labels)}
            acc = _rate(sum(lab == r["label"] for lab, r in zip(labels, rows)), len(rows))
            print(f"mode={mode} teacher accuracy={acc} labels={dict(Counter(labels))}")
            print(confusion(rows, labels))
            last.append(f"{mode}_acc={acc}")
            for name, rs in rulesets:
                per: Counter = Counter()
                a, right = accepted_precision(rs, rows, labels, per_class=per)
                prec = _rate(right, a)
                classes = ", ".join(f"{c} {per[(c, True)]}/{per[(c, True)] + per[(c, False)]}" for c in CLASSES
                                    if per[(c, True)] + per[(c, False)])
                print(f"  rules={name}: accepted {a}/{len(rows)} ({_rate(a, len(rows))}), right {right} "
                      f"(precision {prec}; right/accepted per class: {classes or 'none'})")
                tag = name.replace("moe-complexity@", "r")
                last.append(f"{mode}_{tag}_accepted={_rate(a, len(rows))} {mode}_{tag}_precision={prec}")
                if name == rulesets[-1][0]:  # what promoting the heuristic flag (CPLX006) to a reject would do
                    a, right = accepted_precision(rs, rows, labels, flags_reject=True)
                    print(f"  rules={name} with CPLX006 as a reject: accepted {a}/{len(rows)}, right {right} "
                          f"(precision {_rate(right, a)})")
                if args.show and name == rulesets[-1][0]:
                    from mashbill.validators.complexity.complexity import check_complexity
                    shown = 0
                    for r, lab in zip(rows, labels):
                        if lab != r["label"] and shown < args.show and not any(
                                v.severity == "reject" for v in check_complexity(rs, r["query"], {"complexity": lab})):
                            shown += 1
                            print(f"    accepted wrong: {lab} (gold {r['label']}) {r['query'][:110]!r}")
            sys.stdout.flush()
    finally:
        if teacher is not None:
            teacher.close()
    if args.save_labels:
        args.save_labels.write_text(json.dumps(keep, ensure_ascii=False, indent=0), encoding="utf-8")
    print(" ".join(last) + f" rows={len(rows)}")


if __name__ == "__main__":
    main()
