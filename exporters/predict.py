"""Run an exported student on the CPU: an ONNX classifier or a GGUF planner, from the file alone.

ONNX: the label names and max length come from the graph's metadata, the fast (Rust) tokenizer from the
`tokenizer/` folder the export wrote beside it. GGUF: the training system prompt and output schema come from
the file's `mashbill.*` metadata; decoding is greedy and constrained by that schema (the factory's llama.cpp
backend), and the output is re-validated.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mashbill import jsontext
from mashbill.exporters.runs import ExportError


def load_predictor(path: str | Path, *, threads: int = 1):
    path = Path(path)
    if not path.is_file():
        raise ExportError(f"{path}: no such artifact")
    if path.suffix == ".onnx":
        return OnnxPredictor(path, threads=threads)
    if path.suffix == ".gguf":
        return GgufPredictor(path, threads=threads)
    raise ExportError(f"{path}: unknown artifact type (expected .onnx or .gguf)")


class OnnxPredictor:
    kind = "onnx"

    def __init__(self, path: Path, *, threads: int = 1):
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError:
            raise ExportError("running an ONNX student needs onnxruntime and tokenizers: "
                              "pip install 'mashbill[export]'") from None
        self.path = Path(path)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        try:
            self.session = ort.InferenceSession(str(self.path), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise ExportError(f"{self.path}: onnxruntime cannot load it ({str(exc).splitlines()[0]})") from None
        meta = self.session.get_modelmeta().custom_metadata_map
        if "mashbill.id2label" not in meta:
            raise ExportError(f"{self.path}: no mashbill.id2label metadata; export it with `mashbill export onnx`")
        self.id2label = {int(k): v for k, v in json.loads(meta["mashbill.id2label"]).items()}
        self.multi_label = meta.get("mashbill.problem_type") == "multi_label_classification"
        self.max_length = int(meta.get("mashbill.max_length", 64))
        self.lineage = json.loads(meta.get("mashbill.lineage", "{}"))
        self.encoder_layers = int(meta["mashbill.encoder_layers"]) if "mashbill.encoder_layers" in meta else None
        tok = self.path.parent / "tokenizer" / "tokenizer.json"
        if not tok.is_file():
            raise ExportError(f"{tok}: missing; the ONNX student needs the tokenizer its export wrote beside it")
        self.tokenizer = Tokenizer.from_file(str(tok))
        self.tokenizer.enable_truncation(self.max_length)
        self.tokenizer.no_padding()

    def logits(self, texts: list[str]) -> np.ndarray:
        encs = self.tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        for i, e in enumerate(encs):
            ids[i, :len(e.ids)] = e.ids
            mask[i, :len(e.ids)] = 1
        return self.session.run(["logits"], {"input_ids": ids, "attention_mask": mask})[0]

    def logits_one(self, text: str) -> np.ndarray:
        """Batch 1, no padding: the latency path (tokenization included)."""
        e = self.tokenizer.encode(text)
        ids = np.asarray([e.ids], dtype=np.int64)
        return self.session.run(["logits"], {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]

    def labels_of(self, logits: np.ndarray) -> list:
        if self.multi_label:
            return [sorted(self.id2label[j] for j in np.nonzero(row > 0)[0]) for row in logits]
        return [self.id2label[int(j)] for j in logits.argmax(-1)]

    def predict(self, texts: list[str]) -> list[dict]:
        """One request at a time, as deployed: dynamic INT8 scales depend on what shares a batch."""
        out = []
        for text in texts:
            row = self.logits_one(text)[0]
            out.append({"text": text, "label": self.labels_of(row[None])[0],
                        "logits": [round(float(x), 5) for x in row]})
        return out


class GgufPredictor:
    kind = "gguf"

    def __init__(self, path: Path, *, threads: int = 1, max_tokens: int = 256, n_ctx: int = 4096):
        from mashbill.exporters.gguf.gguf_meta import read_kv

        self.path = Path(path)
        kv = read_kv(self.path)
        self.system = kv.get("mashbill.system_prompt")
        self.schema = json.loads(kv["mashbill.output_schema"]) if kv.get("mashbill.output_schema") else None
        self.lineage = json.loads(kv.get("mashbill.lineage", "{}"))
        self.max_tokens = max_tokens
        from mashbill.errors import TeacherError
        from mashbill.factory.teachers.llama_cpp import LlamaCppTeacher
        from mashbill.specs.model import Sampling, TeacherSpec

        spec = TeacherSpec(model=str(self.path), n_ctx=n_ctx,
                           sampling=Sampling(temperature=0.0, top_k=1, max_tokens=max_tokens, seed=0),
                           constrained=self.schema is not None)
        try:
            self.teacher = LlamaCppTeacher(spec, threads=threads)
        except TeacherError as exc:
            raise ExportError(f"{self.path}: llama.cpp cannot load this GGUF ({exc})") from None

    def messages(self, text: str, system: str | None = None) -> tuple[dict, ...]:
        system = self.system if system is None else system
        return tuple(([{"role": "system", "content": system}] if system else []) +
                     [{"role": "user", "content": text}])

    def iter_generate(self, conversations: list[tuple[dict, ...]]):
        """One answer dict per conversation, in order, as each is decoded."""
        from mashbill.factory.teachers.base import TeacherRequest

        sampling = self.teacher.spec.sampling.model_dump()
        reqs = [TeacherRequest(str(i), tuple(m), self.schema, sampling) for i, m in enumerate(conversations)]
        for res in self.teacher.generate(reqs):
            yield {"text": res.text, "finish_reason": res.finish_reason, "error": res.error,
                   "completion_tokens": res.completion_tokens, "latency_s": res.latency_s}

    def generate(self, conversations: list[tuple[dict, ...]]) -> list[dict]:
        return list(self.iter_generate(conversations))

    def predict(self, texts: list[str]) -> list[dict]:
        out = []
        for text, res in zip(texts, self.generate([self.messages(t) for t in texts])):
            try:
                parsed = jsontext.loads(res["text"]) if res["text"] is not None else None
            except json.JSONDecodeError:
                parsed = None
            out.append({"text": text, "output": parsed if parsed is not None else res["text"],
                        "json": parsed is not None, "finish_reason": res["finish_reason"]})
        return out

    def close(self) -> None:
        self.teacher.close()
