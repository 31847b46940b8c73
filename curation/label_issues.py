"""Label issues with cleanlab: which stored labels a small model, trained on the others, finds suspect.

    res = find_issues(texts, labels, classes)            # out-of-fold probabilities, then cleanlab
    res = flag_store(store, rs)                           # the same over a classifier spec's records; LBL001 flags

The model is the one sentence encoder (`factory.encoders.embeddings`: all-MiniLM-L6-v2 through onnxruntime, no GPU) and a
multinomial logistic regression on its normalised embeddings; `folds`-fold out-of-fold predicted probabilities
(stratified folds, fixed seed) go to `cleanlab.filter.find_label_issues` (`prune_by_noise_rate`). A class rarer
than `folds` is missing from some folds' training rows; there its probability is 0. A set with fewer than two
classes, or fewer than four rows, has no issues to find.

`flag_store` reads a complexity (or other single-label) spec's records whose output parses to one of the schema's
classes, accepted or rejected by a rule, and replaces the `label-issues` stage's verdicts on them with one `LBL001`
flag per suspected record (severity flag: it never removes a record by itself; `review push --select label-issues`
sends them to reviewers and the store report counts them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Sequence

import numpy as np

from mashbill.errors import MashbillError

CODE = "LBL001"
STAGE = "label-issues"


class LabelIssuesError(MashbillError):
    """Label-issue finding cannot run (missing packages, no labels)."""


@dataclass
class Issues:
    flagged: list[bool]  # one per example
    probs: np.ndarray  # out-of-fold probabilities, [n, len(classes)]
    classes: list[str]
    folds: int

    @property
    def count(self) -> int:
        return sum(self.flagged)


def _need():
    try:
        import cleanlab.filter  # noqa: F401
        import sklearn  # noqa: F401
    except ImportError:
        raise LabelIssuesError("label issues need cleanlab and scikit-learn: pip install 'mashbill[curation]'") from None


def embed(texts: Sequence[str], encoder=None) -> np.ndarray:
    from mashbill.factory.encoders.embeddings import Encoder

    enc = encoder or Encoder.load()
    vecs = np.asarray(enc.encode(list(texts)), dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs / np.where(norms == 0, 1, norms)


def out_of_fold(x: np.ndarray, y: np.ndarray, n_classes: int, folds: int = 5, seed: int = 0) -> tuple[np.ndarray, int]:
    """Out-of-fold probabilities [n, n_classes] of a logistic regression; (probs, folds used)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    import warnings

    k = int(max(2, min(folds, len(y))))
    probs = np.zeros((len(y), n_classes))
    with warnings.catch_warnings():  # a class rarer than k: some folds train without it (its column stays 0 there)
        warnings.simplefilter("ignore", UserWarning)
        splits = list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(x, y))
    for train, test in splits:
        model = LogisticRegression(max_iter=2000, C=1.0)
        model.fit(x[train], y[train])
        probs[np.ix_(test, model.classes_)] = model.predict_proba(x[test])
    return probs, k


def find_issues(texts: Sequence[str], labels: Sequence[str], classes: Sequence[str], *, encoder=None,
                folds: int = 5, seed: int = 0, vectors: np.ndarray | None = None) -> Issues:
    """Suspected label errors among (texts, labels); `vectors` skips the encoder (precomputed embeddings)."""
    _need()
    from cleanlab.filter import find_label_issues

    classes = list(classes)
    bad = sorted({lab for lab in labels if lab not in classes})
    if bad:
        raise LabelIssuesError(f"label {bad[0]!r} is not one of the classes ({', '.join(classes)})")
    n = len(labels)
    if n == 0:
        return Issues([], np.zeros((0, len(classes))), classes, 0)
    present = sorted({classes.index(lab) for lab in labels})
    if len(present) < 2 or n < 4:
        return Issues([False] * n, np.zeros((n, len(classes))), classes, 0)
    # cleanlab wants the labels to be 0..K-1 over the classes that occur
    remap = {c: i for i, c in enumerate(present)}
    y = np.array([remap[classes.index(lab)] for lab in labels])
    x = vectors if vectors is not None else embed(texts, encoder)
    probs, k = out_of_fold(x, y, len(present), folds, seed)
    issues = find_label_issues(labels=y, pred_probs=probs, filter_by="prune_by_noise_rate")
    full = np.zeros((n, len(classes)))
    full[:, present] = probs
    return Issues([bool(v) for v in issues], full, classes, k)


def classes_of(rs) -> tuple[str, list[str]]:
    """(output field, classes) of a single-label classifier spec: the schema's one enum property."""
    props = (rs.output_schema or {}).get("properties") or {}
    enums = [(k, v["enum"]) for k, v in props.items() if isinstance(v, dict) and isinstance(v.get("enum"), list)]
    if len(enums) != 1:
        raise LabelIssuesError(f"{rs.ref}: label issues need a single-label spec (one enum property in the output "
                               f"schema, like complexity); this schema has {len(enums)}")
    return enums[0][0], [str(x) for x in enums[0][1]]


def labelled_records(store, rs) -> tuple[list, list[str], list[str]]:
    field, classes = classes_of(rs)
    recs, labels = [], []
    for rec in store.records(rs.hash):
        lab = rec.output.get(field) if isinstance(rec.output, dict) else None
        if lab in classes and isinstance((rec.input or {}).get("query"), str):
            recs.append(rec)
            labels.append(lab)
    return recs, labels, classes


def flag_store(store, specs: Sequence, *, folds: int = 5, seed: int = 0, write: bool = True, encoder=None) -> dict:
    """Find label issues over the labelled records of `specs` (resolved specs of one classifier kind, pooled: more
    rows make better out-of-fold probabilities) and store one LBL001 flag per suspected record."""
    from mashbill.factory.records import Verdict

    recs, labels, classes = [], [], None
    for rs in specs:
        r, lab, cls = labelled_records(store, rs)
        if classes is not None and cls != classes:
            raise LabelIssuesError(f"{rs.ref}: its classes {cls} differ from {specs[0].ref}'s {classes}")
        classes = cls
        recs += r
        labels += lab
    if not recs:
        raise LabelIssuesError(f"no labelled records of {', '.join(rs.ref for rs in specs)} in {store.root}")
    res = find_issues([r.input["query"] for r in recs], labels, classes, folds=folds, seed=seed, encoder=encoder)
    rows = []
    for rec, lab, hit, p in zip(recs, labels, res.flagged, res.probs):
        if hit:
            best = classes[int(np.argmax(p))]
            rows.append((rec.id, Verdict(CODE, "flag", f"cleanlab: label {lab!r} is suspect; out-of-fold model says "
                                                        f"{best!r} (p={float(p.max()):.2f}, label p="
                                                        f"{float(p[classes.index(lab)]):.2f})", STAGE)))
    if write:
        run_id = "label-issues-" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        store.replace_verdicts(STAGE, run_id, rows, [r.id for r in recs])
    return {"records": len(recs), "flagged": len(rows), "folds": res.folds, "classes": classes,
            "flagged_ids": [rid for rid, _ in rows], "per_label": {c: sum(1 for lab, h in zip(labels, res.flagged)
                                                                         if h and lab == c) for c in classes}}
