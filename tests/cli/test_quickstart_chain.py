"""From the quick start to a release: the README's block "From the quick start to a release", command by command,
as a user runs it (the real CLI in a subprocess, in the folder the quick start ran in, on its store).

snapshot -> train classify / sft / dpo (on the quick start's preference snapshot) -> export onnx (INT8,
parity) -> export gguf (F16, Q8_0, Q4_K_M, verification) -> eval (run, ONNX, GGUF) -> release check -> tag ->
verify -> tamper -> verify fails.
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
# three trainings (DPO on ~2,000-token pairs), two exports and the quick start itself: past the default 900 s on
# a busy machine
pytestmark = pytest.mark.timeout(5400)


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


def _preference_pairs(snapshots: Path, name: str) -> str:
    """Check the quick start's DPO pairs against its plan snapshot; returns the preference snapshot's id.

    The prompt is the runtime prompt the plan record was made for (system: the training prompt with this record's
    taxonomy; user: the query alone), `chosen` is that record's accepted plan, `rejected` a different JSON plan."""
    from mashbill.curation.pull import load_snapshot

    plans = load_snapshot(snapshots / "quickstart-plan@1", "messages")
    runtime = {r["messages"][1]["content"]: r["messages"] for s in plans for r in plans[s]}
    pref = load_snapshot(snapshots / name, "preference")
    rows = [r for s in pref for r in pref[s]]
    assert len(rows) >= 2 and pref["train"].num_rows >= 2, "too few pairs to train DPO for two steps"
    for r in rows:
        system, user = r["prompt"]
        messages = runtime[user["content"]]
        assert [system, user] == messages[:2] and system["role"] == "system" and user["role"] == "user"
        chosen, rejected = r["chosen"][0]["content"], r["rejected"][0]["content"]
        assert json.loads(chosen) == json.loads(messages[2]["content"])
        assert isinstance(json.loads(rejected), list) and json.loads(rejected) != json.loads(chosen)
    manifest = json.loads((snapshots / name / "manifest.json").read_text(encoding="utf-8"))
    return manifest["snapshot_id"]


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
    # DPO on the quick start's preference snapshot: its pairs are the runtime prompt and two JSON plans
    [pref] = [s for s in snaps if s.startswith("quickstart-preference@")]
    pairs = _preference_pairs(cwd / "mashbill-data" / "snapshots", pref)
    _ok(run_cli("train", "dpo", "quickstart-dpo", "--stage", "steps:2", cwd=cwd, timeout=2400), "train dpo")
    dpo_run = cwd / "mashbill-runs" / "quickstart-dpo"
    assert (dpo_run / "adapter" / "adapter_config.json").is_file()
    lineage = json.loads((dpo_run / "lineage.json").read_text(encoding="utf-8"))
    assert lineage["method"] == "dpo" and lineage["stage"] == "steps:2"
    assert lineage["snapshot"]["id"] == pairs  # the run names the snapshot it trained on
    assert json.loads((dpo_run / "metrics.json").read_text(encoding="utf-8"))["global_step"] == 2

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

    # eval (docs/eval.md): the classify run, its ONNX export and the GGUF export on labelled sets
    for target in ("./mashbill-runs/quickstart-classify", "./mashbill-exports/quickstart-classify-onnx"):
        _ok(run_cli("eval", target, "--on", "yardstick:complexity", cwd=cwd, timeout=900), f"eval {target}")
        doc = json.loads((cwd / target / "eval.json").read_text(encoding="utf-8"))
        res = doc["sets"]["yardstick:complexity"]
        assert res["rows"] >= 100 and 0 <= res["student"]["accuracy"] <= 1 and "heuristic" in res["baselines"]
    (cwd / "plans.jsonl").write_text(json.dumps({"query": "What is 17 times 23?", "plan": {
        "categories": ["precision_tools"], "tool": "calculate"}}) + "\n", encoding="utf-8")
    _ok(run_cli("eval", "./mashbill-exports/quickstart-sft-gguf", "--on", "plans.jsonl", "--max-tokens", "96",
                cwd=cwd, timeout=1800), "eval gguf")
    st = json.loads((gguf / "eval.json").read_text(encoding="utf-8"))["sets"]["plans.jsonl"]["student"]
    assert st["n"] == 1 and st["rules"] and "categories_right" in st

    # release: INT8 (candidate) against fp32 (incumbent) on a guard file
    assert _guards(cwd) == cwd / "guards.yaml"
    # the README's commands word for word (relative to the quick-start folder); --json only to read the record
    rel = "./mashbill-exports/quickstart-classify-onnx"
    check = run_cli("release", "check", f"{rel}/model.int8.onnx", "--incumbent", f"{rel}/model.onnx",
                    "--guards", "guards.yaml", "--json", cwd=cwd, timeout=600)
    assert check.returncode in (0, 1), check.stderr
    record = json.loads(check.stdout)
    assert check.returncode == (0 if record["decision"]["promote"] else 1)
    assert list((cwd / "mashbill-releases" / "checks").iterdir())
    _ok(run_cli("release", "tag", "complexity-prod", f"{rel}/model.int8.onnx", cwd=cwd), "release tag")
    _ok(run_cli("release", "verify", "complexity-prod", cwd=cwd), "release verify")

    # one byte changed in the tagged file: verify exits 1 naming it
    target = onnx / "model.int8.onnx"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    bad = run_cli("release", "verify", "complexity-prod", cwd=cwd)
    assert bad.returncode == 1 and "model.int8.onnx" in bad.stderr + bad.stdout
