"""Bad run folders and snapshots: one line naming the file and field, exit 2, nothing left under the export folder."""

from __future__ import annotations

import json
import shutil

import pytest

from mashbill.exporters.runs import ExportError, load_run, snapshot_for
from mashbill.files import staged_dir
from tests.conftest import one_line_error, run_cli


def test_run_without_lineage_is_refused_and_nothing_is_written(tmp_path):
    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    out = tmp_path / "exports" / "x"
    proc = run_cli("export", "onnx", run, "--out", out)
    one_line_error(proc, str(run / "lineage.json"), "missing")
    assert not (tmp_path / "exports").exists() or list((tmp_path / "exports").iterdir()) == []


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.pop("snapshot"), "'snapshot'"),
    (lambda d: d.update(schema="other/1"), "'schema'"),
    (lambda d: d.update(method="rlhf"), "'method'"),
])
def test_lineage_fields_are_checked(tmp_path, classify_run, edit, field):
    run = tmp_path / "run"
    shutil.copytree(classify_run, run)
    data = json.loads((run / "lineage.json").read_text())
    edit(data)
    (run / "lineage.json").write_text(json.dumps(data))
    with pytest.raises(ExportError, match=field) as exc:
        load_run(run)
    assert str(run / "lineage.json") in str(exc.value)


def test_adapter_whose_base_is_missing_is_refused(tmp_path, lora_run):
    run = tmp_path / "run"
    shutil.copytree(lora_run, run)
    data = json.loads((run / "lineage.json").read_text())
    data["base_model"]["path"] = str(tmp_path / "gone")
    (run / "lineage.json").write_text(json.dumps(data))
    out = tmp_path / "exports" / "planner"
    proc = run_cli("export", "gguf", run, "--out", out)
    one_line_error(proc, "base_model.path", str(tmp_path / "gone"))
    assert not (tmp_path / "exports").exists() or not any((tmp_path / "exports").iterdir())


def test_snapshot_must_be_the_one_the_run_was_trained_on(tmp_path, classify_run, plan_snapshot):
    run = tmp_path / "run"
    shutil.copytree(classify_run, run)
    data = json.loads((run / "lineage.json").read_text())
    data["snapshot"]["id"] = "0" * 64
    (run / "lineage.json").write_text(json.dumps(data))
    with pytest.raises(ExportError, match="snapshot.id"):
        snapshot_for(load_run(run), plan_snapshot.path)


def test_the_snapshot_defaults_to_the_folder_the_lineage_records(classify_run, plan_snapshot):
    snap = snapshot_for(load_run(classify_run))
    assert snap.path == plan_snapshot.path and snap.manifest["snapshot_id"] == plan_snapshot.manifest["snapshot_id"]


def test_altered_snapshot_is_refused_naming_the_file(tmp_path, classify_run, plan_snapshot):
    snap = tmp_path / "snap"
    shutil.copytree(plan_snapshot.path, snap)
    with open(snap / "data" / "eval.parquet", "ab") as f:
        f.write(b"x")
    with pytest.raises(ExportError, match="data/eval.parquet"):
        snapshot_for(load_run(classify_run), snap)


def test_staged_dir_leaves_nothing_behind_on_failure(tmp_path):
    final = tmp_path / "out" / "export"
    with pytest.raises(RuntimeError):
        with staged_dir(final) as tmp:
            (tmp / "half.bin").write_bytes(b"partial")
            raise RuntimeError("converter died")
    assert not final.exists() and list((tmp_path / "out").iterdir()) == []
    with staged_dir(final) as tmp:
        (tmp / "done.bin").write_bytes(b"ok")
    assert (final / "done.bin").read_bytes() == b"ok" and [p.name for p in (tmp_path / "out").iterdir()] == ["export"]


def _zero_4k(path, at: int = 8192) -> None:
    """Zero 4 KB inside a file (same size, different bytes): a weight file changed after training."""
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(b"\0" * 4096)


def test_weights_changed_after_training_are_refused_naming_the_file_and_both_hashes(tmp_path, classify_run):
    """Issue 26: lineage.json hashed the config, snapshot and base model, never the trained weights."""
    from mashbill.hashing import sha256_file

    run = tmp_path / "run"
    shutil.copytree(classify_run, run)
    weights = run / "model" / "model.safetensors"
    recorded = json.loads((run / "lineage.json").read_text())["files"]["model/model.safetensors"]
    _zero_4k(weights)
    out = tmp_path / "exports" / "x"
    proc = run_cli("export", "onnx", run, "--out", out)
    one_line_error(proc, str(weights), recorded, sha256_file(weights), "changed after training")
    assert not (tmp_path / "exports").exists() or list((tmp_path / "exports").iterdir()) == []


def test_a_file_added_to_or_removed_from_the_model_is_refused(tmp_path, classify_run):
    run = tmp_path / "run"
    shutil.copytree(classify_run, run)
    (run / "model" / "extra.bin").write_bytes(b"x")
    with pytest.raises(ExportError, match="added after training") as exc:
        load_run(run)
    assert str(run / "model" / "extra.bin") in str(exc.value)
    (run / "model" / "extra.bin").unlink()
    (run / "model" / "tokenizer.json").unlink()
    with pytest.raises(ExportError, match="missing") as exc:
        load_run(run)
    assert str(run / "model" / "tokenizer.json") in str(exc.value)


def test_a_run_whose_lineage_has_no_file_hashes_is_refused(tmp_path, classify_run):
    run = tmp_path / "run"
    shutil.copytree(classify_run, run)
    data = json.loads((run / "lineage.json").read_text())
    del data["files"]
    (run / "lineage.json").write_text(json.dumps(data))
    with pytest.raises(ExportError, match="field 'files' is missing"):
        load_run(run)


def test_a_truncated_safetensors_is_one_line_not_a_traceback(tmp_path, classify_run):
    """Issue 26: `export onnx` on a truncated model.safetensors was a traceback. Its lineage re-hashed to match
    (as if truncated before the lineage was written), so the loader itself meets the damaged file."""
    from mashbill.trainers.runfolder import weight_hashes

    run = tmp_path / "run"
    shutil.copytree(classify_run, run)
    weights = run / "model" / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    data = json.loads((run / "lineage.json").read_text())
    data["files"] = weight_hashes(run)
    (run / "lineage.json").write_text(json.dumps(data))
    proc = run_cli("export", "onnx", run, "--out", tmp_path / "exports" / "x")
    one_line_error(proc, str(run / "model"), "cannot load the classifier")
    assert not (tmp_path / "exports").exists() or list((tmp_path / "exports").iterdir()) == []
