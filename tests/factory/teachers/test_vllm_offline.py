"""The vLLM offline adapter. vLLM cannot be installed or run on the CPU machines here, so:

- without vllm, choosing the backend fails with the extra to install;
- the chunking contract (each chunk stored before the next is submitted) is checked through the real
  adapter and generate loop with a stand-in `vllm` module that records what the store held at each
  `LLM.chat` call (it replaces the third-party library only, none of our code);
- with vllm and a GPU, MASHBILL_VLLM_MODEL=<small instruct model> runs the adapter for real.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types

import pytest
import yaml
from teacher_helpers import SHARED

from mashbill.errors import TeacherError
from mashbill.factory.generate.generate import generate
from mashbill.factory.store import Store
from mashbill.factory.teachers import make_teacher
from mashbill.specs import load_spec
from mashbill.specs.model import TeacherSpec

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def vllm_spec(tmp_path, model="stand-in", batch_size=4):
    spec = {"name": "vllm-complexity", "version": 1, "kind": "complexity",
            "seeds": [{"path": str(SHARED / "seeds.jsonl")}],
            "prompt": {"file": str(SHARED / "tiny-prompt@1.yaml"),
                       "teacher": {"system": "Label how complex a request is: trivial, moderate, complex or "
                                             "memory_recall. Answer in JSON.", "user": "Request: {{ query }}"},
                       "training": {"system": "Label how complex a request is.", "user": "{{ query }}"}},
            "teacher": {"backend": "vllm", "model": model, "sampling": {"temperature": 0.0, "max_tokens": 24}},
            "output_schema": str(SHARED / "tiny-label@1.json"),
            "runtime": {"batch_size": batch_size}}
    path = tmp_path / "vllm-complexity@1.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return load_spec(path)


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed")
def test_without_vllm_the_error_names_the_extra():
    with pytest.raises(TeacherError, match=r"pip install 'mashbill\[gpu\]'"):
        make_teacher(TeacherSpec(backend="vllm", model="Qwen/Qwen2.5-0.5B-Instruct"))


@pytest.fixture
def stand_in_vllm(monkeypatch):
    """A `vllm` module with LLM, SamplingParams and StructuredOutputsParams shaped like vLLM's."""
    state = {"chats": [], "store": None, "llm_kwargs": None}

    class SamplingParams:
        def __init__(self, **kw):
            self.kw = kw

    class StructuredOutputsParams:
        def __init__(self, json=None):
            self.json = json

    class LLM:
        def __init__(self, **kw):
            state["llm_kwargs"] = kw

        def chat(self, conversations, params, use_tqdm=True):
            stored = state["store"].con.execute("SELECT count(*) FROM records").fetchone()[0]
            state["chats"].append((len(conversations), stored))
            outs = []
            for conv, p in zip(conversations, params):
                assert p.kw["structured_outputs"].json["required"] == ["complexity"]
                completion = types.SimpleNamespace(text=json.dumps({"complexity": "trivial"}), finish_reason="stop",
                                                   token_ids=[1, 2, 3])
                outs.append(types.SimpleNamespace(outputs=[completion], prompt_token_ids=list(range(20)),
                                                  num_cached_tokens=12))
            return outs

    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams, vllm.__version__ = LLM, SamplingParams, "stand-in"
    sampling = types.ModuleType("vllm.sampling_params")
    sampling.StructuredOutputsParams = StructuredOutputsParams
    vllm.sampling_params = sampling
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    return state


def test_each_chunk_is_stored_before_the_next_is_submitted(stand_in_vllm, tmp_path):
    rs = vllm_spec(tmp_path, batch_size=5)
    with Store.open(tmp_path / "store") as store:
        stand_in_vllm["store"] = store
        teacher = make_teacher(rs.spec.teacher, runtime=rs.spec.runtime)
        summary = generate(rs, store, teacher)
        rows = store.con.execute("SELECT sum(cached_tokens), sum(prompt_tokens) FROM teacher_calls").fetchone()
    assert summary.accepted == summary.requested == 12
    # 12 records in chunks of 5: each chat call saw every earlier chunk already committed
    assert stand_in_vllm["chats"] == [(5, 0), (5, 5), (2, 10)]
    kw = stand_in_vllm["llm_kwargs"]
    assert kw["enable_prefix_caching"] is True and kw["max_model_len"] == 4096 and kw["tensor_parallel_size"] == 1
    assert rows == (12 * 12, 20 * 12)  # prefix-cache accounting comes through


@pytest.mark.skipif(not (HAS_VLLM and os.environ.get("MASHBILL_VLLM_MODEL")),
                    reason="needs vllm, a GPU and MASHBILL_VLLM_MODEL (see bench/gpu/README.md)")
def test_real_vllm_offline(tmp_path):  # pragma: no cover - GPU only
    rs = vllm_spec(tmp_path, model=os.environ["MASHBILL_VLLM_MODEL"], batch_size=8)
    with Store.open(tmp_path / "store") as store:
        teacher = make_teacher(rs.spec.teacher, runtime=rs.spec.runtime)
        teacher.check_schema(rs.output_schema)
        summary = generate(rs, store, teacher)
        teacher.close()
    assert summary.requested == summary.accepted + summary.rejected + summary.failed == 12
    assert summary.failed == 0 and summary.accepted >= 9
