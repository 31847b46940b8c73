"""What changed between two snapshots: examples added, removed, relabelled or moved across splits, cell
shifts, spec and verdict changes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from mashbill.curation.selection.split import SPLITS
from mashbill.curation.snapshots.snapshot_find import verify

def read_split_rows(path: Path) -> dict[str, list[dict]]:
    cols = ["example_id", "record_id", "row_kind", "cell", "copy", "query"]
    return {s: pq.read_table(path / "data" / f"{s}.parquet", columns=cols).to_pylist() for s in SPLITS}


def diff(a: str | Path, b: str | Path) -> dict:
    a, b = Path(a), Path(b)
    ma, mb = verify(a), verify(b)
    ra, rb = read_split_rows(a), read_split_rows(b)

    def index(rows):
        out = {}
        for s, rs_ in rows.items():
            for r in rs_:
                if r["copy"] == 0:
                    out[(r["record_id"], r["row_kind"], r["example_id"])] = (s, r["cell"], r["query"])
        return out

    ia, ib = index(ra), index(rb)
    rec_a = {(k[0], k[1]): v for k, v in ia.items()}
    rec_b = {(k[0], k[1]): v for k, v in ib.items()}
    added = sorted(set(rec_b) - set(rec_a))
    removed = sorted(set(rec_a) - set(rec_b))
    both = set(rec_a) & set(rec_b)
    relabelled = sorted((k, rec_a[k][1], rec_b[k][1]) for k in both if rec_a[k][1] != rec_b[k][1])
    moved = sorted((k, rec_a[k][0], rec_b[k][0]) for k in both if rec_a[k][0] != rec_b[k][0])
    changed_output = sorted(k for k in both if
                            {e for e in ia if (e[0], e[1]) == k} != {e for e in ib if (e[0], e[1]) == k})
    cells_a = {s: Counter(r["cell"] for r in ra[s]) for s in SPLITS}
    cells_b = {s: Counter(r["cell"] for r in rb[s]) for s in SPLITS}
    shifts = {s: {c: cells_b[s][c] - cells_a[s][c] for c in sorted(set(cells_a[s]) | set(cells_b[s]))
                  if cells_b[s][c] != cells_a[s][c]} for s in SPLITS}
    specs_a = {s["name"]: s for s in ma["specs"]}
    specs_b = {s["name"]: s for s in mb["specs"]}
    spec_changes = []
    for n in sorted(set(specs_a) | set(specs_b)):
        sa, sb = specs_a.get(n), specs_b.get(n)
        if sa is None or sb is None or sa["hash"] != sb["hash"] or sa["version"] != sb["version"]:
            files_changed = []
            if sa and sb:
                fa = {r: ma["files"].get(p) for r, p in sa["files"].items()}
                fb = {r: mb["files"].get(p) for r, p in sb["files"].items()}
                files_changed = sorted(r for r in set(fa) | set(fb) if fa.get(r) != fb.get(r))
                if ma["files"].get(sa["path"]) != mb["files"].get(sb["path"]):
                    files_changed.insert(0, "spec")
            spec_changes.append({"name": n, "a": f"{n}@{sa['version']} {sa['hash'][:12]}" if sa else None,
                                 "b": f"{n}@{sb['version']} {sb['hash'][:12]}" if sb else None,
                                 "files_changed": files_changed})
    codes = sorted(set(ma["verdicts"]) | set(mb["verdicts"]))
    verdict_shift = {c: mb["verdicts"].get(c, 0) - ma["verdicts"].get(c, 0) for c in codes
                     if mb["verdicts"].get(c, 0) != ma["verdicts"].get(c, 0)}
    return {"a": {"ref": ma["ref"], "snapshot_id": ma["snapshot_id"]},
            "b": {"ref": mb["ref"], "snapshot_id": mb["snapshot_id"]},
            "identical": ma["snapshot_id"] == mb["snapshot_id"],
            "added": [{"record_id": k[0], "row_kind": k[1], "split": rec_b[k][0], "cell": rec_b[k][1],
                       "query": rec_b[k][2]} for k in added],
            "removed": [{"record_id": k[0], "row_kind": k[1], "split": rec_a[k][0], "cell": rec_a[k][1],
                         "query": rec_a[k][2]} for k in removed],
            "relabelled": [{"record_id": k[0], "from": x, "to": y} for k, x, y in relabelled],
            "moved_split": [{"record_id": k[0], "from": x, "to": y} for k, x, y in moved],
            "changed_output": [k[0] for k in changed_output],
            "cell_shifts": shifts, "spec_changes": spec_changes, "verdict_shifts": verdict_shift,
            "counts": {"a": ma["splits"]["counts"], "b": mb["splits"]["counts"]}}
