"""MiniLM classifier run -> ONNX fp32 + INT8 with parity, latency, lineage metadata and an export manifest."""

from __future__ import annotations

import json

import numpy as np

from mashbill.exporters import manifest as mf
from mashbill.exporters.onnx.onnx_export import load_classifier, read_metadata
from mashbill.exporters.onnx.parity import labelled_texts, torch_logits
from mashbill.exporters.predict import OnnxPredictor
from mashbill.exporters.runs import Snapshot, load_run
from mashbill.hashing import sha256_file
from tests.conftest import run_cli


def test_onnx_export_matches_the_pytorch_model(onnx_export, classify_run, plan_snapshot):
    path, m = onnx_export
    assert m["kind"] == "onnx" and (path / "export.json").is_file()
    # the graphs reproduce the PyTorch logits on texts they were not traced with, at other batch sizes
    model, tokenizer = load_classifier(load_run(classify_run))
    snap = Snapshot(plan_snapshot.path, plan_snapshot.manifest)
    texts, gold = labelled_texts(snap)
    ref = torch_logits(model, tokenizer, texts, 64)
    fp32_pred = OnnxPredictor(path / "model.onnx")
    fp32 = fp32_pred.logits(texts)
    int8 = np.concatenate([OnnxPredictor(path / "model.int8.onnx").logits_one(t) for t in texts])
    assert fp32.shape == ref.shape == (len(texts), len(model.config.id2label))
    assert np.abs(fp32 - ref).max() < 1e-3
    assert 0 < np.abs(int8 - ref).max() < 1.0  # quantized: close, not identical
    # batch 1 unpadded == its row of a padded batch (dynamic axes, masking)
    assert np.allclose(fp32_pred.logits_one(texts[-1])[0], fp32[-1], atol=1e-4)
    # the report holds what it says, recomputed here from the graphs
    rep = m["reports"]["parity"]
    p8 = rep["parity"]["int8"]
    assert p8["n"] == len(texts)
    assert abs(p8["max_abs_logit_diff"] - float(np.abs(int8 - ref).max())) < 1e-4
    agree = np.mean([(a > 0).tolist() == (b > 0).tolist() for a, b in zip(ref, int8)])
    assert abs(p8["agreement"] - agree) < 1e-3
    assert set(rep["latency"]) == {"fp32_threads1", "fp32_threads2", "int8_threads1", "int8_threads2"}
    for lat in rep["latency"].values():
        assert 0 < lat["p50_ms"] <= lat["p95_ms"] <= lat["p99_ms"]
    # INT8 is much smaller than fp32
    assert (path / "model.int8.onnx").stat().st_size < 0.4 * (path / "model.onnx").stat().st_size


def test_onnx_graph_carries_lineage_and_the_manifest_hashes_every_artifact(onnx_export, classify_run, plan_snapshot):
    import onnx

    path, m = onnx_export
    lin_run = json.loads((classify_run / "lineage.json").read_text())
    graph = onnx.load(str(path / "model.onnx"), load_external_data=False)
    assert {o.domain: o.version for o in graph.opset_import}[""] == 18
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.graph.input}
    assert dims == {"input_ids": ["batch", "sequence"], "attention_mask": ["batch", "sequence"]}
    for name in ("model.onnx", "model.int8.onnx"):
        meta = read_metadata(path / name)
        lineage = json.loads(meta["mashbill.lineage"])
        assert lineage["snapshot"]["id"] == plan_snapshot.manifest["snapshot_id"]
        assert lineage["run"]["run_id"] == lin_run["run_id"]
        assert lineage["spec_hashes"] == lin_run["spec_hashes"]
        assert json.loads(meta["mashbill.id2label"])  # labels travel with the graph
    assert m["spec_hashes"] == lin_run["spec_hashes"]
    assert m["snapshot"]["snapshot_id"] == plan_snapshot.manifest["snapshot_id"]
    assert m["run"]["run_id"] == lin_run["run_id"]
    on_disk = {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()} - {"export.json"}
    assert {a["path"] for a in m["artifacts"].values()} == on_disk
    for a in m["artifacts"].values():
        assert sha256_file(path / a["path"]) == a["sha256"]
    assert mf.verify(path)["primary"] == "onnx_int8"


def test_predict_cli_runs_the_exported_classifier(onnx_export, classify_run, plan_snapshot, tmp_path):
    path, _ = onnx_export
    model, tokenizer = load_classifier(load_run(classify_run))
    snap = Snapshot(plan_snapshot.path, plan_snapshot.manifest)
    texts, _ = labelled_texts(snap)
    inputs = tmp_path / "q.jsonl"
    inputs.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:3]), encoding="utf-8")
    proc = run_cli("predict", path / "model.onnx", inputs, check=True)
    rows = [json.loads(ln) for ln in proc.stdout.splitlines()]
    ref = torch_logits(model, tokenizer, texts[:3], 64)
    names = model.config.id2label
    assert [r["text"] for r in rows] == texts[:3]
    assert [r["label"] for r in rows] == [sorted(names[j] for j in np.nonzero(r > 0)[0]) for r in ref]
    one = run_cli("predict", path, texts[0], check=True)  # an export folder: its primary (INT8) artifact
    assert json.loads(one.stdout)["text"] == texts[0]
    # a .txt file: one input per line, blank lines skipped (README "predict")
    from tests.cli.conftest import invoke

    plain = tmp_path / "q.txt"
    plain.write_text(texts[0] + "\n\n" + texts[1] + "\n", encoding="utf-8")
    res = invoke("predict", path / "model.onnx", plain)
    assert res.exit_code == 0, res.output
    assert [json.loads(ln) for ln in res.stdout.splitlines()] == rows[:2]


def test_predict_refuses_bad_inputs(tmp_path, onnx_export):
    path, _ = onnx_export
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"text": "ok"}\n{"nope": 1}\n', encoding="utf-8")
    proc = run_cli("predict", path / "model.onnx", bad)
    assert proc.returncode == 2 and f"{bad}:2" in proc.stderr and "'text'" in proc.stderr
    lonely = tmp_path / "lonely.onnx"
    lonely.write_bytes((path / "model.int8.onnx").read_bytes())  # no tokenizer beside it
    proc = run_cli("predict", lonely, "hello")
    assert proc.returncode == 2 and "tokenizer" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
