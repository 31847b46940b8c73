"""`mashbill eval`: a student (a classify run folder, an ONNX classifier or a GGUF planner) on labelled sets.

Every set is loaded and checked against the target before anything runs or is written (a class the target does
not know, a planner set on a classifier or the reverse, an empty set: one line, nothing written). Then, on the
same rows: the student's metrics (exporters/evaluation/eval_metrics.py), the teacher's own answers where the store holds
them (records of the target's kind with the same request), and a baseline (the majority class of the target's
snapshot's train split, else of the set; the reference heuristic of the complexity rules for complexity labels).
The results go to `eval.json` beside the target (the run folder, or the artifact's export folder), one entry per
set keyed by its name with the set's sha256, and to `eval.html` with the confusion matrix drawn.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from mashbill.exporters.evaluation import eval_metrics as M
from mashbill.exporters.evaluation.eval_sets import EvalSet, EvalSetError, load_set
from mashbill.exporters.runs import ExportError
from mashbill.files import write_file_atomic

EVAL_FILE = "eval.json"
SCHEMA = "mashbill.eval/1"
COMPLEXITY_CLASSES = ("trivial", "moderate", "complex", "memory_recall")
COMPLEXITY_RULES = Path(__file__).resolve().parents[2] / "specs" / "library" / "shared" / "rules" / \
    "moe-complexity@3.yaml"


@dataclass
class Target:
    given: Path
    kind: str  # classifier | planner
    form: str  # run | onnx | gguf
    folder: Path  # where eval.json goes
    classes: list[str] = field(default_factory=list)
    multi_label: bool = False
    snapshot_path: Path | None = None
    lineage: dict = field(default_factory=dict)
    _impl: object = None

    def describe(self) -> dict:
        return {"path": str(self.given.resolve()), "form": self.form, "kind": self.kind,
                "classes": self.classes, "multi_label": self.multi_label,
                "snapshot": str(self.snapshot_path) if self.snapshot_path else None}


def open_target(path: str | Path, *, store: str | Path | None = None, threads: int = 1) -> Target:
    """The target as given: a run folder (lineage.json), an export folder (export.json) or an .onnx/.gguf file."""
    path = Path(path)
    if path.is_dir() and (path / "lineage.json").is_file():
        return _run_target(path, store)
    from mashbill.exporters.manifest import verified_artifact

    art, manifest = verified_artifact(path)  # an export is re-hashed against export.json before it answers
    snap = (manifest.get("snapshot") or {}).get("path") if manifest else None
    if art.suffix == ".onnx":
        from mashbill.exporters.predict import OnnxPredictor

        pred = OnnxPredictor(art, threads=threads)
        t = Target(path, "classifier", "onnx", art.parent, [pred.id2label[i] for i in sorted(pred.id2label)],
                   pred.multi_label, lineage=pred.lineage, _impl=pred)
    elif art.suffix == ".gguf":
        t = Target(path, "planner", "gguf", art.parent, _impl=("gguf", art, threads))
        from mashbill.exporters.gguf.gguf_meta import read_kv

        t.lineage = json.loads(read_kv(art).get("mashbill.lineage", "{}"))
    else:
        raise ExportError(f"{art}: unknown artifact type (expected .onnx or .gguf, a run folder or an export folder)")
    t.snapshot_path = _find_snapshot(snap, t.lineage, store)
    return t


def _find_snapshot(path: str | None, lineage: dict, store) -> Path | None:
    if path and Path(path).is_dir():
        return Path(path)
    ref = (lineage.get("snapshot") or {}).get("ref")
    if ref and store is not None:
        from mashbill.curation.snapshots.snapshot import SnapshotError, resolve_snapshot

        try:
            return resolve_snapshot(ref, Path(store) / "snapshots")
        except SnapshotError:
            return None
    return None


def _run_target(path: Path, store) -> Target:
    from mashbill.exporters.runs import load_run, snapshot_for

    run = load_run(path)
    if run.method != "classify":
        raise ExportError(f"{path}: an {run.method} run (a planner): evaluate its GGUF export "
                          f"(`mashbill export gguf {path}`), eval runs planners from the GGUF file")
    cfg = json.loads((run.model_dir / "config.json").read_text(encoding="utf-8"))
    id2label = {int(k): v for k, v in cfg.get("id2label", {}).items()}
    try:
        snap = snapshot_for(run, store=store).path
    except ExportError:
        snap = None
    return Target(path, "classifier", "run", path, [id2label[i] for i in sorted(id2label)],
                  cfg.get("problem_type") == "multi_label_classification", snap, run.lineage,
                  _impl=("run", run))


def check_set(target: Target, s: EvalSet) -> None:
    """Refuse a set the target cannot be measured on; one line naming the set and the first bad row."""
    if not len(s):
        raise EvalSetError(f"{s.name}: holds no rows")
    if s.kind != target.kind:
        raise EvalSetError(f"{s.name}: a {s.kind} set (gold {'plan facts' if s.kind == 'planner' else 'labels'}) "
                           f"on a {target.kind} ({target.given}); give a set of "
                           f"{'labels' if target.kind == 'classifier' else 'plan facts'}")
    if target.kind == "classifier":
        if s.multi_label != target.multi_label:
            raise EvalSetError(f"{s.name}: a {'multi' if s.multi_label else 'single'}-label set on a "
                               f"{'multi' if target.multi_label else 'single'}-label classifier")
        known = set(target.classes)
        for i, g in enumerate(s.gold, 1):
            bad = sorted(set(g if s.multi_label else [g]) - known)
            if bad:
                raise EvalSetError(f"{s.name}: row {i}: label {bad[0]!r} is not one of the target's classes "
                                   f"({', '.join(target.classes)})")


# ---------------------------------------------------------------- predictions


def classify(target: Target, queries: list[str]) -> tuple[list, list[list[float]]]:
    """(predicted labels, probabilities in `target.classes` order) for a classifier target."""
    import numpy as np

    if target.form == "onnx":
        pred = target._impl
        logits = np.concatenate([pred.logits_one(q) for q in queries])
    else:
        logits = _run_logits(target._impl[1], queries)
    probs = [(M.sigmoid if target.multi_label else M.softmax)(list(map(float, row))) for row in logits]
    if target.multi_label:
        labels = [sorted(target.classes[j] for j, p in enumerate(row) if p > 0.5) for row in probs]
    else:
        labels = [target.classes[max(range(len(row)), key=row.__getitem__)] for row in probs]
    return labels, probs


def _run_logits(run, queries: list[str]):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from mashbill.exporters.onnx.parity import torch_logits

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    model = AutoModelForSequenceClassification.from_pretrained(str(run.model_dir)).eval()
    tok = AutoTokenizer.from_pretrained(str(run.model_dir))
    cfg_path = run.path / "config.yaml"
    max_length = 128
    if cfg_path.is_file():
        import yaml

        max_length = int((yaml.safe_load(cfg_path.read_text(encoding="utf-8")) or {}).get("max_length") or 128)
    return torch_logits(model, tok, queries, max_length)


def plan(target: Target, queries: list[str], *, max_tokens: int = 256) -> tuple[list, list[bool], list[bool], dict]:
    """(outputs, schema valid, rules pass, info) for a GGUF planner, rules from its snapshot's spec."""
    from mashbill.exporters.predict import GgufPredictor

    _, art, threads = target._impl
    pred = GgufPredictor(art, threads=threads, max_tokens=max_tokens)
    try:
        rows = pred.predict(queries)
    finally:
        pred.close()
    outputs = [r["output"] if r["json"] else None for r in rows]
    check, info = _plan_checker(target, pred.schema)
    schema_ok, rules_ok = [], []
    for q, o in zip(queries, outputs):
        s_ok, r_ok = check(q, o)
        schema_ok.append(s_ok)
        rules_ok.append(r_ok)
    return outputs, schema_ok, rules_ok, info


def _plan_checker(target: Target, schema: dict | None):
    from mashbill.validators.plans.toolargs import compile_schema

    schema_err = compile_schema(schema) if schema else (lambda o: None)
    checker, info = None, {"rules": None}
    if target.snapshot_path is not None:
        from mashbill.curation.snapshots.snapshot import verify
        from mashbill.exporters.runs import Snapshot
        from mashbill.specs.loader import load_spec
        from mashbill.validators.checker import RecordChecker

        snap = Snapshot(target.snapshot_path, verify(target.snapshot_path))
        checker = RecordChecker.for_spec(load_spec(snap.spec_path()))
        info["rules"] = checker.engine

    def check(query: str, output) -> tuple[bool, bool]:
        if output is None:
            return False, False
        s_ok = schema_err(output) is None
        if checker is None:
            return s_ok, s_ok
        verdicts = checker.check({"query": query}, output)
        return s_ok, s_ok and not any(v.severity == "reject" for v in verdicts)

    return check, info


# ---------------------------------------------------------------- references


def teacher_answers(store_path, kind: str | None, queries: list[str]) -> dict[str, object]:
    """query -> the teacher's stored output (the latest record of `kind` with that request; None: no store)."""
    if store_path is None or kind is None or not (Path(store_path) / "mashbill.duckdb").is_file():
        return {}
    from mashbill.factory.store import Store

    want = set(queries)
    out: dict[str, object] = {}
    with Store.open(store_path, read_only=True, create=False) as store:
        for _, _, h, _ in store.stored_specs([kind]):
            for rec in store.records(h):
                q = (rec.input or {}).get("query")
                if q in want and rec.output is not None:
                    out[q] = rec.output
    return out


def _teacher_label(output, s: EvalSet, classes: list[str]):
    if s.multi_label:
        return M.plan_facts(output)["categories"] if isinstance(output, (list, dict)) else None
    label = output.get("complexity") if isinstance(output, dict) else None
    return label if label in classes else None


def _train_majority(target: Target):
    if target.snapshot_path is None:
        return None
    from mashbill.curation.snapshots.snapshot import verify
    from mashbill.exporters.onnx.parity import labelled_texts
    from mashbill.exporters.runs import Snapshot

    try:
        _, gold = labelled_texts(Snapshot(target.snapshot_path, verify(target.snapshot_path)), "train")
    except ExportError:
        return None
    return M.majority(gold)


def _heuristic(queries: list[str]) -> list[str]:
    from mashbill.validators.complexity.complexity import analyze, heuristic
    from mashbill.validators.complexity.complexity_rules import load_complexity_rules

    rs = load_complexity_rules(COMPLEXITY_RULES)
    return [heuristic(rs, analyze(rs, q))[0] for q in queries]


def _metrics(s: EvalSet, gold, pred, classes, probs=None) -> dict:
    return (M.multi_label if s.multi_label else M.single_label)(gold, pred, classes, probs)


def evaluate_classifier(target: Target, s: EvalSet, store=None) -> dict:
    pred, probs = classify(target, s.queries)
    classes = target.classes
    res = {"student": _metrics(s, s.gold, pred, classes, probs)}
    maj = _train_majority(target)
    source = "snapshot train split"
    if maj is None:
        maj, source = M.majority(s.gold), "eval set"
    res["baselines"] = {"majority": {"label": maj, "source": source,
                                     **_brief(_metrics(s, s.gold, [maj] * len(s), classes))}}
    if not s.multi_label and set(classes) <= set(COMPLEXITY_CLASSES):
        res["baselines"]["heuristic"] = {"rules": COMPLEXITY_RULES.name,
                                         **_brief(_metrics(s, s.gold, _heuristic(s.queries), classes))}
    kind = "plan" if s.multi_label else "complexity"
    taught = teacher_answers(store, kind, s.queries)
    pairs = [(g, _teacher_label(taught[q], s, classes)) for q, g in zip(s.queries, s.gold) if q in taught]
    pairs = [(g, t) for g, t in pairs if t is not None]
    res["teacher"] = ({"rows": len(pairs), **_brief(_metrics(s, [g for g, _ in pairs], [t for _, t in pairs],
                                                             sorted(set(classes) | {t for _, t in pairs
                                                                                    if isinstance(t, str)})))}
                      if pairs else {"rows": 0, "note": "the store holds no teacher answer for these requests"})
    res["predictions"] = [{"query": q, "gold": g, "predicted": p} for q, g, p in zip(s.queries, s.gold, pred)]
    return res


def evaluate_planner(target: Target, s: EvalSet, store=None, *, max_tokens: int = 256) -> dict:
    outputs, schema_ok, rules_ok, info = plan(target, s.queries, max_tokens=max_tokens)
    res = {"student": {**M.planner(outputs, s.gold, schema_ok, rules_ok), **info}}
    yard = s.meta.get("yardstick") == "plan"
    if yard:
        from mashbill.exporters.evaluation.plan_yardstick import renames

        res["student"]["yardstick"] = M.plan_yardstick(outputs, [g["yardstick"] for g in s.gold], renames())
    cats = [g["categories"] for g in s.gold if g and "categories" in g]
    if cats:
        maj = M.majority(cats)
        res["baselines"] = {"majority": {"categories": maj, "source": "eval set",
                                         "categories_right": round(sum(sorted(c) == sorted(maj) for c in cats)
                                                                   / len(cats), 4)}}
    taught = teacher_answers(store, "plan", s.queries)
    rows = [(taught[q], g) for q, g in zip(s.queries, s.gold) if q in taught]
    if rows:
        check, _ = _plan_checker(target, None)
        oks = [check(q, taught[q]) for q in s.queries if q in taught]
        res["teacher"] = {"rows": len(rows), **M.planner([o for o, _ in rows], [g for _, g in rows],
                                                         [a for a, _ in oks], [b for _, b in oks])}
        if yard:
            res["teacher"]["yardstick"] = M.plan_yardstick([o for o, _ in rows], [g["yardstick"] for _, g in rows],
                                                           renames())
    else:
        res["teacher"] = {"rows": 0, "note": "the store holds no teacher answer for these requests"}
    res["predictions"] = [{"query": q, "gold": g, "output": o,
                           **({"wrong": M.plan_verdict(o, g["yardstick"], renames())} if yard else {})}
                          for q, g, o in zip(s.queries, s.gold, outputs)]
    return res


def _brief(m: dict) -> dict:
    return {k: m[k] for k in ("n", "accuracy", "macro_f1") if k in m}


# ---------------------------------------------------------------- the command


def run_eval(target_path, set_refs: list[str], *, store=None, threads: int = 1, limit: int | None = None,
             max_tokens: int = 256, write: bool = True) -> dict:
    """Evaluate the target on every set; check everything first; write eval.json and eval.html beside it."""
    target = open_target(target_path, store=store, threads=threads)
    sets = []
    for ref in set_refs:
        s = load_set(ref, store=store, want=target.kind)
        if limit is not None:
            s.queries, s.gold = s.queries[:limit], s.gold[:limit]
        check_set(target, s)
        sets.append(s)
    results = {}
    for s in sets:
        r = (evaluate_classifier(target, s, store) if target.kind == "classifier"
             else evaluate_planner(target, s, store, max_tokens=max_tokens))
        results[s.name] = {"sha256": s.sha256, "rows": len(s), "kind": s.kind, "source": s.meta, **r}
    doc = {"schema": SCHEMA, "target": target.describe(), "lineage": target.lineage,
           "evaluated_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "sets": results}
    if write:
        path = target.folder / EVAL_FILE
        if path.is_file():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
                doc["sets"] = {**old.get("sets", {}), **results}
            except (OSError, json.JSONDecodeError):
                pass
        _atomic(path, json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")
        from mashbill.exporters.evaluation.eval_html import render

        _atomic(target.folder / "eval.html", render(doc))
        doc["written"] = [str(path), str(target.folder / "eval.html")]
    return doc


def _atomic(path: Path, text: str) -> None:
    write_file_atomic(path, text.encode("utf-8"))
