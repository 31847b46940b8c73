"""The vLLM offline teacher: `vllm.LLM` in-process on a GPU node (optional `gpu` extra).

A thin adapter over the same interface as the other teachers:
- automatic prefix caching on, so the long fixed beginning of the teacher prompt (system prompt,
  catalog, examples) is computed once and reused across records;
- structured outputs from the spec's JSON Schema (`StructuredOutputsParams`, or the older
  `GuidedDecodingParams`, whichever the installed vLLM has), re-validated by the generate loop;
- chunked submission: `generate` takes `runtime.batch_size` requests, runs them as one `LLM.chat`
  call, yields the results, and only pulls the next chunk when the generate loop asks for more,
  which it does after committing the batch. A crash loses at most one chunk.

vllm is imported lazily and only here. This module has not been run on a GPU in this repository's
CI (there is none); `bench/gpu/` has the scripts that check it on one GPU in a few minutes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from itertools import islice
from pathlib import Path
from typing import Iterable, Iterator

from mashbill.errors import TeacherError
from mashbill.factory.teachers.base import TeacherRequest, TeacherResult, attempt
from mashbill.hashing import sha256_file

log = logging.getLogger(__name__)


def _import_vllm():
    try:
        import vllm
    except ImportError:
        raise TeacherError("the vllm teacher needs vLLM on a GPU machine: pip install 'mashbill[gpu]' in its own "
                           "environment (never together with the `train` extra; vllm pins its own torch)") from None
    return vllm


def structured_params(schema: dict) -> dict:
    """SamplingParams keyword arguments for a JSON Schema, for the installed vLLM's API."""
    try:  # vLLM >= 0.10.2
        from vllm.sampling_params import StructuredOutputsParams

        return {"structured_outputs": StructuredOutputsParams(json=schema)}
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(json=schema)}


def model_fingerprint(model: str) -> dict:
    """For a local model folder: sha256 of config.json and the weight files' names and sizes (cheap, stable)."""
    path = Path(model)
    if not path.is_dir():
        return {}
    out = {}
    config = path / "config.json"
    if config.is_file():
        out["config_sha256"] = sha256_file(config)
    weights = sorted((p.name, p.stat().st_size) for p in path.glob("*.safetensors"))
    if weights:
        out["weights"] = hashlib.sha256(json.dumps(weights).encode()).hexdigest()
    return out


class VLLMTeacher:
    backend = "vllm"

    def __init__(self, teacher_spec, *, runtime=None, threads: int | None = None, **llm_kwargs):
        from mashbill.specs.model import Runtime

        vllm = _import_vllm()
        rt = runtime or Runtime()
        self.spec = teacher_spec
        self.model = teacher_spec.model
        self.chunk = rt.batch_size
        self.tensor_parallel = rt.tensor_parallel or 1
        self._vllm = vllm
        kwargs = dict(model=teacher_spec.model, revision=teacher_spec.revision, tensor_parallel_size=self.tensor_parallel,
                      enable_prefix_caching=True, max_model_len=teacher_spec.n_ctx, seed=teacher_spec.sampling.seed,
                      gpu_memory_utilization=rt.gpu_memory_utilization)
        kwargs.update(llm_kwargs)
        try:
            self.llm = vllm.LLM(**kwargs)
        except Exception as exc:  # vLLM raises many kinds (OOM, missing weights, bad TP size)
            raise TeacherError(f"vLLM could not load {teacher_spec.model}: {type(exc).__name__}: {exc}") from None

    def info(self) -> dict:
        info = {"backend": self.backend, "model": self.model, "revision": self.spec.revision,
                "vllm_version": getattr(self._vllm, "__version__", None), "tensor_parallel": self.tensor_parallel,
                "prefix_caching": True, "n_ctx": self.spec.n_ctx, "chunk": self.chunk,
                **model_fingerprint(self.model)}
        try:
            config = self.llm.llm_engine.model_config
            info["dtype"] = str(config.dtype)
            info["served_model_name"] = getattr(config, "served_model_name", None)
        except AttributeError:
            pass
        return info

    def check_schema(self, schema: dict | None) -> None:
        """Compile the schema once with a 1-token request, so an unsupported schema fails before the bulk work."""
        if schema is None or not self.spec.constrained:
            return
        params = self._vllm.SamplingParams(max_tokens=1, **structured_params(schema))
        try:
            self.llm.chat([{"role": "user", "content": "ok"}], params, use_tqdm=False)
        except Exception as exc:
            raise TeacherError(f"vLLM cannot use the output schema for structured outputs: {exc}") from None

    def _params(self, req: TeacherRequest):
        s = req.sampling
        kwargs = dict(temperature=s["temperature"], top_p=s["top_p"], top_k=s.get("top_k") or -1,
                      max_tokens=s["max_tokens"], seed=s["seed"], repetition_penalty=s.get("repeat_penalty", 1.0))
        if req.schema is not None:
            kwargs.update(structured_params(req.schema))
        return self._vllm.SamplingParams(**kwargs)

    def generate(self, requests: Iterable[TeacherRequest]) -> Iterator[TeacherResult]:
        it = iter(requests)
        while True:
            chunk = list(islice(it, self.chunk))
            if not chunk:
                return
            start = time.perf_counter()
            try:
                outputs = self.llm.chat([list(r.messages) for r in chunk], [self._params(r) for r in chunk],
                                        use_tqdm=False)
            except Exception as exc:  # the whole chunk failed; each record keeps the error and is retried next run
                latency = (time.perf_counter() - start) / len(chunk)
                msg = f"{type(exc).__name__}: {exc}"
                for r in chunk:
                    yield TeacherResult(r, None, None, [attempt(r, self, latency, error=msg)], error=msg)
                continue
            latency = (time.perf_counter() - start) / len(chunk)  # amortised: the chunk runs as one batch
            for req, out in zip(chunk, outputs):
                completion = out.outputs[0]
                call = attempt(req, self, latency, len(out.prompt_token_ids or ()),
                               getattr(out, "num_cached_tokens", None), len(completion.token_ids or ()),
                               completion.finish_reason)
                yield TeacherResult(req, completion.text, completion.finish_reason, [call])

    def close(self) -> None:
        self.llm = None
