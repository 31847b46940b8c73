"""bench/yield.py --teacher server: the embedded teacher's GGUF behind llama.cpp's OpenAI-compatible server.

llama-cpp-python's server (`python -m llama_cpp.server`, as tests/factory/conftest.py's `llama_server` fixture
starts it) serves the very GGUF file the embedded teacher loads, as model `smollm2`, on 127.0.0.1 only. The
yield methods then run through the one generate loop with the OpenAI-compatible teacher
(factory/teachers/openai_compat.py) instead of the in-process one: same prompt, schema, sampling and rule set.
NeMo Data Designer (bench/yield_dd.py) asks the same server.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

MODEL_ALIAS = "smollm2"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """A llama.cpp server on 127.0.0.1 serving `model` (a GGUF path) as `smollm2`; a context manager."""

    def __init__(self, model: Path, *, threads: int = 1, n_ctx: int = 4096, seed: int = 0, log_dir: Path | None = None):
        self.model, self.threads, self.n_ctx, self.seed = Path(model), threads, n_ctx, seed
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = Path(log_dir or os.environ.get("TMPDIR", "/tmp")) / f"mashbill-yield-server-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--model_alias", MODEL_ALIAS,
                "--host", "127.0.0.1", "--port", str(self.port), "--n_threads", str(self.threads),
                "--n_threads_batch", str(self.threads), "--n_ctx", str(self.n_ctx), "--seed", str(self.seed)]

    def start(self, timeout_s: float = 180.0) -> "LlamaServer":
        import httpx

        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}; see {self.log_path} "
                                   "(its extra deps: pip install -e '.[dev]')")
            try:
                if httpx.get(self.url + "/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"llama_cpp.server did not answer within {timeout_s:.0f} s; see {self.log_path}")
            time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "LlamaServer":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


def embedded_gguf(teacher_model: str) -> Path:
    """The GGUF file the embedded teacher `teacher_model` (e.g. embedded:smollm2-135m-instruct) loads."""
    from mashbill.factory.teachers.embedded import resolve_model_path

    return Path(resolve_model_path(teacher_model))


def server_teacher(teacher: dict) -> dict:
    """The spec's teacher section (a dict) asked through the server instead: same model file, same sampling. The
    URL is not written into it (the teacher gets it as `--base-url` does): a port would change the spec hash."""
    return {"backend": "openai", "model": MODEL_ALIAS, "n_ctx": teacher.get("n_ctx", 4096),
            "sampling": dict(teacher.get("sampling") or {}), "constrained": teacher.get("constrained", True)}


def same_prompts_work(rs, key_hash: str):
    """The spec's seed work, but each job's prompt (its framing) drawn with the record id it has under the spec
    hash `key_hash` (the embedded method's), not under this spec's: a server run asks exactly the prompts the
    embedded run asks, so a difference between them is the teacher path's, not the framings'."""
    import dataclasses

    from mashbill.factory.generate.work import SpecWork
    from mashbill.factory.records import record_id

    class SamePrompts(SpecWork):
        def jobs(self, *, limit=None, shard=None):
            return [dataclasses.replace(j, prompt_key=record_id(key_hash, {k: v for k, v in j.inputs.items()
                                                                           if k != "sample"}))
                    for j in super().jobs(limit=limit, shard=shard)]

    return SamePrompts(rs)


# One request in flight: llama.cpp's server answers one at a time, so a second would only queue and its wait
# would count as teacher seconds. The schema goes as llama-cpp-python expects it (json_object + schema).
SERVER_RUNTIME = {"concurrency": 1, "batch_size": 8, "timeout_s": 600, "max_retries": 1,
                  "structured_output": "json_object"}
