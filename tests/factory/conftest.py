"""Fixtures for the factory tests (generate, guards, accounting, shards, slurm, teachers): real servers on
127.0.0.1 and small specs written into tmp_path.

- `llama_server`: llama-cpp-python's OpenAI-compatible server serving the embedded SmolLM2 GGUF
  (alias `smollm2`), started once per session on a free port and stopped at the end.
- `fault_server`: starts our own fault-injecting server (fault_server.py) with a schedule.
- `write_spec`: a plan spec (the tiny fixtures' prompt, taxonomy, tools and schema) with N seeds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import free_port
from tests.factory.fault_server import FaultServer
from tests.factory.teacher_helpers import SHARED, lock_spec, queries


@pytest.fixture
def write_spec(tmp_path):
    def write(name: str = "fault-plan", *, n: int = 20, seeds: list[dict] | None = None, teacher: dict | None = None,
              runtime: dict | None = None, guards: dict | None = None, folder: Path | None = None) -> Path:
        spec = {
            "name": name, "version": 1, "kind": "plan",
            "seeds": [{"inline": seeds if seeds is not None else queries(n)}],
            "prompt": {"file": str(SHARED / "tiny-prompt@1.yaml"), "framings": ["A", "B"],
                       "teacher": {"system": "{{ rules }}\n{{ tool_catalog }}\n{{ examples }}",
                                   "user": "{{ framing }}\nCategories:\n{{ taxonomy }}\n\nRequest: {{ query }}"},
                       "training": {"system": "{{ framing }}\n{{ taxonomy }}\n{{ rules }}", "user": "{{ query }}"}},
            "taxonomy": {"file": str(SHARED / "tiny-taxonomy@1.yaml")},
            "tools": {"file": str(SHARED / "tiny-tools@1.yaml")},
            "teacher": {"backend": "openai", "model": "fault-model",
                        "sampling": {"temperature": 0.0, "max_tokens": 48, "seed": 3}, **(teacher or {})},
            "output_schema": str(SHARED / "tiny-plan@1.json"),
            "runtime": {"batch_size": 5, "concurrency": 4, "timeout_s": 5, "max_retries": 2, "backoff_s": 0.01,
                        "backoff_max_s": 0.05, **(runtime or {})},
        }
        if guards:
            spec["guards"] = guards
        path = (folder or tmp_path) / f"{name}@1.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
        return lock_spec(path)

    return write


@pytest.fixture
def fault_server():
    started: list[FaultServer] = []

    def start(**kwargs) -> FaultServer:
        server = FaultServer(**kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def llama_server():
    """llama-cpp-python's OpenAI-compatible server with the embedded SmolLM2 model, as `smollm2`."""
    from mashbill.factory.teachers.embedded import resolve_model_path

    model = resolve_model_path("embedded:smollm2-135m-instruct")
    port = free_port()
    log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"mashbill-llama-server-{port}.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias",
                             "smollm2", "--host", "127.0.0.1", "--port", str(port), "--n_threads", "2",
                             "--n_ctx", "2048", "--seed", "3"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}; see {log.name} "
                                   "(its extra deps: pip install -e '.[dev]')")
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not start within 120 s; see {log.name}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
