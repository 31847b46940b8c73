"""Classifier run -> ONNX (dynamic batch and sequence) -> INT8 dynamic quantization, lineage in the metadata.

The graph takes `input_ids` and `attention_mask` (int64, [batch, sequence]) and returns `logits`. The fast
tokenizer's files are written beside the graphs, so `mashbill predict` and the parity check tokenize exactly
as the run did. Lineage (spec hashes, snapshot id, run) and the label names ride in the graph's
`metadata_props`, so a copied .onnx file still says where it came from.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from mashbill.exporters.runs import ExportError, Run

log = logging.getLogger(__name__)

OPSET = 18
FP32 = "model.onnx"
INT8 = "model.int8.onnx"
META_LINEAGE = "mashbill.lineage"
META_LABELS = "mashbill.id2label"
META_PROBLEM = "mashbill.problem_type"
META_MAX_LEN = "mashbill.max_length"
META_LAYERS = "mashbill.encoder_layers"  # a k-layer student (trainers: student_layers) says so in the file


def _need(module: str, extra: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ExportError(f"exporting needs `{module}`: pip install 'mashbill[{extra}]'") from None


def load_classifier(run: Run):
    """The run's HF sequence classifier and its fast tokenizer, in eval mode."""
    _need("torch", "train")
    transformers = _need("transformers", "train")
    try:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(str(run.model_dir))
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(run.model_dir), use_fast=True)
    except Exception as exc:  # OSError, ValueError, safetensors' SafetensorError on a truncated file, ...
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ExportError(f"{run.model_dir}: cannot load the classifier ({type(exc).__name__}: {first})") from None
    if not getattr(tokenizer, "is_fast", False):
        raise ExportError(f"{run.model_dir}: no fast (Rust) tokenizer (tokenizer.json) to export beside the graph")
    model.eval()
    return model, tokenizer


def problem_type(config) -> str:
    return config.problem_type or "single_label_classification"


def export_classifier(run: Run, out: Path, lineage: dict, *, max_length: int = 64) -> dict:
    """Write model.onnx, model.int8.onnx and the tokenizer files into `out`; return their paths."""
    import torch

    onnx = _need("onnx", "export")
    _need("onnxruntime", "export")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model, tokenizer = load_classifier(run)

    class Logits(torch.nn.Module):  # a plain (ids, mask) -> logits signature for the exporter
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask).logits

    enc = tokenizer(["an example request", "a second, somewhat longer example request"], padding=True,
                    return_tensors="pt")
    fp32 = out / FP32
    raw = out / ".raw.onnx"
    try:
        torch.onnx.export(Logits(model), (enc["input_ids"], enc["attention_mask"]), str(raw),
                          input_names=["input_ids", "attention_mask"], output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                        "attention_mask": {0: "batch", 1: "sequence"}, "logits": {0: "batch"}},
                          opset_version=OPSET, dynamo=False)
    except Exception as exc:  # the exporter raises many types; one line is what the user needs
        raise ExportError(f"torch.onnx.export failed for {run.model_dir}: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}") from None
    lineage = {**lineage, "encoder": encoder_layers(model.config)}
    meta = {META_LINEAGE: json.dumps(lineage, sort_keys=True), META_LAYERS: str(model.config.num_hidden_layers),
            META_LABELS: json.dumps({int(k): v for k, v in model.config.id2label.items()}, sort_keys=True),
            META_PROBLEM: problem_type(model.config), META_MAX_LEN: str(max_length)}
    _save_with_meta(onnx, raw, fp32, meta)
    raw.unlink()
    int8 = out / INT8
    tmp8 = out / ".raw.int8.onnx"
    quantize_dynamic(str(fp32), str(tmp8), weight_type=QuantType.QInt8, per_channel=True)
    _save_with_meta(onnx, tmp8, int8, meta)
    tmp8.unlink()
    tokenizer.save_pretrained(str(out / "tokenizer"))
    return {"fp32": fp32, "int8": int8, "tokenizer": out / "tokenizer" / "tokenizer.json"}


def encoder_layers(config) -> dict:
    """The encoder's layer count and, for a student cut from a deeper base, which base layers it kept."""
    return {"layers": int(config.num_hidden_layers), "kept_base_layers": getattr(config, "mashbill_kept_layers", None)}


def _save_with_meta(onnx, src: Path, dst: Path, meta: dict) -> None:
    m = onnx.load(str(src))
    del m.metadata_props[:]
    for k, v in sorted(meta.items()):
        p = m.metadata_props.add()
        p.key, p.value = k, v
    onnx.save(m, str(dst))


def read_metadata(path: Path) -> dict:
    """The mashbill.* metadata of an ONNX file, without loading the weights into a session."""
    onnx = _need("onnx", "export")
    m = onnx.load(str(path), load_external_data=False)
    return {p.key: p.value for p in m.metadata_props}
