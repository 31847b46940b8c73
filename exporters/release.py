"""The release gate, tags and tag verification.

Gate (`release check`): every artifact (the candidates and the incumbent) answers the guard file's held-out
items and guards with `mashbill predict`'s predictor. A candidate that fails any guard the incumbent passes is
vetoed, whatever its accuracy. The rest, with the incumbent, are ranked by held-out accuracy; entries within
0.5 points of the best are ordered by overall accuracy (held-out and guards together), and on a full tie the
incumbent stays. The decision and every answer go into a release record.

Tags (`release tag NAME ARTIFACT`) record name -> path and sha256; `release verify NAME` re-hashes the file
(and its export's other artifacts) and refuses, naming the file, when anything changed: a tag cannot silently
point at a rebuilt or edited artifact.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from mashbill.errors import MashbillError
from mashbill.exporters import manifest as mf
from mashbill.files import write_file_atomic
from mashbill.hashing import sha256_file

TIE_POINTS = 0.5
DEFAULT_ROOT = Path("./mashbill-releases")
TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class ReleaseError(MashbillError):
    """A guard file, tag or artifact the release commands cannot use."""


class TamperedError(ReleaseError):
    """A tagged artifact is not the file the tag recorded."""


@dataclass(frozen=True)
class Item:
    id: str
    text: str
    expect: Any  # a label, or a list of labels (set equality)
    guard: bool


def load_guards(path: str | Path) -> list[Item]:
    """Parse a guard file; each problem names the file, the item and the field."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReleaseError(f"{path}: cannot read the guard file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise ReleaseError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict) or not set(data) <= {"heldout", "guards", "description"}:
        raise ReleaseError(f"{path}: expected a mapping with 'heldout' and 'guards' lists"
                           + (f", found keys {sorted(data)}" if isinstance(data, dict) else ""))
    items: list[Item] = []
    for section in ("heldout", "guards"):
        entries = data.get(section)
        if not isinstance(entries, list) or not entries:
            raise ReleaseError(f"{path}: field '{section}': expected a non-empty list of items")
        for i, e in enumerate(entries):
            where = f"{path}: {section}[{i}]"
            if not isinstance(e, dict):
                raise ReleaseError(f"{where}: expected a mapping with text and expect")
            unknown = set(e) - {"id", "text", "expect"}
            if unknown:
                raise ReleaseError(f"{where}: unknown field(s) {sorted(unknown)}; expected id, text, expect")
            if not isinstance(e.get("text"), str) or not e["text"].strip():
                raise ReleaseError(f"{where}: field 'text': expected a non-empty string")
            exp = e.get("expect")
            if not (isinstance(exp, str) or (isinstance(exp, list) and all(isinstance(x, str) for x in exp))):
                raise ReleaseError(f"{where}: field 'expect': expected a label or a list of labels")
            items.append(Item(str(e.get("id") or f"{section}-{i}"), e["text"],
                              sorted(exp) if isinstance(exp, list) else exp, section == "guards"))
    ids = [it.id for it in items]
    dup = sorted({x for x in ids if ids.count(x) > 1})
    if dup:
        raise ReleaseError(f"{path}: duplicate item id(s) {dup}")
    return items


def _labels_of(answer: dict, kind: str):
    """The labels an artifact gave: the classifier's label(s), or the categories of a planner's plan."""
    if kind == "onnx":
        return answer["label"]
    from mashbill.curation.selection.labels import plan_categories

    out = answer["output"]
    return sorted(set(plan_categories(out, {}))) if answer["json"] and isinstance(out, list) else None


def passes(expect, got) -> bool:
    if got is None:
        return False
    if isinstance(expect, list):
        return sorted(got if isinstance(got, list) else [got]) == expect
    return got == expect or (isinstance(got, list) and expect in got)


def evaluate(artifact: Path, items: list[Item], *, threads: int = 1) -> dict:
    from mashbill.exporters.predict import load_predictor

    pred = load_predictor(artifact, threads=threads)
    try:
        answers = pred.predict([it.text for it in items])
    finally:
        if hasattr(pred, "close"):
            pred.close()
    rows = []
    for it, ans in zip(items, answers):
        got = _labels_of(ans, pred.kind)
        rows.append({"id": it.id, "guard": it.guard, "expect": it.expect, "got": got, "pass": passes(it.expect, got)})
    held = [r for r in rows if not r["guard"]]
    return {"artifact": str(artifact), "sha256": sha256_file(artifact), "kind": pred.kind,
            "heldout_accuracy": round(100 * sum(r["pass"] for r in held) / len(held), 2),
            "overall_accuracy": round(100 * sum(r["pass"] for r in rows) / len(rows), 2),
            "guards_failed": sorted(r["id"] for r in rows if r["guard"] and not r["pass"]), "items": rows}


def decide(incumbent: dict, candidates: list[dict]) -> dict:
    """Veto, then rank; pure, so the rule is tested on its own."""
    inc_pass = {r["id"] for r in incumbent["items"] if r["guard"] and r["pass"]}
    vetoed, eligible = [], [("incumbent", incumbent)]
    for i, c in enumerate(candidates):
        lost = sorted(inc_pass & set(c["guards_failed"]))
        if lost:
            vetoed.append({"candidate": i, "artifact": c["artifact"], "guards_lost": lost})
        else:
            eligible.append((f"candidate{i}", c))
    best = max(e[1]["heldout_accuracy"] for e in eligible)
    close = [e for e in eligible if best - e[1]["heldout_accuracy"] <= TIE_POINTS + 1e-9]
    # overall accuracy breaks the tie; on a full tie the incumbent (listed first) stays
    winner = max(close, key=lambda e: (e[1]["overall_accuracy"], e[0] == "incumbent"))
    ranking = sorted(eligible, key=lambda e: (-e[1]["heldout_accuracy"], -e[1]["overall_accuracy"]))
    return {"winner": winner[0], "winner_artifact": winner[1]["artifact"], "promote": winner[0] != "incumbent",
            "tie_break": len(close) > 1, "vetoed": vetoed,
            "decided_by": _decided_by(winner, eligible, close, vetoed),
            "ranking": [{"name": n, "artifact": e["artifact"], "heldout_accuracy": e["heldout_accuracy"],
                         "overall_accuracy": e["overall_accuracy"]} for n, e in ranking]}


def _decided_by(winner, eligible, close, vetoed) -> str:
    """One line naming the guard or the score that decided."""
    if len(eligible) == 1:  # every candidate vetoed
        guards = sorted({g for v in vetoed for g in v["guards_lost"]})
        return f"guard(s) {', '.join(guards)}: every candidate fails a guard the incumbent passes"
    name, res = winner
    others = [e for e in eligible if e[0] != name]
    if len(close) > 1:
        if all(e[1]["overall_accuracy"] == res["overall_accuracy"] for e in close):
            return (f"a full tie (held-out within {TIE_POINTS} points, overall {res['overall_accuracy']:.2f}): "
                    "the incumbent stays")
        rival = max((e for e in close if e[0] != name), key=lambda e: e[1]["overall_accuracy"])
        return (f"overall accuracy {res['overall_accuracy']:.2f} ({name}) against {rival[1]['overall_accuracy']:.2f} "
                f"({rival[0]}), held-out within {TIE_POINTS} points")
    rival = max(others, key=lambda e: e[1]["heldout_accuracy"])
    return (f"held-out accuracy {res['heldout_accuracy']:.2f} ({name}) against {rival[1]['heldout_accuracy']:.2f} "
            f"({rival[0]})")


def eval_items(refs) -> tuple[list[Item], list[dict]]:
    """Held-out items from `mashbill eval` sets (exporters/evaluation/eval_sets.py): a classifier set's gold labels, a planner
    set's gold categories (rows without them are skipped); ids SET#ROW."""
    from mashbill.exporters.evaluation.eval_sets import load_set

    items, info = [], []
    for ref in refs:
        s = load_set(ref)
        n = 0
        for i, (q, g) in enumerate(zip(s.queries, s.gold), 1):
            expect = sorted(g["categories"]) if s.kind == "planner" and "categories" in g else g
            if isinstance(expect, dict):
                continue
            items.append(Item(f"{ref}#{i}", q, expect, False))
            n += 1
        if not n:
            raise ReleaseError(f"{ref}: no row with a gold label or gold categories")
        info.append({"set": ref, "sha256": s.sha256, "rows": n})
    return items, info


def check(candidates: list[Path], incumbent: Path, guards: Path | None, *, root: Path = DEFAULT_ROOT,
          threads: int = 1, eval_sets: tuple[str, ...] = ()) -> tuple[Path, dict]:
    if guards is None and not eval_sets:
        raise ReleaseError("release check needs --guards FILE, --eval SET, or both")
    items = load_guards(guards) if guards is not None else []
    extra, eval_info = eval_items(eval_sets)
    items += extra
    cand_paths = [mf.verified_artifact(c)[0] for c in candidates]  # every export re-hashed before it answers
    inc_path = mf.verified_artifact(incumbent)[0]
    inc = evaluate(inc_path, items, threads=threads)
    cands = [evaluate(c, items, threads=threads) for c in cand_paths]
    decision = decide(inc, cands)
    now = datetime.now(timezone.utc)
    record = {"format": "mashbill.release-check/1", "checked_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
              "guards": {"path": str(Path(guards).resolve()) if guards else None,
                         "sha256": sha256_file(Path(guards)) if guards else None,
                         "heldout": sum(not i.guard for i in items), "guards": sum(i.guard for i in items)},
              "eval_sets": eval_info,
              "rule": f"veto a candidate failing any guard the incumbent passes; rank by held-out accuracy; "
                      f"within {TIE_POINTS} points by overall accuracy; the incumbent stays on a full tie",
              "incumbent": inc, "candidates": cands, "decision": decision}
    name = f"{now.strftime('%Y%m%dT%H%M%S')}-{(cands[0]['sha256'] if cands else inc['sha256'])[:12]}.json"
    path = Path(root) / "checks" / name
    write_file_atomic(path, (json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode())
    return path, record


# ---------------------------------------------------------------- tags


def _tag_path(root: Path, name: str) -> Path:
    if not TAG_RE.match(name):
        raise ReleaseError(f"tag name {name!r}: use letters, digits, '.', '_' and '-' (at most 100)")
    return Path(root) / "tags" / f"{name}.json"


def tag(name: str, artifact: Path, *, root: Path = DEFAULT_ROOT, force: bool = False) -> dict:
    path = _tag_path(root, name)
    target, _ = mf.verified_artifact(artifact)  # never tag an export whose files already changed
    target = target.resolve()
    if path.exists() and not force:
        old = json.loads(path.read_text(encoding="utf-8"))
        raise ReleaseError(f"tag {name} already names {old['artifact']} ({old['sha256'][:12]}); tags do not move "
                           "(use another name, or --force)")
    export = mf.find(target)
    record = {"format": "mashbill.release-tag/1", "name": name, "artifact": str(target),
              "sha256": sha256_file(target), "bytes": target.stat().st_size,
              "tagged_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "export_manifest": str(export) if export else None,
              "export_manifest_sha256": sha256_file(export) if export else None,
              "lineage": mf.read(export)["run"] | {"snapshot": mf.read(export)["snapshot"]["snapshot_id"]}
              if export else None}
    write_file_atomic(path, (json.dumps(record, indent=2, sort_keys=True) + "\n").encode())
    return record


def verify_tag(name: str, *, root: Path = DEFAULT_ROOT) -> dict:
    path = _tag_path(root, name)
    if not path.is_file():
        raise ReleaseError(f"no tag {name} under {Path(root) / 'tags'}")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReleaseError(f"{path}: not valid JSON ({exc})") from None
    target = Path(record["artifact"])
    if not target.is_file():
        raise TamperedError(f"tag {name}: {target} is missing")
    digest = sha256_file(target)
    if digest != record["sha256"]:
        raise TamperedError(f"tag {name}: {target} changed since it was tagged (sha256 {digest[:12]}, "
                            f"tag records {record['sha256'][:12]})")
    if record.get("export_manifest"):
        export = Path(record["export_manifest"])
        if not export.is_file() or sha256_file(export) != record["export_manifest_sha256"]:
            raise TamperedError(f"tag {name}: {export} changed since it was tagged")
        try:
            mf.verify(export.parent)
        except MashbillError as exc:
            raise TamperedError(f"tag {name}: {exc}") from None
    return record
