"""From the quick start to a release: the README's block "From the quick start to a release", command by command,
as a user runs it (the real CLI in a subprocess, in the folder the quick start ran in, on its store).

snapshot -> train classify / sft (/ dpo when the quick start froze a preference snapshot) -> export onnx (INT8,
parity) -> export gguf (F16, Q8_0, Q4_K_M, verification) -> release check -> tag -> verify -> tamper -> verify fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_cli

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("llama_cpp")


def _ok(proc, what: str):
    assert proc.returncode == 0, f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _guards(folder: Path) -> Path:
    """A guard file from the complexity snapshot: its test split as the held-out set, its eval split as guards
    (what a user would write by hand from queries they care about)."""
    from mashbill.curation.pull import load_snapshot

    data = load_snapshot(folder / "mashbill-data" / "snapshots" / "quickstart-complexity@1", "classification")
    names = data.label_info["id2label"]

    def items(split):
        return [{"text": r["text"], "expect": names[r["label"]] if r["label"] in names else names[str(r["label"])]}
                for r in data[split]]

    heldout, guards = items("test"), items("eval")
    assert heldout and guards, "the quick start's complexity snapshot has an empty test or eval split"
    path = folder / "guards.yaml"
    path.write_text(yaml.safe_dump({"heldout": heldout, "guards": [{"id": f"g{i}", **g} for i, g in enumerate(guards)]},
                                   allow_unicode=True), encoding="utf-8")
    return path


def test_quick_start_to_a_verified_release_and_a_tamper_named(quickstart):
    cwd, _ = quickstart
    snaps = {p.name for p in (cwd / "mashbill-data" / "snapshots").iterdir()}
    assert "quickstart-complexity@1" in snaps and "quickstart-plan@1" in snaps

    # train: one documented command per method
    cls = _ok(run_cli("train", "classify", "quickstart-classify", "--stage", "steps:60", cwd=cwd, timeout=1500),
              "train classify")
    assert "eval accuracy" in cls.stdout
    _ok(run_cli("train", "sft", "quickstart-sft", "--stage", "steps:3", cwd=cwd, timeout=2400), "train sft")
    for run, method in (("quickstart-classify", "classify"), ("quickstart-sft", "sft")):
        lineage = json.loads((cwd / "mashbill-runs" / run / "lineage.json").read_text(encoding="utf-8"))
        assert lineage["method"] == method and lineage["stage"].startswith("steps:")
    sft_metrics = json.loads((cwd / "mashbill-runs" / "quickstart-sft" / "metrics.json").read_text(encoding="utf-8"))
    assert sft_metrics["global_step"] == 3
    dpo = run_cli("train", "dpo", "quickstart-dpo", "--stage", "steps:2", cwd=cwd, timeout=2400)
    if any(s.startswith("quickstart-preference@") for s in snaps):
        _ok(dpo, "train dpo")
        assert (cwd / "mashbill-runs" / "quickstart-dpo" / "adapter" / "adapter_config.json").is_file()
    else:  # the quick start said why it froze none; the DPO command refuses in one line, before any model load
        assert dpo.returncode == 2 and "no snapshot quickstart-preference" in dpo.stderr
        assert len(dpo.stderr.strip().splitlines()) == 1 and not (cwd / "mashbill-runs" / "quickstart-dpo").exists()

    # export
    _ok(run_cli("export", "onnx", "./mashbill-runs/quickstart-classify", "--store", "./mashbill-data", cwd=cwd,
                timeout=1200), "export onnx")
    onnx = cwd / "mashbill-exports" / "quickstart-classify-onnx"
    parity = json.loads((onnx / "parity.json").read_text(encoding="utf-8"))
    assert (onnx / "model.int8.onnx").is_file() and parity["parity"]["int8"]["n"] >= 1
    _ok(run_cli("export", "gguf", "./mashbill-runs/quickstart-sft", "--store", "./mashbill-data", cwd=cwd,
                timeout=2400), "export gguf")
    gguf = cwd / "mashbill-exports" / "quickstart-sft-gguf"
    for name in ("model.f16.gguf", "model.q8_0.gguf", "model.q4_k_m.gguf", "Modelfile", "export.json"):
        assert (gguf / name).is_file(), name
    verify = json.loads((gguf / "verify.json").read_text(encoding="utf-8"))
    # the quick start's plan snapshot is tiny (all in train): the report says which split it verified on
    assert set(verify["files"]) == {"f16", "q8_0", "q4_k_m"} and verify["rows"] >= 1
    assert verify["held_out"] == (verify["split"] != "train")

    # release: INT8 (candidate) against fp32 (incumbent) on a guard file
    guards = _guards(cwd)
    check = run_cli("release", "check", f"{onnx}/model.int8.onnx", "--incumbent", f"{onnx}/model.onnx",
                    "--guards", guards, "--json", cwd=cwd, timeout=600)
    assert check.returncode in (0, 1), check.stderr
    record = json.loads(check.stdout)
    assert check.returncode == (0 if record["decision"]["promote"] else 1)
    assert list((cwd / "mashbill-releases" / "checks").iterdir())
    _ok(run_cli("release", "tag", "complexity-prod", f"{onnx}/model.int8.onnx", cwd=cwd), "release tag")
    _ok(run_cli("release", "verify", "complexity-prod", cwd=cwd), "release verify")

    # one byte changed in the tagged file: verify exits 1 naming it
    target = onnx / "model.int8.onnx"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    bad = run_cli("release", "verify", "complexity-prod", cwd=cwd)
    assert bad.returncode == 1 and "model.int8.onnx" in bad.stderr + bad.stdout
