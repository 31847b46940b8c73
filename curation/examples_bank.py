"""Make an example bank (specs.examples) from a spec's stored records: `mashbill spec examples SPEC --out FILE`.

Only usable records (``Store.usable``: accepted by the gate and validated, or accepted/corrected in review) become
rows; a reviewer's correction replaces the teacher output. Each record's split is drawn as a snapshot draws it
(``curation.selection.split.assign_splits`` over the normalized query with the spec's ``curation.splits``; records
with the same normalized query share a side) and only the train side is written, so a bank never shows an eval or
test record to a teacher. The file is written atomically; rows are sorted by query.
"""

from __future__ import annotations

import json
from pathlib import Path

from mashbill.errors import MashbillError
from mashbill.files import write_file_atomic
from mashbill.specs.holdout import normalize


def bank_rows(rs, store, *, prefix: str | None = None) -> tuple[list[dict], dict]:
    """(rows of the train side, counts) for the usable records of `rs` in `store`."""
    from mashbill.curation.selection.split import assign_splits

    states = [s for s in store.usable(rs.hash) if s.usability.usable]
    keys = [normalize(str((s.record.input or {}).get("query") or "")) for s in states]
    sp = rs.spec.curation.splits
    sides = assign_splits(keys, ["all"] * len(keys), [], {"train": sp.train, "eval": sp.eval, "test": sp.test}).sides \
        if keys else []
    rows = []
    for s, side in zip(states, sides or []):
        if side != "train":
            continue
        rec = s.record
        output = s.decision.correction if s.usability.corrected else rec.output
        reviewed = s.decision.state in ("accepted", "corrected")
        rows.append({"id": "", "query": rec.input.get("query"), "lang": (rec.input or {}).get("lang") or "",
                     "output": output, "record_id": rec.id, "spec": rs.ref,
                     "accepted_by": "review" if reviewed else "gate", "split": "train"})
    rows.sort(key=lambda r: (r["query"], r["record_id"]))
    for i, row in enumerate(rows, 1):
        row["id"] = f"{prefix or rs.spec.name}-{i:04d}"
    counts = {"usable": len(states), "train": len(rows), "left_out_eval_test": len(states) - len(rows)}
    return rows, counts


def write_bank(rows: list[dict], out: str | Path) -> Path:
    if not rows:
        raise MashbillError("no usable train records to write (run `mashbill validate` first: a record is usable "
                            "once it passed validation)")
    out = Path(out)
    write_file_atomic(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8"))
    return out
