"""SmolLM2 LoRA run -> merged -> GGUF F16 -> Q8_0 / Q4_K_M, verified in llama-cpp-python; multimodal reduction;
converter and loader failures; the Ollama Modelfile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mashbill.exporters import manifest as mf
from mashbill.exporters.gguf.gguf_export import convert_f16, rename_text_tensor, text_only_checkpoint
from mashbill.exporters.gguf.gguf_meta import read_kv, tensor_names
from mashbill.exporters.runs import ExportError
from mashbill.hashing import sha256_file
from tests.conftest import run_cli


def test_gguf_export_writes_verified_quantizations_with_lineage(gguf_export, lora_run, plan_snapshot):
    path, m = gguf_export
    names = {"model.f16.gguf", "model.q8_0.gguf", "model.q4_k_m.gguf", "Modelfile", "verify.json", "export.json"}
    assert {p.name for p in path.iterdir()} == names  # no work files left behind
    sizes = {q: (path / f"model.{q}.gguf").stat().st_size for q in ("f16", "q8_0", "q4_k_m")}
    assert sizes["q4_k_m"] < sizes["q8_0"] < sizes["f16"]
    lin_run = json.loads((lora_run / "lineage.json").read_text())
    for q in ("f16", "q8_0", "q4_k_m"):
        kv = read_kv(path / f"model.{q}.gguf")
        lineage = json.loads(kv["mashbill.lineage"])  # added to F16, carried through quantization
        assert lineage["run"]["run_id"] == lin_run["run_id"]
        assert lineage["snapshot"]["id"] == plan_snapshot.manifest["snapshot_id"]
        assert json.loads(kv["mashbill.output_schema"])["type"] in ("array", "object")
        assert "CATEGORIES" in kv["mashbill.system_prompt"]
    assert read_kv(path / "model.q8_0.gguf")["general.file_type"] == 7  # LLAMA_FTYPE_MOSTLY_Q8_0
    assert read_kv(path / "model.q4_k_m.gguf")["general.file_type"] == 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    for a in m["artifacts"].values():
        assert sha256_file(path / a["path"]) == a["sha256"]
    assert m["primary"] == "gguf_q4_k_m"


def test_verification_report_is_consistent(gguf_export):
    path, _ = gguf_export
    v = json.loads((path / "verify.json").read_text())
    assert v["rows"] == 2 and set(v["files"]) == {"f16", "q8_0", "q4_k_m"}
    assert v["rules_engine"].startswith("validators:moe-routing")
    for s in v["files"].values():
        n = len(s["answers"])
        # constrained decoding: every finished answer parses; the rates are the answers' own counts
        assert s["schema_valid_rate"] == round(sum(not any(c.startswith("SCHEMA") for c in a["codes"])
                                                   for a in s["answers"]) / n, 4)
        assert s["rule_pass_rate"] == round(sum(not a["codes"] for a in s["answers"]) / n, 4)
        assert s["exact_match"] == round(sum(a["exact"] for a in s["answers"]) / n, 4)
        assert s["tokens_per_s"] > 0
        for a in s["answers"]:
            if a["finish_reason"] == "stop":
                assert isinstance(json.loads(a["output"]), (dict, list))  # a finished answer parses
    f = v["flips"]["q8_0_vs_q4_k_m"]
    q8, q4 = v["files"]["q8_0"]["answers"], v["files"]["q4_k_m"]["answers"]
    assert f["answers_differ"] == sum(a["output"] != b["output"] for a, b in zip(q8, q4))


def test_merge_changes_the_model_and_f16_matches_the_merged_weights(gguf_export, lora_run):
    """The F16 file holds the merged weights, not the base: compare one projection with the base GGUF's."""
    import gguf
    import numpy as np
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    path, _ = gguf_export
    lin = json.loads((lora_run / "lineage.json").read_text())
    base = AutoModelForCausalLM.from_pretrained(lin["base_model"]["path"], dtype=torch.float32)
    w_base = base.model.layers[0].self_attn.v_proj.weight.detach().numpy().copy()
    merged = PeftModel.from_pretrained(base, str(lora_run / "adapter")).merge_and_unload()
    w_merged = merged.model.layers[0].self_attn.v_proj.weight.detach().numpy()
    assert np.abs(w_merged - w_base).max() > 1e-4
    reader = gguf.GGUFReader(str(path / "model.f16.gguf"))
    [t] = [t for t in reader.tensors if t.name == "blk.0.attn_v.weight"]
    w_gguf = np.asarray(t.data, dtype=np.float32).reshape(w_merged.shape)
    # f16 rounding is far below the LoRA delta
    assert np.abs(w_gguf - w_merged).max() < 0.3 * np.abs(w_gguf - w_base).max()


def test_modelfile_template_renders_like_the_models_chat_template(gguf_export):
    from transformers import AutoTokenizer

    from mashbill.exporters.gguf.modelfile import FAMILIES

    path, _ = gguf_export
    text = (path / "Modelfile").read_text()
    assert "FROM ./model.q4_k_m.gguf" in text
    assert 'PARAMETER stop "<|im_end|>"' in text
    kv = read_kv(path / "model.q4_k_m.gguf")
    assert "SYSTEM \"\"\"" + kv["mashbill.system_prompt"] + "\"\"\"" in text
    # Ollama's range over .Messages, expanded by hand, equals the HF chat template's rendering
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "Was ist 2+2?"}]
    _, template, _ = FAMILIES["chatml"]
    body = template.split("{{- range .Messages }}")[1].split("{{ end }}")[0]
    tail = template.split("{{ end }}")[1]
    ours = "".join(body.replace("{{ .Role }}", m["role"]).replace("{{ .Content }}", m["content"]) for m in msgs) + tail
    tok = AutoTokenizer.from_pretrained(json.loads(kv["mashbill.lineage"])["base_model"]["path"])
    assert ours == tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


def test_predict_cli_runs_the_gguf_planner(gguf_export):
    path, _ = gguf_export
    proc = run_cli("predict", path / "model.q8_0.gguf", "What is 1847 * 23 + 519?", "--threads", "1", check=True)
    row = json.loads(proc.stdout)
    assert row["text"] == "What is 1847 * 23 + 519?"
    # the adapter is untrained: under the schema grammar its answer is a JSON plan, or it ran into max_tokens
    # (looping inside a string); a finished answer that is not JSON would mean the grammar was not applied
    assert (row["json"] is True and isinstance(row["output"], list)) or row["finish_reason"] == "length", row


def test_gguf_that_does_not_load_is_one_line(tmp_path, gguf_export):
    path, _ = gguf_export
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a gguf at all" * 100)
    half = tmp_path / "half.gguf"
    data = (path / "model.q4_k_m.gguf").read_bytes()
    half.write_bytes(data[: len(data) // 2])
    for f in (garbage, half):
        proc = run_cli("predict", f, "hello")
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and str(f) in lines[0], proc.stderr


def test_converter_failure_is_one_line_and_leaves_no_file(tmp_path, lora_run):
    lin = json.loads((lora_run / "lineage.json").read_text())
    src = tmp_path / "hf"
    src.mkdir()
    cfg = json.loads((Path(lin["base_model"]["path"]) / "config.json").read_text())
    cfg["architectures"] = ["MashbillToyForCausalLM"]
    (src / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "x.gguf"
    with pytest.raises(ExportError, match="convert_hf_to_gguf.py failed") as exc:
        convert_f16(src, out)
    assert "\n" not in str(exc.value) and not out.exists()


def test_multimodal_checkpoint_keeps_and_renames_the_text_tensors(tmp_path, lora_run):
    """A tiny synthetic vision-language checkpoint: text decoder under model.language_model.*, plus a vision
    tower and a projector. The reduced folder loads as a causal LM with the same logits, and converts to GGUF."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    lin = json.loads((lora_run / "lineage.json").read_text())
    tok = AutoTokenizer.from_pretrained(lin["base_model"]["path"])
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      tie_word_embeddings=False, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    text_model = LlamaForCausalLM(cfg).eval()
    state = {}
    for k, v in text_model.state_dict().items():
        new = "model.language_model." + k[len("model."):] if k.startswith("model.") else k
        state[new] = v.contiguous()
    state["model.vision_tower.patch_embed.weight"] = torch.randn(16, 3, 4, 4)
    state["model.vision_tower.blocks.0.attn.qkv.weight"] = torch.randn(48, 16)
    state["model.multi_modal_projector.linear_1.weight"] = torch.randn(64, 16)
    src = tmp_path / "vlm"
    src.mkdir()
    save_file(state, str(src / "model.safetensors"), metadata={"format": "pt"})
    (src / "config.json").write_text(json.dumps({
        "architectures": ["ToyVisionLanguageForConditionalGeneration"], "model_type": "toy_vlm",
        "text_config": cfg.to_dict(), "vision_config": {"hidden_size": 16, "patch_size": 4},
        "image_token_index": 5}))
    tok.save_pretrained(str(src))
    (src / "preprocessor_config.json").write_text("{}")
    assert rename_text_tensor("model.vision_tower.blocks.0.attn.qkv.weight") is None
    assert rename_text_tensor("model.language_model.layers.1.mlp.up_proj.weight") == "model.layers.1.mlp.up_proj.weight"
    assert rename_text_tensor("language_model.lm_head.weight") == "lm_head.weight"

    dst = text_only_checkpoint(src, tmp_path / "text")
    assert not (dst / "preprocessor_config.json").exists()
    reduced = LlamaForCausalLM.from_pretrained(str(dst)).eval()
    ids = torch.tensor([tok("Route this request, please.")["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(reduced(ids).logits, text_model(ids).logits, atol=1e-5)
    out = tmp_path / "text.gguf"
    convert_f16(dst, out)
    names = tensor_names(out)
    assert "blk.1.ffn_up.weight" in names and "output.weight" in names
    assert not any("v." in n[:2] or "mm." in n[:3] for n in names)
    assert json.loads((dst / "text_only.json").read_text())["dropped"] == 3


def test_export_folder_tamper_is_detected(tmp_path, gguf_export):
    import shutil

    path, _ = gguf_export
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    (copy / "Modelfile").write_text((copy / "Modelfile").read_text() + "# edited\n")
    with pytest.raises(ExportError, match="Modelfile"):
        mf.verify(copy)


def test_verification_falls_back_to_the_next_split_with_rows_and_says_so(tmp_path):
    """The quick start's plan snapshot can hold 3 records, all in train: verifying on them beats refusing the
    export, and the report marks the split as not held out."""
    import shutil

    from mashbill.curation.snapshots.snapshot import freeze
    from mashbill.exporters.gguf.gguf_verify import verify_files
    from mashbill.exporters.runs import Snapshot
    from mashbill.factory.store import Store
    from mashbill.specs import load_spec
    from tests.curation.conftest import SHARED, Lib, add_records

    shutil.copytree(SHARED, tmp_path / "lib" / "shared")
    spec = Lib(tmp_path / "lib").write("plan-x", curation={"splits": {"train": 1.0, "eval": 0.0, "test": 0.0}})
    with Store.open(tmp_path / "store") as store:
        add_records(store, load_spec(spec))
    res = freeze(spec, store_path=tmp_path / "store", name="plans", version="1", tokens=False)
    assert res.manifest["splits"]["counts"]["eval"] == 0 and res.manifest["splits"]["counts"]["train"] > 0
    report = verify_files({}, Snapshot(res.path, res.manifest))  # no files: only the split choice is exercised
    assert report["split"] == "train" and report["held_out"] is False
    assert report["rows"] == res.manifest["splits"]["counts"]["train"]


def test_converter_failure_inside_export_gguf_leaves_nothing_under_the_export_folder(tmp_path, plan_snapshot):
    """Issue 13's bad input "a converter failure", end to end through `mashbill export gguf`: a tiny Llama base
    whose config says 100 tokens while its tokenizer has 49,152, so llama.cpp's converter itself refuses it
    after the merge. One line, exit 2, and the export root holds nothing (no half-written folder or file)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from tests.cli.conftest import error_lines, invoke
    from tests.exporters.conftest import smollm2_gguf, write_lineage

    base = tmp_path / "tiny-base"
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=2, num_key_value_heads=1)).save_pretrained(str(base))
    gguf = smollm2_gguf()
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(str(base))
    run = tmp_path / "run"
    model = get_peft_model(LlamaForCausalLM.from_pretrained(str(base)),
                           LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"], task_type="CAUSAL_LM"))
    run.mkdir()
    model.save_pretrained(str(run / "adapter"))
    write_lineage(run, "sft", plan_snapshot, base, "0" * 64)
    root = tmp_path / "exports"
    res = invoke("export", "gguf", run, "--out", root / "planner", "--snapshot", plan_snapshot.path)
    assert res.exit_code == 2, res.output
    [line] = error_lines(res)
    assert f"convert_hf_to_gguf.py failed on {run / 'adapter'} merged into {base}: AssertionError (assert " in line
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert list(root.iterdir()) == [], list(root.iterdir())


def test_flips_count_changed_answers_and_moves_between_right_and_wrong():
    """Two quantizations with the same accuracy can still answer differently: flips say how (issue 13)."""
    from mashbill.exporters.gguf.gguf_verify import flips

    q8 = {"answers": [{"output": "[1]", "exact": True}, {"output": "[2]", "exact": False},
                      {"output": "[3]", "exact": True}, {"output": "[4]", "exact": False}]}
    q4 = {"answers": [{"output": "[1]", "exact": True}, {"output": "[2x]", "exact": True},
                      {"output": "[3x]", "exact": False}, {"output": "[4x]", "exact": False}]}
    f = flips(q8, q4)
    # equal accuracy (2 of 4 each), yet three answers changed: one right->wrong, one wrong->right
    assert f == {"n": 4, "answers_differ": 3, "flip_rate": 0.75, "right_to_wrong": 1, "wrong_to_right": 1}
