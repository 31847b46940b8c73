"""Pull a snapshot as a Hugging Face `datasets.DatasetDict` in the format a trainer needs.

Formats (TRL's names):
- `messages`: conversational, `{"messages": [...]}`; multi-turn correction samples keep all five turns
  (train them only with a loss that leaves out the wrong turn: the manifest's trainer profile says which);
- `prompt-completion`: `{"prompt": [...], "completion": [assistant]}`; a correction sample's wrong turn is
  in the prompt, so completion-only loss never trains it;
- `preference`: `{"prompt": [...], "chosen": [assistant], "rejected": [assistant]}`;
- `classification`: `{"text": query, "label": class}`, or a list of classes for multi-label kinds.

The snapshot is verified before anything is read: a changed, missing or added file refuses the pull and
names the file.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from mashbill.curation.snapshot import SPLITS, SnapshotError, resolve_snapshot, verify
from mashbill.errors import MashbillError

FORMATS = ("messages", "prompt-completion", "preference", "classification")
MULTI_LABEL_KINDS = ("plan", "routing", "template", "preference")
ROUTER_FORMATS = ("router", "outcomes", "transitions", "triplets")  # router snapshots: curation.router_pull


def _datasets():
    try:
        import datasets
    except ImportError:
        raise MashbillError("pulling a snapshot needs the `datasets` package: pip install 'mashbill[curation]' "
                            "(or pip install datasets)") from None
    return datasets


def _assistant(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


def _sft_rows(rows: list[dict]):
    """Rows for supervised formats: a preference pair's chosen side once per (record, completion, copy)."""
    seen = set()
    for r in rows:
        if r["row_kind"] == "preference":
            key = (r["record_id"], r["completion"], r["copy"])
            if key in seen:
                continue
            seen.add(key)
        yield r


def rows_for(fmt: str, rows: list[dict], kind: str) -> list[dict]:
    out = []
    if fmt in ("messages", "prompt-completion"):
        for r in _sft_rows(rows):
            if r["row_kind"] == "correction":
                turns = r["turns"]
                out.append({"messages": turns} if fmt == "messages"
                           else {"prompt": turns[:-1], "completion": turns[-1:]})
            elif fmt == "messages":
                out.append({"messages": [*r["prompt"], *_assistant(r["completion"])]})
            else:
                out.append({"prompt": r["prompt"], "completion": _assistant(r["completion"])})
    elif fmt == "preference":
        out = [{"prompt": r["prompt"], "chosen": _assistant(r["completion"]), "rejected": _assistant(r["rejected"])}
               for r in rows if r["row_kind"] == "preference"]
    elif fmt == "classification":
        seen = set()
        for r in rows:
            if r["row_kind"] == "correction":
                continue
            key = (r["record_id"], r["copy"], tuple(r["class_labels"] or []))
            if key in seen:
                continue
            seen.add(key)
            labels = r["class_labels"] or []
            if kind in MULTI_LABEL_KINDS:
                out.append({"text": r["query"], "labels": labels})
            elif labels:
                out.append({"text": r["query"], "label": labels[0]})
    else:
        raise MashbillError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    return out


def load_snapshot(ref: str | Path, format: str = "messages", *, root: str | Path | None = None,
                  store: str | Path | None = None):
    """The snapshot `ref` (a folder, or NAME@VERSION under `root` or STORE/snapshots) as a DatasetDict with
    train/eval/test splits. Verifies every file's sha256 first."""
    if format not in FORMATS + ROUTER_FORMATS:
        raise MashbillError(f"unknown format {format!r}; expected one of {', '.join(FORMATS + ROUTER_FORMATS)}")
    if root is None and store is not None:
        root = Path(store) / "snapshots"
    path = resolve_snapshot(ref, root)
    manifest = verify(path)
    kind = manifest["kind"]
    if kind in ("outcomes", "transitions", "triplets"):
        from mashbill.curation.router_pull import load_router_snapshot

        _datasets()
        return load_router_snapshot(path, manifest, None if format == "messages" else format)
    if format in ROUTER_FORMATS:
        raise SnapshotError(f"{manifest['ref']} is a {kind} snapshot; format {format!r} is for router snapshots")
    ds = _datasets()
    msg = [{"role": ds.Value("string"), "content": ds.Value("string")}]
    tables = {s: pq.read_table(path / "data" / f"{s}.parquet").to_pylist() for s in SPLITS}
    converted = {s: rows_for(format, tables[s], kind) for s in SPLITS}
    if format == "preference" and not any(converted.values()):
        raise SnapshotError(f"{manifest['ref']} holds no preference pairs (kind {kind}); freeze a preference spec")
    if format == "messages":
        features = ds.Features({"messages": msg})
    elif format == "prompt-completion":
        features = ds.Features({"prompt": msg, "completion": msg})
    elif format == "preference":
        features = ds.Features({"prompt": msg, "chosen": msg, "rejected": msg})
    else:
        names = sorted({x for rows in converted.values() for r in rows
                        for x in (r["labels"] if "labels" in r else [r["label"]])})
        if not names:
            raise SnapshotError(f"{manifest['ref']}: no class labels to pull (kind {kind})")
        cl = ds.ClassLabel(names=names)
        features = ds.Features({"text": ds.Value("string"),
                                **({"labels": ds.Sequence(cl)} if kind in MULTI_LABEL_KINDS else {"label": cl})})
    out = {}
    for s in SPLITS:
        rows = converted[s]
        columns = {name: [r[name] for r in rows] for name in features}
        out[s] = ds.Dataset.from_dict(columns, features=features, split=s)
    dd = ds.DatasetDict(out)
    return dd


def snapshot_info(ref: str | Path, *, root: str | Path | None = None) -> dict:
    return verify(resolve_snapshot(ref, root))
