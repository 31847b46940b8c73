"""`mashbill eval` on real students (exporters/evaluation/evaluate.py): a single-label complexity classifier (MiniLM, a few
real AdamW steps on the trainer tests' complexity snapshot) as a run folder and as its ONNX export, on a user's JSONL
set, the yardstick and the snapshot's held-out split; the figures are recomputed here from the students' own
predictions and from labels known by construction (the teacher's stored labels); bad sets are refused in one line
with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mashbill.curation.snapshots.snapshot import verify
from mashbill.exporters.runs import Snapshot
from mashbill.hashing import sha256_file
from tests.cli.conftest import error_lines, invoke
from tests.exporters.conftest import minilm_dir, write_lineage
from tests.trainers.conftest import complexity_seeds, snaps  # noqa: F401  (the complexity snapshot and its store)

CLASSES = ["trivial", "moderate", "complex", "memory_recall"]
pytestmark = pytest.mark.timeout(1800)


def _train(run: Path, snap_path: Path, steps: int = 15) -> Path:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from mashbill.exporters.onnx.parity import labelled_texts

    torch.set_num_threads(1)
    snap = Snapshot(snap_path, verify(snap_path))
    texts, gold = labelled_texts(snap, "train")
    base = minilm_dir()
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(base), num_labels=4, id2label=dict(enumerate(CLASSES)), label2id={c: i for i, c in enumerate(CLASSES)})
    tok = AutoTokenizer.from_pretrained(str(base))
    enc = tok(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
    target = torch.tensor([CLASSES.index(g) for g in gold])
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    model.train()
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(**enc).logits, target)
        loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    run.mkdir(parents=True)
    model.save_pretrained(str(run / "model"))
    tok.save_pretrained(str(run / "model"))
    write_lineage(run, "classify", snap, base, sha256_file(base / "model.safetensors"))
    return run


@pytest.fixture(scope="module")
def cx_run(tmp_path_factory, snaps):  # noqa: F811
    return _train(tmp_path_factory.mktemp("eval-runs") / "cx", snaps.cx)


@pytest.fixture(scope="module")
def cx_onnx(tmp_path_factory, cx_run, snaps):  # noqa: F811
    from mashbill.exporters.build import export_onnx

    out, _ = export_onnx(cx_run, out=tmp_path_factory.mktemp("eval-exports") / "cx-onnx", snapshot=snaps.cx,
                         latency_samples=5, threads=(1,))
    return out


def _user_set(tmp_path: Path) -> tuple[Path, list[str], list[str], int]:
    """Eight requests the store holds teacher labels for: six with the teacher's label as gold, two with another
    class, so the teacher's accuracy on the set is 6/8 by construction."""
    seeds = complexity_seeds()
    picked = [seeds[0], seeds[1], seeds[30], seeds[31], seeds[60], seeds[61], seeds[2], seeds[32]]
    rows, gold = [], []
    for i, (q, _, label, _) in enumerate(picked):
        g = label if i < 6 else ("complex" if label != "complex" else "trivial")
        rows.append({"query": q, "label": g})
        gold.append(g)
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path, [r["query"] for r in rows], gold, 6


def _check_figures(res: dict, gold: list[str], predicted: list[str]):
    st = res["student"]
    assert [p["predicted"] for p in res["predictions"]] == predicted
    assert st["accuracy"] == pytest.approx(sum(g == p for g, p in zip(gold, predicted)) / len(gold), abs=1e-4)
    m = st["confusion"]["matrix"]
    for g, p in set(zip(gold, predicted)):
        assert m[CLASSES.index(g)][CLASSES.index(p)] == sum(1 for x in zip(gold, predicted) if x == (g, p))
    assert sum(map(sum, m)) == len(gold) and 0 <= st["ece"] <= 1


def test_eval_of_a_run_folder_on_a_user_set_and_the_yardstick(cx_run, snaps, tmp_path):  # noqa: F811
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path, queries, gold, teacher_right = _user_set(tmp_path)
    res = invoke("eval", cx_run, "--on", path, "--on", "yardstick:complexity", "--store", snaps.store, "--json")
    assert res.exit_code == 0, res.output
    printed = json.loads(res.stdout)
    assert set(printed["sets"]) == {str(path), "yardstick:complexity"}
    assert not any("predictions" in v for v in printed["sets"].values())
    doc = json.loads((cx_run / "eval.json").read_text())
    assert doc["schema"] == "mashbill.eval/1" and doc["target"]["form"] == "run"
    mine = doc["sets"][str(path)]
    model = AutoModelForSequenceClassification.from_pretrained(str(cx_run / "model")).eval()
    tok = AutoTokenizer.from_pretrained(str(cx_run / "model"))
    with torch.inference_mode():
        logits = model(**tok(queries, padding=True, truncation=True, max_length=128, return_tensors="pt")).logits
    _check_figures(mine, gold, [CLASSES[int(i)] for i in logits.argmax(-1)])
    # the teacher's stored labels on the same rows: 6 of 8 by construction
    assert mine["teacher"]["rows"] == 8 and mine["teacher"]["accuracy"] == pytest.approx(teacher_right / 8, abs=1e-4)
    assert {"majority", "heuristic"} <= set(mine["baselines"])
    assert mine["baselines"]["majority"]["source"] == "snapshot train split"
    yard = doc["sets"]["yardstick:complexity"]
    from mashbill.exporters.evaluation.eval_sets import YARDSTICKS

    report = [r for r in map(json.loads, YARDSTICKS["complexity"].read_text().splitlines()) if r["split"] == "report"]
    assert yard["rows"] == len(report) and yard["source"]["half"] == "report" and len(yard["sha256"]) == 64
    assert (cx_run / "eval.html").read_text().count("<table class=m>") == 2  # a drawn confusion matrix per set


def test_eval_of_the_onnx_export_matches_its_own_predictions(cx_onnx, snaps, tmp_path):  # noqa: F811
    from mashbill.exporters.predict import OnnxPredictor

    path, queries, gold, _ = _user_set(tmp_path)
    res = invoke("eval", cx_onnx, "--on", path, "--on", "snapshot:tcx@1", "--store", snaps.store)
    assert res.exit_code == 0, res.output
    assert f"wrote {cx_onnx / 'eval.json'}" in res.stdout and "confusion" in res.stdout
    doc = json.loads((cx_onnx / "eval.json").read_text())
    pred = OnnxPredictor(cx_onnx / "model.int8.onnx")
    _check_figures(doc["sets"][str(path)], gold, [r["label"] for r in pred.predict(queries)])
    held = doc["sets"]["snapshot:tcx@1"]
    assert held["source"]["split"] == "test" and held["rows"] == len(Snapshot(snaps.cx, verify(snaps.cx)).rows("test"))
    # a later eval of one set replaces that set's entry and keeps the others
    again = invoke("eval", cx_onnx, "--on", path, "--limit", "3", "--store", snaps.store)
    assert again.exit_code == 0, again.output
    sets = json.loads((cx_onnx / "eval.json").read_text())["sets"]
    assert set(sets) == {str(path), "snapshot:tcx@1"} and sets[str(path)]["rows"] == 3


@pytest.mark.parametrize("content, why", [
    ('{"query": "Hi!", "label": "urgent"}\n', "label 'urgent' is not one of the target's classes"),
    ("", "holds no rows"),
    ('{"query": "What is 2+2?", "plan": {"categories": ["precision_tools"], "tool": "calculate"}}\n',
     "a planner set (gold plan facts) on a classifier"),
    ('{"query": "Hi!"}\n', "row 1: no gold answer"),
])
def test_bad_sets_are_one_line_exit_2_and_nothing_written(cx_onnx, tmp_path, content, why):
    before = sorted(p.name for p in cx_onnx.iterdir())
    stamp = (cx_onnx / "eval.json").read_bytes() if (cx_onnx / "eval.json").exists() else None
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    # a good set first: nothing runs and nothing is written when any set is bad
    good = tmp_path / "good.jsonl"
    good.write_text('{"query": "Hi!", "label": "trivial"}\n', encoding="utf-8")
    res = invoke("eval", cx_onnx, "--on", good, "--on", path, "--store", tmp_path / "none")
    assert res.exit_code == 2 and len(error_lines(res)) == 1, res.output
    assert why.replace("row 1: ", "") in res.stderr and "bad.jsonl" in res.stderr, res.stderr
    assert sorted(p.name for p in cx_onnx.iterdir()) == before
    assert ((cx_onnx / "eval.json").read_bytes() if stamp is not None else None) == stamp


def test_release_check_takes_an_eval_set_as_its_held_out(cx_onnx, tmp_path):
    from mashbill.exporters.evaluation.eval_sets import load_set
    from mashbill.exporters.predict import OnnxPredictor

    path, queries, gold, _ = _user_set(tmp_path)
    args = ["release", "check", cx_onnx / "model.int8.onnx", "--incumbent", cx_onnx / "model.onnx",
            "--dir", tmp_path / "rel", "--json"]
    res = invoke(*args, "--eval", path)
    assert res.exit_code in (0, 1), res.output
    rec = json.loads(res.stdout)
    assert rec["eval_sets"] == [{"set": str(path), "sha256": load_set(str(path)).sha256, "rows": 8}]
    assert rec["guards"]["heldout"] == 8 and rec["guards"]["path"] is None
    got = [r["label"] for r in OnnxPredictor(cx_onnx / "model.onnx").predict(queries)]
    want = round(100 * sum(g == p for g, p in zip(gold, got)) / 8, 2)
    assert rec["incumbent"]["heldout_accuracy"] == want
    # neither --guards nor --eval, or a bad set: one line, no record
    for extra in ([], ["--eval", tmp_path / "missing.jsonl"]):
        bad = invoke(*args, *extra)
        assert bad.exit_code == 2 and len(error_lines(bad)) == 1, bad.output
    assert len(list((tmp_path / "rel" / "checks").iterdir())) == 1
