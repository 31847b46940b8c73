"""Pull a snapshot as a Hugging Face `datasets.DatasetDict` in the format a trainer needs.

Formats (TRL's names):
- `messages`: conversational, `{"messages": [...]}`; multi-turn correction samples keep all five turns
  (train them only with a loss that leaves out the wrong turn: the manifest's trainer profile says which);
- `prompt-completion`: `{"prompt": [...], "completion": [assistant]}`; a correction sample's wrong turn is
  in the prompt, so completion-only loss never trains it;
- `preference`: `{"prompt": [...], "chosen": [assistant], "rejected": [assistant]}`;
- `classification`: `{"text": query, "label": class id}` for single-label kinds, or `{"text": query,
  "labels": [0.0, 1.0, ...]}` (a multi-hot float vector) for multi-label kinds, so that
  `AutoModelForSequenceClassification` with `problem_type="multi_label_classification"` trains on it as it is.
  Class ids come from the spec (the manifest's `classes`), not from the labels that occurred.

The returned DatasetDict carries what a trainer needs from the manifest as attributes: `manifest`,
`trainer_profile` (tokenizer, max_seq_len, loss, template hashes), `chat_template` (the snapshot's training
template: under a `last-turn` loss its generation markers cover only the last assistant turn) and, for
classification, `label_info` (`id2label`, `label2id`, `problem_type`).

The snapshot is verified before anything is read: a changed, missing or added file refuses the pull and
names the file.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from mashbill.curation.snapshots.snapshot import SPLITS, SnapshotError, resolve_snapshot, verify
from mashbill.errors import MashbillError

FORMATS = ("messages", "prompt-completion", "preference", "classification")
MULTI_LABEL_KINDS = ("plan", "routing", "template", "preference")
ROUTER_FORMATS = ("router", "outcomes", "transitions", "triplets")  # router snapshots: curation.router.router_pull


# the snapshot columns each format's rows are made of (rows_for, _sft_rows)
PULL_COLUMNS = {"messages": ("row_kind", "record_id", "copy", "prompt", "completion", "turns"),
                "prompt-completion": ("row_kind", "record_id", "copy", "prompt", "completion", "turns"),
                "preference": ("row_kind", "prompt", "completion", "rejected"),
                "classification": ("row_kind", "record_id", "copy", "class_labels", "query")}


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
        from mashbill.curation.router.router_pull import load_router_snapshot

        _datasets()
        return load_router_snapshot(path, manifest, None if format == "messages" else format)
    if format in ROUTER_FORMATS:
        raise SnapshotError(f"{manifest['ref']} is a {kind} snapshot; format {format!r} is for router snapshots")
    ds = _datasets()
    msg = [{"role": ds.Value("string"), "content": ds.Value("string")}]
    # only the columns rows_for reads: a classification pull of the 1M rehearsal read every prompt too (3.7 GB)
    tables = {s: pq.read_table(path / "data" / f"{s}.parquet", columns=list(PULL_COLUMNS[format])).to_pylist()
              for s in SPLITS}
    converted = {s: rows_for(format, tables[s], kind) for s in SPLITS}
    profile = manifest.get("trainer_profile") or {}
    if (format == "messages" and profile.get("loss") == "last-turn" and not profile.get("training_template")
            and any(r["row_kind"] == "correction" for rows in tables.values() for r in rows)):
        raise SnapshotError(f"{manifest['ref']} holds correction samples under loss last-turn but ships no training "
                            "template (frozen by an older version): pull --format prompt-completion, so the wrong "
                            "turn stays in the prompt, or re-freeze it")
    if format == "preference" and not any(converted.values()):
        raise SnapshotError(f"{manifest['ref']} holds no preference pairs (kind {kind}); freeze a preference spec")
    if format == "messages":
        features = ds.Features({"messages": msg})
    elif format == "prompt-completion":
        features = ds.Features({"prompt": msg, "completion": msg})
    elif format == "preference":
        features = ds.Features({"prompt": msg, "chosen": msg, "rejected": msg})
    else:
        # rows_for gives class names (what exporters compare); the dataset gets ids or multi-hot vectors
        for rows in converted.values():
            for r in rows:
                r["classes"] = r.pop("labels") if "labels" in r else [r.pop("label")]
        info = label_info(manifest, (x for rows in converted.values() for r in rows for x in r["classes"]))
        if not info["id2label"]:
            raise SnapshotError(f"{manifest['ref']}: no class labels to pull (kind {kind})")
        names = [info["id2label"][i] for i in range(len(info["id2label"]))]
        ids = info["label2id"]
        if info["problem_type"] == "multi_label_classification":
            features = ds.Features({"text": ds.Value("string"), "labels": ds.Sequence(ds.Value("float32"))})
            for rows in converted.values():
                for r in rows:
                    hot = set(r.pop("classes"))
                    r["labels"] = [1.0 if n in hot else 0.0 for n in names]
        else:
            features = ds.Features({"text": ds.Value("string"), "label": ds.ClassLabel(names=names)})
            for rows in converted.values():
                for r in rows:
                    r["label"] = ids[r.pop("classes")[0]]
    out = {}
    for s in SPLITS:
        rows = converted[s]
        columns = {name: [r[name] for r in rows] for name in features}
        out[s] = ds.Dataset.from_dict(columns, features=features, split=s)
    dd = ds.DatasetDict(out)
    dd.manifest = manifest
    dd.trainer_profile = dict(manifest.get("trainer_profile") or {})
    dd.chat_template = training_template_of(path, manifest)
    if format == "classification":
        dd.label_info = info
    return dd


SETTINGS_FILES = {"messages": "sft_config.json", "prompt-completion": "sft_config.json",
                  "preference": "dpo_config.json"}


def trl_settings(manifest: dict, format: str, template_path: Path | None = None) -> dict | None:
    """What TRL's SFTConfig (messages, prompt-completion) or DPOConfig (preference) needs from the snapshot, as
    keyword arguments: `max_length` from the profile's max_seq_len (TRL's default of 1024 silently drops the
    target of a longer row), the truncation side, the loss (assistant-only on messages, with the training
    template's generation markers; completion-only on prompt-completion) and, for SFT, `chat_template_path`.
    The same values `mashbill train` passes (trainers/methods/sft.py, dpo.py). None for a format TRL has no config for,
    or a snapshot whose profile names no max_seq_len."""
    profile = manifest.get("trainer_profile") or {}
    if format not in SETTINGS_FILES or not profile.get("max_seq_len"):
        return None
    kw: dict = {"max_length": int(profile["max_seq_len"]),
                "truncation_mode": "keep_end" if profile.get("truncation_side") == "left" else "keep_start"}
    if format == "messages":
        kw["assistant_only_loss"] = profile.get("loss") in ("assistant-only", "last-turn")
    elif format == "prompt-completion":
        kw["completion_only_loss"] = True
    if format != "preference" and template_path is not None:
        kw["chat_template_path"] = str(Path(template_path).resolve())
    return kw


def label_info(manifest: dict, occurring=()) -> dict:
    """id2label/label2id/problem_type for a classifier: the manifest's class names (from the spec), then any
    label that occurred outside them (sorted, so ids stay stable). Snapshots frozen before the manifest
    carried `classes` fall back to the labels that occurred."""
    classes = manifest.get("classes") or {}
    kind = manifest.get("kind")
    problem = classes.get("problem_type") or ("multi_label_classification" if kind in MULTI_LABEL_KINDS
                                              else "single_label_classification")
    names = list(classes.get("names") or [])
    names += sorted(set(occurring) - set(names))
    return {"id2label": dict(enumerate(names)), "label2id": {n: i for i, n in enumerate(names)},
            "problem_type": problem}


def training_template_of(path: Path, manifest: dict) -> str | None:
    """The snapshot's training template text (None when it ships none); its hash is checked against the
    manifest, which `verify` already checked against the file."""
    name = (manifest.get("trainer_profile") or {}).get("training_template")
    if not name:
        return None
    return (Path(path) / name).read_text(encoding="utf-8")
