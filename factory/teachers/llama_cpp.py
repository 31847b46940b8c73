"""The embedded teacher: llama.cpp in-process (llama-cpp-python), schema-constrained and seeded.

Prefix reuse: llama-cpp-python keeps the KV cache of the previous prompt and only evaluates the
tokens after the longest common prefix, so the teacher prompt puts the long fixed system prompt
first. We measure the reused tokens per call (cached_tokens) from the evaluated-token history.

Constrained decoding: `llguidance` (default) computes token masks in microseconds and drives
llama.cpp through a logits processor; `gbnf` uses llama.cpp's own JSON-schema grammar. A schema
that an engine cannot compile is an error before any bulk work, never a silent fallback.
"""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from typing import Iterable, Iterator

import numpy as np

from mashbill.factory.teachers.base import TeacherRequest, TeacherResult, attempt
from mashbill.factory.teachers.embedded import file_sha256, resolve_model_path
from mashbill.errors import TeacherError

log = logging.getLogger(__name__)


def _import_llama():
    try:
        import llama_cpp
    except ImportError:
        raise TeacherError("the embedded teacher needs llama-cpp-python: run `bash scripts/setup.sh` "
                           "(it builds and caches the wheel) or `pip install 'mashbill[embedded]'`") from None
    return llama_cpp


class _LLGuidanceProcessor:
    """A llama-cpp-python logits processor that applies llguidance's token mask for one request."""

    def __init__(self, tokenizer, grammar: str):
        import llguidance
        import llguidance.numpy as lnp

        self._lnp = lnp
        self.matcher = llguidance.LLMatcher(tokenizer, grammar)
        if self.matcher.is_error():
            raise TeacherError(f"llguidance rejected the grammar: {self.matcher.get_error()}")
        self.prompt_len: int | None = None  # the first call sees the prompt alone
        self.consumed = 0
        self.mask = lnp.allocate_token_bitmask(1, tokenizer.vocab_size)

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if self.prompt_len is None:
            self.prompt_len = len(input_ids)
        generated = len(input_ids) - self.prompt_len
        while self.consumed < generated:
            self.matcher.consume_token(int(input_ids[self.prompt_len + self.consumed]))
            self.consumed += 1
        self._lnp.fill_next_token_bitmask(self.matcher, self.mask, 0)
        n = scores.shape[-1]
        allowed = np.unpackbits(self.mask[0].view(np.uint8), bitorder="little")[:n].astype(bool)
        scores = scores.copy()
        scores[~allowed] = -np.inf
        return scores


def _busy_now(window: float = 0.25) -> float | None:
    """Cores busy right now, machine-wide, from two reads of /proc/stat `window` seconds apart (None off Linux)."""
    def read() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle

    try:
        total0, idle0 = read()
        time.sleep(window)
        total1, idle1 = read()
    except (OSError, ValueError, IndexError):
        return None
    if total1 <= total0:
        return None
    return (1 - (idle1 - idle0) / (total1 - total0)) * (os.cpu_count() or 1)


def free_cores(cores: int | None = None, load: float | None = None, busy: float | None = None,
               total: int | None = None) -> int:
    """CPU threads for llama.cpp: the cores this process may use (its affinity, as SLURM and taskset set it),
    capped by the machine's cores less the busy ones, at least 1. Busy is the 1-minute load average, or the
    cores busy right now when fewer (the load average still counts the step this process just finished).
    Threads beyond the free cores wait on each other (issue 26: 2 threads at load 6-14 took 35 minutes for the
    quick start's plans where 1 thread took 10); on an idle machine every core is free, as before."""
    if cores is None:
        from mashbill.cpus import usable_cpus

        cores = usable_cpus()
    total = total if total is not None else max(os.cpu_count() or 1, cores)
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):
            load = 0.0
    if busy is None:
        busy = _busy_now()
    used = load if busy is None else min(load, busy)
    return max(1, min(cores, round(total - used)))


class LlamaCppTeacher:
    backend = "llama_cpp"

    def __init__(self, teacher_spec, *, threads: int | None = None, grammar_engine: str | None = None,
                 verbose: bool = False):
        llama_cpp = _import_llama()
        self.spec = teacher_spec
        self.model = teacher_spec.model
        self.path = resolve_model_path(teacher_spec.model)
        self.grammar_engine = grammar_engine or "llguidance"
        self.threads = threads or free_cores()
        try:
            self.llm = llama_cpp.Llama(model_path=str(self.path), n_ctx=teacher_spec.n_ctx, n_threads=self.threads,
                                       n_threads_batch=self.threads, seed=teacher_spec.sampling.seed,
                                       verbose=verbose, n_batch=512)
        except ValueError as exc:
            raise TeacherError(f"llama.cpp could not load {self.path}: {exc}") from None
        self._grammars: dict[str, object] = {}
        self._lltokenizer = None

    def info(self) -> dict:
        return {"backend": self.backend, "model": self.model, "path": str(self.path),
                "sha256": file_sha256(self.path), "grammar_engine": self.grammar_engine,
                "n_ctx": self.spec.n_ctx, "threads": self.threads}

    # ------------------------------------------------------------ grammar

    def _gbnf(self, schema: dict):
        from llama_cpp import LlamaGrammar

        key = json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            try:
                self._grammars[key] = LlamaGrammar.from_json_schema(key, verbose=False)
            except Exception as exc:  # llama.cpp raises bare exceptions for unsupported schema features
                raise TeacherError(f"llama.cpp cannot turn the output schema into a grammar: {exc}") from None
        return self._grammars[key]

    def _llg_grammar(self, schema: dict) -> str:
        import llguidance

        key = "llg:" + json.dumps(schema, sort_keys=True)
        if key not in self._grammars:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
            self._grammars[key] = grammar
        if self._lltokenizer is None:
            from llguidance.llamacpp import lltokenizer_from_vocab
            import llama_cpp

            vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
            with warnings.catch_warnings():  # llguidance calls a deprecated alias once per vocab entry
                warnings.simplefilter("ignore", DeprecationWarning)
                self._lltokenizer = lltokenizer_from_vocab(vocab)
        return self._grammars[key]

    def check_schema(self, schema: dict | None) -> None:
        """Compile the schema once up front, so an unsupported schema fails before the bulk work."""
        if schema is None or not self.spec.constrained:
            return
        if self.grammar_engine == "gbnf":
            self._gbnf(schema)
        else:
            import llguidance

            grammar = self._llg_grammar(schema)
            matcher = llguidance.LLMatcher(self._lltokenizer, grammar)
            if matcher.is_error():
                raise TeacherError(f"llguidance cannot compile the output schema: {matcher.get_error()}")

    # ------------------------------------------------------------ generation

    def _one(self, req: TeacherRequest) -> TeacherResult:
        import llama_cpp

        s = req.sampling
        kwargs = dict(temperature=s["temperature"], top_p=s["top_p"], top_k=s["top_k"],
                      max_tokens=s["max_tokens"], seed=s["seed"], repeat_penalty=s.get("repeat_penalty", 1.0))
        before = np.array(self.llm.input_ids[: self.llm.n_tokens], copy=True)
        if req.schema is not None and self.spec.constrained:
            if self.grammar_engine == "gbnf":
                kwargs["grammar"] = self._gbnf(req.schema)
            else:
                grammar = self._llg_grammar(req.schema)
                kwargs["logits_processor"] = llama_cpp.LogitsProcessorList(
                    [_LLGuidanceProcessor(self._lltokenizer, grammar)])
        start = time.perf_counter()
        try:
            out = self.llm.create_chat_completion(messages=list(req.messages), **kwargs)
        except Exception as exc:  # keep the record: a failed call is stored with its error
            latency = time.perf_counter() - start
            msg = f"{type(exc).__name__}: {exc}"
            return TeacherResult(req, None, None, [attempt(req, self, latency, error=msg)], error=msg)
        latency = time.perf_counter() - start
        usage = out.get("usage", {})
        choice = out["choices"][0]
        prompt_tokens = usage.get("prompt_tokens")
        cached = None
        if prompt_tokens:
            now = self.llm.input_ids[:prompt_tokens]
            n = min(len(before), len(now))
            diff = np.nonzero(before[:n] != now[:n])[0]
            cached = int(diff[0]) if len(diff) else n
        call = attempt(req, self, latency, prompt_tokens, cached, usage.get("completion_tokens"),
                       choice.get("finish_reason"))
        return TeacherResult(req, choice["message"].get("content") or "", choice.get("finish_reason"), [call])

    def generate(self, requests: Iterable[TeacherRequest]) -> Iterator[TeacherResult]:
        for req in requests:
            yield self._one(req)

    def close(self) -> None:
        if hasattr(self.llm, "close"):
            self.llm.close()
