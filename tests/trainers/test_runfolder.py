"""The run folder's lineage records the sha256 of every trained file (model/, adapter/), so that an export can
refuse weights changed after training (issue 26)."""

from __future__ import annotations

import hashlib
import json

from mashbill.trainers.runfolder import weight_hashes, write_run


def _save(folder):
    (folder / "model" / "tok").mkdir(parents=True)
    (folder / "model" / "model.safetensors").write_bytes(b"\x01" * 5000)
    (folder / "model" / "config.json").write_text("{}")
    (folder / "model" / "tok" / "tokenizer.json").write_text('{"v": 1}')


def test_write_run_records_the_sha256_of_every_trained_file(tmp_path):
    out = write_run(tmp_path / "run", config_dump={"a": 1}, lineage_doc={"schema": "mashbill.lineage/1"},
                    metrics={}, save_weights=_save)
    lin = json.loads((out / "lineage.json").read_text())
    files = sorted(p.relative_to(out).as_posix() for p in (out / "model").rglob("*") if p.is_file())
    assert sorted(lin["files"]) == files == ["model/config.json", "model/model.safetensors",
                                             "model/tok/tokenizer.json"]
    for rel, digest in lin["files"].items():
        assert digest == hashlib.sha256((out / rel).read_bytes()).hexdigest()
    assert weight_hashes(out) == lin["files"]  # config.yaml, metrics.json and lineage.json are not weights
