"""cleanlab label issues (curation/label_issues.py) with the real MiniLM encoder: on the trainer tests' complexity
requests (class visible in the wording) with six labels flipped on purpose, the flags find the flipped ones; in a
store they are LBL001 flags that `review push --select label-issues` picks and the store report counts."""

from __future__ import annotations

import pytest

from mashbill.curation.label_issues import CODE, LabelIssuesError, find_issues, flag_store
from mashbill.curation.review.select import parse_selection, review_items, select
from mashbill.factory.store import Store
from mashbill.specs import load_spec
from tests.curation.conftest import add_records
from tests.trainers.conftest import complexity_seeds, snaps  # noqa: F401  (the complexity spec library)

pytest.importorskip("cleanlab")
pytest.importorskip("onnxruntime")
CLASSES = ["trivial", "moderate", "complex", "memory_recall"]
FLIP = {0: "complex", 5: "complex", 33: "trivial", 40: "complex", 65: "trivial", 80: "moderate"}


def _flipped():
    seeds = complexity_seeds()
    return [s[0] for s in seeds], [FLIP.get(i, s[2]) for i, s in enumerate(seeds)]


def test_flags_find_the_flipped_labels():
    texts, labels = _flipped()
    res = find_issues(texts, labels, CLASSES)
    flagged = {i for i, f in enumerate(res.flagged) if f}
    assert res.probs.shape == (len(texts), 4) and res.folds == 5
    caught = flagged & set(FLIP)
    # most flipped labels are caught, and most flags are flipped labels
    assert len(caught) >= 4, (sorted(flagged), sorted(FLIP))
    assert len(caught) / len(flagged) >= 0.5, (sorted(flagged), sorted(FLIP))


def test_clean_labels_get_fewer_flags_than_flipped_ones():
    texts, labels = _flipped()
    clean = [s[2] for s in complexity_seeds()]
    assert find_issues(texts, clean, CLASSES).count < find_issues(texts, labels, CLASSES).count


def test_a_label_outside_the_classes_and_a_one_class_set():
    with pytest.raises(LabelIssuesError, match="'urgent' is not one of the classes"):
        find_issues(["a", "b"], ["trivial", "urgent"], CLASSES)
    assert find_issues(["a", "b", "c", "d"], ["trivial"] * 4, CLASSES).count == 0


def _store(tmp_path, snaps):  # noqa: F811
    rs = load_spec(snaps.root / "complexity" / "tcx@1.yaml")
    texts, labels = _flipped()
    with Store.open(tmp_path / "store") as store:
        add_records(store, rs, plans={q: {"complexity": lab} for q, lab in zip(texts, labels)})
    return rs, tmp_path / "store"


def test_flags_are_stored_selected_for_review_and_reported(tmp_path, snaps):  # noqa: F811
    from mashbill.curation.reports.report import build_report

    rs, path = _store(tmp_path, snaps)
    with Store.open(path) as store:
        res = flag_store(store, [rs])
        again = flag_store(store, [rs])  # a second pass replaces the first's flags, it does not add to them
        assert again["flagged_ids"] == res["flagged_ids"] and res["flagged"] >= 4
        items = review_items(store, rs)
    picked = select(items, *parse_selection("label-issues"))
    assert sorted(i.record.id for i in picked) == sorted(res["flagged_ids"])
    assert all(v.severity == "flag" for i in picked for v in i.verdicts if v.code == CODE)
    _, data = build_report(path, tmp_path / "report.html")
    assert data["verdicts"][CODE] == res["flagged"]
    assert CODE in (tmp_path / "report.html").read_text()
