"""Example banks: verified examples a spec shows its teacher in place of one fixed worked example.

A spec's ``examples: {bank: FILE, k: 3}`` section names a JSONL bank (its bytes are in the spec hash, like a
prompt or rule file). Each row is one verified example::

    {"id": "qs-plan-001", "query": "...", "lang": "en", "output": [...],
     "record_id": "<the stored record it came from>", "spec": "quickstart-plan@7",
     "accepted_by": "gate" | "review", "split": "train" | "eval" | "test" | "held-out"}

The loader refuses a malformed row with the file, its line and the field. Which rows a request is shown (the k
nearest by MiniLM cosine, never the request itself, never a test/held-out row or a holdout query) is decided at
generate time by ``factory.generate.examples``; this module only reads, checks and renders rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mashbill import jsontext
from mashbill.errors import SpecError

VARIABLE = "retrieved_examples"  # the template variable the k rows are rendered into
SPLITS = ("train", "eval", "test", "held-out")
SHOWN_SPLITS = ("train",)  # only train rows are ever shown to a teacher
ACCEPTED_BY = ("gate", "review")
REQUIRED = ("id", "query", "output", "record_id", "split")


@dataclass(frozen=True)
class BankRow:
    id: str
    query: str
    lang: str
    output: Any
    record_id: str
    spec: str
    accepted_by: str
    split: str
    line: int  # the row's line in the bank file

    def as_dict(self) -> dict:
        return {"id": self.id, "query": self.query, "lang": self.lang, "output": self.output,
                "record_id": self.record_id, "spec": self.spec, "accepted_by": self.accepted_by, "split": self.split}


def load_bank(path: Path, *, where: str | None = None) -> tuple[BankRow, ...]:
    """Every row of a bank file, checked; the first problem is a SpecError naming file, line and field."""
    where = where or str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise SpecError(where, f"cannot read the example bank ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(where, f"example bank is not UTF-8 (byte {exc.start})",
                        line=raw.count(b"\n", 0, exc.start) + 1) from None
    rows: list[BankRow] = []
    seen: dict[str, int] = {}
    for n, line in enumerate(text.removeprefix("\ufeff").split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = jsontext.loads(line)
        except json.JSONDecodeError as exc:
            raise SpecError(where, f"bank row is not JSON: {exc.msg}", line=n) from None
        if not isinstance(obj, dict):
            raise SpecError(where, "bank row is not a JSON object", line=n)
        rows.append(_row(obj, n, where))
        if rows[-1].id in seen:
            raise SpecError(where, f"id {rows[-1].id!r} is also on line {seen[rows[-1].id]}", line=n, field="id")
        seen[rows[-1].id] = n
    if not rows:
        raise SpecError(where, "the example bank has no rows")
    return tuple(rows)


def _row(obj: dict, n: int, where: str) -> BankRow:
    for key in REQUIRED:
        value = obj.get(key)
        if value is None or (isinstance(value, str) and not value.strip()) or value in ([], {}):
            raise SpecError(where, f"bank row has no {key!r}", line=n, field=key)
    for key in ("id", "query", "record_id", "split", "lang", "spec", "accepted_by"):
        if key in obj and not isinstance(obj[key], str):
            raise SpecError(where, f"{key!r} must be a string, found {type(obj[key]).__name__}", line=n, field=key)
    if obj["split"] not in SPLITS:
        raise SpecError(where, f"split must be one of {list(SPLITS)}, found {obj['split']!r}", line=n, field="split")
    accepted_by = obj.get("accepted_by", "gate")
    if accepted_by not in ACCEPTED_BY:
        raise SpecError(where, f"accepted_by must be one of {list(ACCEPTED_BY)}, found {accepted_by!r}", line=n,
                        field="accepted_by")
    unknown = sorted(set(obj) - set(REQUIRED) - {"lang", "spec", "accepted_by"})
    if unknown:
        raise SpecError(where, f"unknown key(s) {unknown}", line=n, field=unknown[0])
    return BankRow(obj["id"], obj["query"], obj.get("lang") or "", obj["output"], obj["record_id"],
                   obj.get("spec") or "", accepted_by, obj["split"], n)


def render_rows(rows, kind: str) -> str:
    """The rows as the worked examples of a prompt: "Request: ..." then "Plan: ..." (or "Answer: ...")."""
    label = "Plan" if kind == "plan" else "Answer"
    return "\n".join(f"Request: {r.query}\n{label}: {json.dumps(r.output, ensure_ascii=False, separators=(',', ':'))}"
                     for r in rows)
