"""Labelled evaluation sets for `mashbill eval`: a user's JSONL file, a snapshot's held-out split, or a shipped set.

SET is one of:
- `PATH.jsonl`: one JSON object a line, `query` (or `text`) and the gold answer: `label` (a class name) or
  `labels` (a list, multi-label) for a classifier; `plan` (gold plan facts: any of `categories` (a list),
  `tool` (a precision tool's name or null) and `operands` (its arguments)) for a planner. A set is one or the
  other: classifier and planner rows are not mixed.
- `snapshot:NAME@VERSION[:SPLIT]`: a snapshot's split (default `test`, the held-out one) under STORE/snapshots
  (or a snapshot folder: `snapshot:PATH[:SPLIT]`): its labels for classifier kinds, the facts of its plans for
  plan kinds.
- `yardstick:complexity[:HALF]`: the complexity yardstick's `report` half (or `tune`, `all`):
  tests/fixtures/complexity_labels/labels.jsonl, 213 requests labelled by eye (its README holds the criteria).
- `yardstick:plan[:HALF]`: the plan yardstick's `report` half (or `tune`, `all`): tests/fixtures/plan_labels/
  labels.jsonl, 152 requests labelled by eye with the facts a right plan needs, for a planner; each gold is
  `{"yardstick": facts}` and `eval_metrics.plan_verdict` judges every answer against it.

Every set has a sha256 over its canonical rows (query and gold, in order), which eval.json records.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from mashbill import jsontext
from mashbill.exporters.runs import ExportError

_FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
YARDSTICKS = {"complexity": _FIXTURES / "complexity_labels" / "labels.jsonl",
              "plan": _FIXTURES / "plan_labels" / "labels.jsonl"}


class EvalSetError(ExportError):
    """An evaluation set that cannot be used: one line naming the file, row and field."""


@dataclass
class EvalSet:
    name: str  # as given on the command line
    kind: str  # classifier | planner
    queries: list[str]
    gold: list  # a class name, a sorted list of names (multi-label), or a dict of plan facts
    multi_label: bool = False
    source_kind: str | None = None  # the snapshot's or yardstick's record kind (complexity, plan, ...)
    meta: dict = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        h = hashlib.sha256()
        for q, g in zip(self.queries, self.gold):
            h.update(json.dumps([q, g], sort_keys=True, ensure_ascii=False).encode() + b"\n")
        return h.hexdigest()

    def __len__(self) -> int:
        return len(self.queries)

    def classes(self) -> set[str]:
        if self.kind != "classifier":
            return set()
        return {x for g in self.gold for x in (g if self.multi_label else [g])}


def load_set(ref: str, *, store: str | Path | None = None, want: str | None = None) -> EvalSet:
    """The set `ref`; `want` (classifier | planner, the target's kind) decides how a plan snapshot is read: its
    category sets for a classifier, its plans' facts for a planner."""
    if ref.startswith("yardstick:"):
        return _yardstick(ref)
    if ref.startswith("snapshot:"):
        return _snapshot(ref, store, want)
    return _jsonl(ref, Path(ref))


def _yardstick(ref: str) -> EvalSet:
    _, name, *rest = ref.split(":")
    half = rest[0] if rest else "report"
    if name not in YARDSTICKS:
        raise EvalSetError(f"{ref}: no shipped yardstick {name!r}; known: {', '.join(sorted(YARDSTICKS))}")
    if half not in ("report", "tune", "all"):
        raise EvalSetError(f"{ref}: half {half!r}: expected report, tune or all")
    path = YARDSTICKS[name]
    if not path.is_file():
        raise EvalSetError(f"{path}: the {name} yardstick is missing (it ships in the source tree)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if half == "all" or r["split"] == half]
    if name == "plan":
        from mashbill.exporters.evaluation.plan_yardstick import gold_facts

        return EvalSet(ref, "planner", [r["query"] for r in rows], [{"yardstick": gold_facts(r)} for r in rows],
                       source_kind="plan", meta={"path": str(path), "half": half, "yardstick": "plan"})
    return EvalSet(ref, "classifier", [r["query"] for r in rows], [r["label"] for r in rows],
                   source_kind=name, meta={"path": str(path), "half": half})


def _snapshot(ref: str, store, want: str | None) -> EvalSet:
    from mashbill.curation.snapshots.pull import rows_for
    from mashbill.curation.snapshots.pull import MULTI_LABEL_KINDS
    from mashbill.curation.snapshots.snapshot import SnapshotError, resolve_snapshot, verify
    from mashbill.exporters.evaluation.eval_metrics import plan_facts
    from mashbill.exporters.runs import Snapshot

    body = ref[len("snapshot:"):]
    name, _, split = body.rpartition(":") if body.count(":") else (body, "", "")
    name, split = (name, split) if split in ("train", "eval", "test") else (body, "test")
    try:
        path = resolve_snapshot(name, Path(store) / "snapshots" if store is not None else None)
        manifest = verify(path)
    except SnapshotError as exc:
        raise EvalSetError(f"{ref}: {exc}") from None
    snap = Snapshot(path, manifest)
    kind = manifest["kind"]
    rows = snap.rows(split)
    if kind == "plan" and want == "planner":
        queries, gold = [], []
        for r in rows:
            if r.get("row_kind") not in (None, "sft") or r.get("copy") or not r.get("completion"):
                continue
            try:
                plan = json.loads(r["completion"])
            except (TypeError, json.JSONDecodeError):
                continue
            queries.append(r["query"])
            gold.append(plan_facts(plan))
        return EvalSet(ref, "planner", queries, gold, source_kind=kind,
                       meta={"snapshot": manifest["ref"], "snapshot_id": manifest["snapshot_id"], "split": split})
    multi = kind in MULTI_LABEL_KINDS
    pulled = rows_for("classification", rows, kind)
    gold = [sorted(r["labels"]) if multi else r["label"] for r in pulled]
    return EvalSet(ref, "classifier", [r["text"] for r in pulled], gold, multi_label=multi, source_kind=kind,
                   meta={"snapshot": manifest["ref"], "snapshot_id": manifest["snapshot_id"], "split": split})


def _jsonl(ref: str, path: Path) -> EvalSet:
    if not path.is_file():
        raise EvalSetError(f"{path}: no such file (SET is a .jsonl file, snapshot:NAME@V[:SPLIT] or "
                           "yardstick:complexity|plan[:HALF])")
    queries, gold, kinds, multi = [], [], set(), False
    for n, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = jsontext.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise EvalSetError(f"{path}:{n}: not a UTF-8 JSON line ({exc})") from None
        if not isinstance(row, dict):
            raise EvalSetError(f"{path}:{n}: expected a JSON object")
        q = row.get("query", row.get("text"))
        if not isinstance(q, str) or not q.strip():
            raise EvalSetError(f"{path}:{n}: field 'query': expected a non-empty string")
        if "label" in row:
            if not isinstance(row["label"], str):
                raise EvalSetError(f"{path}:{n}: field 'label': expected a class name (a string)")
            kinds.add("classifier")
            g = row["label"]
        elif "labels" in row:
            if not isinstance(row["labels"], list) or not all(isinstance(x, str) for x in row["labels"]):
                raise EvalSetError(f"{path}:{n}: field 'labels': expected a list of class names")
            kinds.add("classifier")
            multi = True
            g = sorted(row["labels"])
        elif "plan" in row:
            g = row["plan"]
            if not isinstance(g, dict) or not set(g) & {"categories", "tool", "operands"}:
                raise EvalSetError(f"{path}:{n}: field 'plan': expected an object with categories, tool and/or "
                                   "operands")
            if "categories" in g and not (isinstance(g["categories"], list)
                                          and all(isinstance(x, str) for x in g["categories"])):
                raise EvalSetError(f"{path}:{n}: field 'plan.categories': expected a list of category names")
            kinds.add("planner")
        else:
            raise EvalSetError(f"{path}:{n}: no gold answer: expected field 'label', 'labels' or 'plan'")
        if len(kinds) > 1:
            raise EvalSetError(f"{path}:{n}: mixes classifier rows (label) and planner rows (plan)")
        queries.append(q)
        gold.append(g)
    if not queries:
        raise EvalSetError(f"{path}: holds no rows")
    if multi and any(isinstance(g, str) for g in gold):
        raise EvalSetError(f"{path}: mixes 'label' and 'labels' rows")
    return EvalSet(ref, kinds.pop(), queries, gold, multi_label=multi, meta={"path": str(path.resolve())})
