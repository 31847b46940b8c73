"""The OpenAI-compatible backend against a real server: llama-cpp-python's, serving SmolLM2 on 127.0.0.1.

Also the preflight's clear messages (wrong model, unreachable server, no structured output), which
must come before any bulk work: the store then holds no run at all.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
import yaml
from teacher_helpers import SHARED, loads, lock_spec, run_cli, sql

from mashbill.cli.make.generate import run_generate
from mashbill.errors import TeacherError
from mashbill.factory.teachers.openai_compat import normalize_base_url, retry_after_s
from tests.conftest import free_port


def complexity_spec(tmp_path, *, model="smollm2", max_tokens=16, runtime=None, name="oa-complexity", **teacher):
    """tiny-complexity with an openai teacher: a 4-way label, so the 135M model answers in ~10 tokens."""
    spec = {
        "name": name, "version": 1, "kind": "complexity",
        "seeds": [{"path": str(SHARED / "seeds.jsonl")}],
        "prompt": {"file": str(SHARED / "tiny-prompt@1.yaml"),
                   "teacher": {"system": "Label how complex a request is: trivial, moderate, complex or memory_recall.",
                               "user": "Request: {{ query }}"},
                   "training": {"system": "Label how complex a request is.", "user": "{{ query }}"}},
        "teacher": {"backend": "openai", "model": model,
                    "sampling": {"temperature": 0.0, "max_tokens": max_tokens, "seed": 3}, **teacher},
        "output_schema": str(SHARED / "tiny-label@1.json"),
        "runtime": {"batch_size": 2, "concurrency": 2, "timeout_s": 120, **(runtime or {})},
    }
    path = tmp_path / f"{name}@1.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return lock_spec(path)


def test_real_server_structured_output_accounting_and_reproducibility(llama_server, tmp_path):
    spec = complexity_spec(tmp_path)
    store = tmp_path / "store"
    summary = run_generate(str(spec), store, limit=5, progress=False, base_url=llama_server)
    assert summary.requested == 5 == summary.accepted + summary.rejected + summary.failed
    assert summary.failed == 0
    assert summary.accepted >= 1  # schema-constrained: the label is an enum value
    for output, in sql(store, "SELECT CAST(output AS VARCHAR) FROM records WHERE status = 'accepted'"):
        assert loads(output)["complexity"] in ("trivial", "moderate", "complex", "memory_recall")

    # every call keeps its finish reason and token counts
    calls = sql(store, "SELECT finish_reason, prompt_tokens, completion_tokens, error FROM teacher_calls")
    assert len(calls) == 5
    assert all(f in ("stop", "length") and p > 0 and c > 0 and e is None for f, p, c, e in calls)

    # reproducibility: backend, model, sampling and seed, and what the server itself reported
    backend, model, info, sampling, stats = sql(store, "SELECT backend, model, model_info, sampling, stats FROM runs")[0]
    info, sampling, stats = loads(info), loads(sampling), loads(stats)
    assert (backend, model) == ("openai", "smollm2")
    assert sampling["seed"] == 3 and sampling["temperature"] == 0.0
    assert info["base_url"] == llama_server
    assert info["structured_output"] == "json_object"  # llama-cpp-python refuses OpenAI's json_schema form
    assert info["server"]["models"] == ["smollm2"] and info["server"]["reported_model"] == "smollm2"
    # accounting stored with the run
    assert stats["calls"] == 5 and stats["requested"] == 5 and stats["latency_s"]["p50"] > 0
    assert stats["tokens_in"] > 0 and stats["tokens_out"] > 0


def test_length_finish_counts_as_truncated(llama_server, tmp_path):
    spec = complexity_spec(tmp_path, max_tokens=2, name="oa-trunc")
    store = tmp_path / "store"
    summary = run_generate(str(spec), store, limit=2, progress=False, base_url=llama_server)
    assert summary.rejected == 2 and summary.accepted == 0
    assert summary.codes["TRUNC001"] == 2
    assert {f for f, in sql(store, "SELECT finish_reason FROM teacher_calls")} == {"length"}


def test_wrong_model_name_fails_before_bulk_work(llama_server, tmp_path):
    spec = complexity_spec(tmp_path, model="no-such-model")
    store = tmp_path / "store"
    proc = run_cli("generate", spec, "--store", store, "--base-url", llama_server, "--no-progress")
    assert proc.returncode == 2
    assert "does not serve model 'no-such-model'" in proc.stderr and "smollm2" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert sql(store, "SELECT count(*) FROM runs")[0][0] == 0


def test_unreachable_server_fails_before_bulk_work(tmp_path):
    spec = complexity_spec(tmp_path)
    store = tmp_path / "store"
    url = f"http://127.0.0.1:{free_port()}/v1"
    proc = run_cli("generate", spec, "--store", store, "--base-url", url, "--no-progress")
    assert proc.returncode == 2
    assert f"cannot reach the teacher server at {url}" in proc.stderr and "Traceback" not in proc.stderr
    assert sql(store, "SELECT count(*) FROM runs")[0][0] == 0


def test_server_without_structured_output_fails_before_bulk_work(fault_server, tmp_path):
    server = fault_server(structured=False)
    spec = complexity_spec(tmp_path, model="fault-model")
    store = tmp_path / "store"
    proc = run_cli("generate", spec, "--store", store, "--base-url", server.url, "--no-progress")
    assert proc.returncode == 2
    assert "does not enforce structured output" in proc.stderr and "constrained: false" in proc.stderr
    assert sql(store, "SELECT count(*) FROM runs")[0][0] == 0
    assert len(server.log) == 4  # one probe per structured-output mode, no record request


def test_a_format_the_server_refuses_is_named(llama_server, tmp_path):
    spec = complexity_spec(tmp_path, runtime={"structured_output": "json_schema"})
    with pytest.raises(TeacherError, match=r"tried json_schema: HTTP \d{3}"):
        run_generate(str(spec), tmp_path / "store", progress=False, base_url=llama_server)


def test_unconstrained_teacher_skips_the_structured_output_check(fault_server, tmp_path):
    server = fault_server(structured=False)
    spec = complexity_spec(tmp_path, model="fault-model", constrained=False)
    store = tmp_path / "store"
    summary = run_generate(str(spec), store, limit=3, progress=False, base_url=server.url)
    assert summary.rejected == 3 and summary.codes["PARSE001"] == 3  # prose is stored and rejected, not dropped
    info = loads(sql(store, "SELECT model_info FROM runs")[0][0])
    assert info["server"]["reported_model"] == "fault-model" and info["structured_output"] == "auto"


def test_missing_base_url_and_bad_url_are_clear(tmp_path):
    with pytest.raises(TeacherError, match="no server URL is set"):
        run_generate(str(complexity_spec(tmp_path)), tmp_path / "s", progress=False)
    with pytest.raises(TeacherError, match="not an http"):
        normalize_base_url("127.0.0.1:8000")
    assert normalize_base_url("http://h:8000") == "http://h:8000/v1"
    assert normalize_base_url("http://h:8000/v1/") == "http://h:8000/v1"


def test_retry_after_header_forms():
    assert retry_after_s("2") == 2.0
    assert retry_after_s("garbage") is None and retry_after_s(None) is None
    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 <= retry_after_s(when) <= 30
    assert retry_after_s("99999") == 600.0
    assert json.loads(json.dumps(retry_after_s("0"))) == 0.0


@pytest.mark.parametrize("penalty", [None, 1.0, 1.3])
def test_the_spec_repeat_penalty_is_always_sent(fault_server, tmp_path, penalty):
    """llama.cpp's server applies its own repeat_penalty (1.1) to a request that names none, so a spec's 1.0
    (also the default when the spec says nothing) must be sent, under both names servers read."""
    server = fault_server(model="fault-model")
    sampling = {"temperature": 0.0, "max_tokens": 16, "seed": 3,
                **({} if penalty is None else {"repeat_penalty": penalty})}
    spec = complexity_spec(tmp_path, model="fault-model", sampling=sampling)
    run_generate(str(spec), tmp_path / "store", limit=2, progress=False, base_url=server.url)
    asked = [s for s in server.sampling if s.get("max_tokens") == 16]
    assert asked and all(s["repeat_penalty"] == s["repetition_penalty"] == (penalty or 1.0) for s in asked), asked


def test_httpcore_finds_its_async_library_without_a_failing_import():
    """httpcore asks `import sniffio` on every lock and event of every request; without the package that import
    fails and walks sys.path each time (a quarter of the teacher's CPU against a fast server). The openai extra
    installs it."""
    import importlib.util

    from httpcore._synchronization import current_async_library

    assert importlib.util.find_spec("sniffio") is not None
    assert asyncio.run(_library(current_async_library)) == "asyncio"


async def _library(probe):
    return probe()
